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
// names ("root_b64" beside "root" when the root is not UTF-8).
type cacheJSON struct {
	cacheFields
	RootB64 string `json:"root_b64,omitempty"`
}

// MarshalJSON writes c with its root byte-exact (see cacheJSON).
func (c Cache) MarshalJSON() ([]byte, error) {
	w := cacheJSON{cacheFields: cacheFields(c)}
	w.Root, w.RootB64 = nameJSON(c.Root)
	return json.Marshal(&w)
}

// UnmarshalJSON reads a Cache written by MarshalJSON, or by a version
// that wrote "root" alone.
func (c *Cache) UnmarshalJSON(b []byte) error {
	var w cacheJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	if w.Root, err = nameFromJSON(w.Root, w.RootB64); err != nil {
		return fmt.Errorf("cache %s: root_b64: %w", w.Name, err)
	}
	*c = Cache(w.cacheFields)
	return nil
}
