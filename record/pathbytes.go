package record

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A file's name is bytes, not text: Linux allows any byte but '/' and
// NUL in a name, and JSON strings are Unicode (encoding/json turns each
// byte that is not UTF-8 into U+FFFD). A File's Path and HostPath hold the
// exact bytes in Go. In JSON, "path" is the name itself when it is valid
// UTF-8; otherwise "path" shows it with U+FFFD in place of the bytes that
// are not, for reading, and "path_b64" holds the exact bytes (standard
// base64), which readers take instead. The same goes for "host_path" and
// "host_path_b64", "first_path" and "first_path_b64", and for a kernel
// cache's "root" and "root_b64".

// byteExactNames marks the types whose JSON decoders only add the bytes
// of their names to what encoding/json decodes of their fields.
type byteExactNames interface{ byteExactNames() }

func (File) byteExactNames()         {}
func (Cache) byteExactNames()        {}
func (CacheFailure) byteExactNames() {}
func (OtherRoot) byteExactNames()    {}
func (JITUprobe) byteExactNames()    {}
func (Download) byteExactNames()     {}
func (DownloadFile) byteExactNames() {}
func (Process) byteExactNames()      {}

// fileFields is File without its methods, so that encoding/json encodes
// its fields as it would File's.
type fileFields File

// fileJSON is File as JSON holds it.
type fileJSON struct {
	fileFields
	PathB64      string `json:"path_b64,omitempty"`
	HostPathB64  string `json:"host_path_b64,omitempty"`
	FirstPathB64 string `json:"first_path_b64,omitempty"`
}

// MarshalJSON writes f with its names byte-exact (see fileJSON).
func (f File) MarshalJSON() ([]byte, error) {
	w := fileJSON{fileFields: fileFields(f)}
	w.Path, w.PathB64 = nameJSON(f.Path)
	w.HostPath, w.HostPathB64 = nameJSON(f.HostPath)
	w.FirstPath, w.FirstPathB64 = nameJSON(f.FirstPath)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a File written by MarshalJSON, or by a version that
// wrote "path" alone.
func (f *File) UnmarshalJSON(b []byte) error {
	var w fileJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON(w.Path, w.PathB64); err != nil {
		return fmt.Errorf("file %d: path_b64: %w", w.ID, err)
	}
	if w.HostPath, err = nameFromJSON(w.HostPath, w.HostPathB64); err != nil {
		return fmt.Errorf("file %d: host_path_b64: %w", w.ID, err)
	}
	if w.FirstPath, err = nameFromJSON(w.FirstPath, w.FirstPathB64); err != nil {
		return fmt.Errorf("file %d: first_path_b64: %w", w.ID, err)
	}
	*f = File(w.fileFields)
	return nil
}

// nameJSON is a name's "path" text and, when that text cannot hold its
// bytes, their base64.
func nameJSON(name string) (text, b64 string) {
	if utf8.ValidString(name) {
		return name, ""
	}
	return strings.ToValidUTF8(name, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(name))
}

// NameBase64 is the standard base64 of name's bytes when name is not
// UTF-8, else "": what a JSON document writes beside a name's text.
func NameBase64(name string) string {
	_, b64 := nameJSON(name)
	return b64
}

// nameFromJSON is the name's bytes: the base64's when there is one.
func nameFromJSON(text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// cacheFields is Cache without its methods.
type cacheFields Cache

// cacheJSON is Cache as JSON holds it: its root byte-exact, as File's
// names ("root_b64" beside "root" when the root is not UTF-8), and its
// entry keys as argv ("missed_keys_b64" beside "missed_keys", and so on:
// every key's base64, in order, when any one key is not UTF-8). Its
// failures' paths and other roots' paths carry "path_b64" as a file's.
type cacheJSON struct {
	cacheFields
	RootB64        string   `json:"root_b64,omitempty"`
	MissedKeysB64  []string `json:"missed_keys_b64,omitempty"`
	WrittenKeysB64 []string `json:"written_keys_b64,omitempty"`
	StaleKeysB64   []string `json:"stale_keys_b64,omitempty"`
	HitKeysB64     []string `json:"hit_keys_b64,omitempty"`
}

// MarshalJSON writes c with its root and keys byte-exact (see cacheJSON).
func (c Cache) MarshalJSON() ([]byte, error) {
	w := cacheJSON{cacheFields: cacheFields(c)}
	w.Root, w.RootB64 = nameJSON(c.Root)
	w.MissedKeys, w.MissedKeysB64 = argsJSON(c.MissedKeys)
	w.WrittenKeys, w.WrittenKeysB64 = argsJSON(c.WrittenKeys)
	w.StaleKeys, w.StaleKeysB64 = argsJSON(c.StaleKeys)
	w.HitKeys, w.HitKeysB64 = argsJSON(c.HitKeys)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a Cache written by MarshalJSON, or by a version
// that wrote "root" and the keys as text alone.
func (c *Cache) UnmarshalJSON(b []byte) error {
	var w cacheJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Root, err = nameFromJSON(w.Root, w.RootB64); err != nil {
		return fmt.Errorf("cache %s: root_b64: %w", w.Name, err)
	}
	for _, k := range []struct {
		name string
		text *[]string
		b64  []string
	}{
		{"missed_keys_b64", &w.MissedKeys, w.MissedKeysB64},
		{"written_keys_b64", &w.WrittenKeys, w.WrittenKeysB64},
		{"stale_keys_b64", &w.StaleKeys, w.StaleKeysB64},
		{"hit_keys_b64", &w.HitKeys, w.HitKeysB64},
	} {
		if *k.text, err = argsFromJSON(*k.text, k.b64); err != nil {
			return fmt.Errorf("cache %s: %s: %w", w.Name, k.name, err)
		}
	}
	*c = Cache(w.cacheFields)
	return nil
}

// cacheFailureFields is CacheFailure without its methods.
type cacheFailureFields CacheFailure

type cacheFailureJSON struct {
	cacheFailureFields
	PathB64 string `json:"path_b64,omitempty"`
}

// MarshalJSON writes f with its path byte-exact.
func (f CacheFailure) MarshalJSON() ([]byte, error) {
	w := cacheFailureJSON{cacheFailureFields: cacheFailureFields(f)}
	w.Path, w.PathB64 = nameJSON(f.Path)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a CacheFailure written by MarshalJSON or by a
// version that wrote "path" alone.
func (f *CacheFailure) UnmarshalJSON(b []byte) error {
	var w cacheFailureJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON(w.Path, w.PathB64); err != nil {
		return fmt.Errorf("cache failure %s %s: path_b64: %w", w.Op, w.Errno, err)
	}
	*f = CacheFailure(w.cacheFailureFields)
	return nil
}

// otherRootFields is OtherRoot without its methods.
type otherRootFields OtherRoot

type otherRootJSON struct {
	otherRootFields
	PathB64 string `json:"path_b64,omitempty"`
}

// MarshalJSON writes o with its path byte-exact.
func (o OtherRoot) MarshalJSON() ([]byte, error) {
	w := otherRootJSON{otherRootFields: otherRootFields(o)}
	w.Path, w.PathB64 = nameJSON(o.Path)
	return json.Marshal(&w)
}

// UnmarshalJSON reads an OtherRoot written by MarshalJSON or by a
// version that wrote "path" alone.
func (o *OtherRoot) UnmarshalJSON(b []byte) error {
	var w otherRootJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON(w.Path, w.PathB64); err != nil {
		return fmt.Errorf("other cache root: path_b64: %w", err)
	}
	*o = OtherRoot(w.otherRootFields)
	return nil
}

// jitUprobeFields is JITUprobe without its methods.
type jitUprobeFields JITUprobe

type jitUprobeJSON struct {
	jitUprobeFields
	PathB64 string `json:"path_b64,omitempty"`
}

// MarshalJSON writes u with the path of the file it probed byte-exact.
func (u JITUprobe) MarshalJSON() ([]byte, error) {
	w := jitUprobeJSON{jitUprobeFields: jitUprobeFields(u)}
	w.Path, w.PathB64 = nameJSON(u.Path)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a JITUprobe written by MarshalJSON or by a version
// that wrote "path" alone.
func (u *JITUprobe) UnmarshalJSON(b []byte) error {
	var w jitUprobeJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON(w.Path, w.PathB64); err != nil {
		return fmt.Errorf("uprobe %s: path_b64: %w", w.Name, err)
	}
	*u = JITUprobe(w.jitUprobeFields)
	return nil
}

// The names a download and a process carry are bytes too: a download's
// destination ("path_b64", and a file's "written_path_b64"), a process's
// executable ("exe_b64") and argv ("args_b64": every argument's base64,
// in order, when any one is not UTF-8). Readers that know only the text
// fields read them as before, with U+FFFD for the bytes that are not.

// downloadFileFields is DownloadFile without its methods.
type downloadFileFields DownloadFile

type downloadFileJSON struct {
	downloadFileFields
	PathB64        string `json:"path_b64,omitempty"`
	WrittenPathB64 string `json:"written_path_b64,omitempty"`
}

// MarshalJSON writes f with its names byte-exact.
func (f DownloadFile) MarshalJSON() ([]byte, error) {
	w := downloadFileJSON{downloadFileFields: downloadFileFields(f)}
	w.Path, w.PathB64 = nameJSON(f.Path)
	w.WrittenPath, w.WrittenPathB64 = nameJSON(f.WrittenPath)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a DownloadFile written by MarshalJSON or by a
// version that wrote the text fields alone.
func (f *DownloadFile) UnmarshalJSON(b []byte) error {
	var w downloadFileJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON(w.Path, w.PathB64); err != nil {
		return fmt.Errorf("download file %d: path_b64: %w", w.Ino, err)
	}
	if w.WrittenPath, err = nameFromJSON(w.WrittenPath, w.WrittenPathB64); err != nil {
		return fmt.Errorf("download file %d: written_path_b64: %w", w.Ino, err)
	}
	*f = DownloadFile(w.downloadFileFields)
	return nil
}

// downloadFields is Download without its methods.
type downloadFields Download

type downloadJSON struct {
	downloadFields
	PathB64 string `json:"path_b64,omitempty"`
	NameB64 string `json:"name_b64,omitempty"`
}

// MarshalJSON writes d with its destination byte-exact.
func (d Download) MarshalJSON() ([]byte, error) {
	w := downloadJSON{downloadFields: downloadFields(d)}
	w.Path, w.PathB64 = nameJSON(d.Path)
	w.Name, w.NameB64 = nameJSON(d.Name)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a Download written by MarshalJSON or by a version
// that wrote "path" alone.
func (d *Download) UnmarshalJSON(b []byte) error {
	var w downloadJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Path, err = nameFromJSON(w.Path, w.PathB64); err != nil {
		return fmt.Errorf("download from %s: path_b64: %w", w.Peer, err)
	}
	if w.Name, err = nameFromJSON(w.Name, w.NameB64); err != nil {
		return fmt.Errorf("download from %s: name_b64: %w", w.Peer, err)
	}
	*d = Download(w.downloadFields)
	return nil
}

// processFields is Process without its methods.
type processFields Process

type processJSON struct {
	processFields
	ExeB64  string   `json:"exe_b64,omitempty"`
	ArgsB64 []string `json:"args_b64,omitempty"`
}

// MarshalJSON writes p with its executable and argv byte-exact.
func (p Process) MarshalJSON() ([]byte, error) {
	w := processJSON{processFields: processFields(p)}
	w.Exe, w.ExeB64 = nameJSON(p.Exe)
	w.Args, w.ArgsB64 = argsJSON(p.Args)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a Process written by MarshalJSON or by a version
// that wrote "exe" and "args" alone.
func (p *Process) UnmarshalJSON(b []byte) error {
	var w processJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Exe, err = nameFromJSON(w.Exe, w.ExeB64); err != nil {
		return fmt.Errorf("process %d: exe_b64: %w", w.PID, err)
	}
	if w.Args, err = argsFromJSON(w.Args, w.ArgsB64); err != nil {
		return fmt.Errorf("process %d: args_b64: %w", w.PID, err)
	}
	*p = Process(w.processFields)
	return nil
}

// argsJSON is argv's text and, when any argument is not UTF-8, every
// argument's base64.
func argsJSON(args []string) (text, b64 []string) {
	valid := true
	for _, a := range args {
		valid = valid && utf8.ValidString(a)
	}
	if valid {
		return args, nil
	}
	text, b64 = make([]string, len(args)), make([]string, len(args))
	for i, a := range args {
		text[i] = strings.ToValidUTF8(a, "\uFFFD")
		b64[i] = base64.StdEncoding.EncodeToString([]byte(a))
	}
	return text, b64
}

// argsFromJSON is argv's bytes: the base64's when there are some.
func argsFromJSON(text, b64 []string) ([]string, error) {
	if b64 == nil {
		return text, nil
	}
	out := make([]string, len(b64))
	for i, s := range b64 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		out[i] = string(b)
	}
	return out, nil
}
