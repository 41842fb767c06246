package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Bounds on what a decoded record may hold, checked on the JSON text as
// it is read and before anything is allocated for it: a small file may
// not make report, diff or merge allocate gigabytes (a 40 KB gzip of ten
// million empty file objects, 30 MB of JSON, took 6 GB as []File).
//
// The largest real records are far inside them: the kernel side tracks
// at most 65,536 files and 65,536 live threads at once, an hour of a busy
// 40-thread program at the default 100 ms is some 36,000 samples and
// 1.5 million thread deltas, and a record of a million files (a merge or
// a hand-made one) still decodes.
const (
	// MaxFiles bounds files[]: 2,097,152 (2^21).
	MaxFiles = 1 << 21
	// MaxProcesses bounds processes[] and MaxThreads threads[]: 2^21 each.
	MaxProcesses = 1 << 21
	MaxThreads   = 1 << 21
	// MaxArrayEntries bounds every other array or map of the record, each
	// on its own: samples, a sample's thread and file deltas, strings
	// (arguments, warnings, cache keys), the JIT, GPU, download and
	// machine tables: 4,194,304 (2^22).
	MaxArrayEntries = 1 << 22
	// MaxEntryBytes bounds the memory of all array and map entries
	// together, each counted at its Go size (a File 200 bytes, a
	// thread delta 64): 1 GiB. Strings' bytes are bounded by
	// MaxDecodedBytes already.
	MaxEntryBytes = 1 << 30
)

// arrayLimit is the bound on the entries of the array or map under key
// (its JSON name, as written in the record's type) and that bound's name.
func arrayLimit(key string) (int64, string) {
	switch key {
	case "files":
		return MaxFiles, "MaxFiles"
	case "processes":
		return MaxProcesses, "MaxProcesses"
	case "threads":
		return MaxThreads, "MaxThreads"
	}
	return MaxArrayEntries, "MaxArrayEntries"
}

// opaqueEntryBytes is what an entry of an array is counted at when its Go
// type is not known (a key no field of the record takes, which decoding
// skips, or a type that decodes itself).
const opaqueEntryBytes = 16

// interfaceEntryBytes is what an entry is counted at inside a value
// decoded into an interface (an any: maps and slices of any): an
// interface value and its share of a map bucket.
const interfaceEntryBytes = 64

// What a frame's container expects next.
const (
	wantValue  = iota // a value: after '[', ',' in an array, or ':'
	wantKey           // a key: after '{' or ',' in an object
	wantColon         // the ':' after a key
	afterValue        // ',' or the closing bracket
)

// frame is one open array or object of the JSON text.
type frame struct {
	array bool
	state int
	// typ is the Go type the container decodes into: the element type of
	// an array, the struct or map type of an object; nil when unknown.
	typ reflect.Type
	// key names the container (its field's JSON name, "" for an entry of
	// an array or the record itself); path names it for errors.
	key string
	// For objects: the Go type of the current key's value.
	valTyp reflect.Type
	valKey string
	// For arrays and maps: entries so far, the bound and each entry's cost.
	count, limit int64
	limitName    string
	cost         int64
}

// fieldInfo is one JSON key of a struct type: its Go type and its name.
type fieldInfo struct {
	typ  reflect.Type
	name string
}

// limitScanner follows the JSON text of a record as the decoder reads it
// and fails as soon as an array or map holds more entries than its bound,
// or all entries together would take more than MaxEntryBytes: the decoder
// holds the whole text before it allocates the values, so the error comes
// first. It tracks the Go type each part of the text decodes into (by the
// struct fields' JSON names, matched as encoding/json matches them) to
// count each entry at its size. It does not validate: text that is not
// JSON is the decoder's to refuse.
type limitScanner struct {
	stack        []frame
	inStr, esc   bool
	keyStr       bool
	keyEscaped   bool
	keyLong      bool
	key          []byte
	total        int64
	started      bool
	root         reflect.Type
	fields       map[reflect.Type][]fieldInfo
	unmarshalers map[reflect.Type]bool
	err          error
}

func newLimitScanner(root reflect.Type) *limitScanner {
	return &limitScanner{root: root, fields: map[reflect.Type][]fieldInfo{}, unmarshalers: map[reflect.Type]bool{}}
}

// maxKeyBytes is the longest key the scanner keeps: longer ones match no
// field of the record.
const maxKeyBytes = 64

// scan follows b, the next bytes of the text; after an error it does
// nothing and returns it again.
func (s *limitScanner) scan(b []byte) error {
	for _, c := range b {
		if s.err != nil {
			return s.err
		}
		if s.inStr {
			s.inString(c)
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			if top := s.top(); top != nil && !top.array && top.state == wantKey {
				s.keyStr, s.keyEscaped, s.keyLong = true, false, false
				s.key = s.key[:0]
				s.countMapEntry(top)
			} else {
				s.valueStart()
			}
			s.inStr = true
		case '{', '[':
			typ, key := s.valueStart()
			s.push(c == '[', typ, key)
		case '}', ']':
			if n := len(s.stack); n > 0 {
				s.stack = s.stack[:n-1]
			}
		case ':':
			if top := s.top(); top != nil {
				top.state = wantValue
			}
		case ',':
			if top := s.top(); top != nil {
				top.state = wantKey
				if top.array {
					top.state = wantValue
				}
			}
		default:
			// A number or a literal: its first byte starts a value.
			if top := s.top(); top == nil || top.state == wantValue {
				s.valueStart()
			}
		}
	}
	return s.err
}

func (s *limitScanner) inString(c byte) {
	switch {
	case s.esc:
		s.esc = false
	case c == '\\':
		s.esc = true
		s.keyEscaped = s.keyEscaped || s.keyStr
	case c == '"':
		s.inStr = false
		if s.keyStr {
			s.keyStr = false
			s.keyEnd()
		}
		return
	}
	if s.keyStr {
		if len(s.key) < maxKeyBytes {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	}
}

func (s *limitScanner) top() *frame {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// valueStart counts a value starting in the current container and
// returns the Go type it decodes into and the key it sits under.
func (s *limitScanner) valueStart() (reflect.Type, string) {
	top := s.top()
	if top == nil {
		if s.started {
			return nil, ""
		}
		s.started = true
		return s.root, ""
	}
	switch {
	case top.array && top.state == wantValue:
		top.state = afterValue
		s.count(top)
		return top.typ, ""
	case !top.array && top.state == wantValue:
		top.state = afterValue
		return top.valTyp, top.valKey
	}
	return nil, ""
}

// countMapEntry counts a key of a map (each is an entry); a struct's keys
// are its fields.
func (s *limitScanner) countMapEntry(top *frame) {
	if top.typ != nil && (top.typ.Kind() == reflect.Map || top.typ.Kind() == reflect.Interface) {
		s.count(top)
	}
}

func (s *limitScanner) count(f *frame) {
	f.count++
	s.total += f.cost
	switch {
	case f.count > f.limit:
		s.err = fmt.Errorf("%w: %s holds more than %d entries, the most coldtrace reads (record.%s)",
			ErrTooLarge, s.path(), f.limit, f.limitName)
	case s.total > MaxEntryBytes:
		s.err = fmt.Errorf("%w: its arrays would take more than %d MiB in memory at %s, the most coldtrace reads (record.MaxEntryBytes)",
			ErrTooLarge, MaxEntryBytes>>20, s.path())
	}
}

// path names the innermost container, as "samples[].th".
func (s *limitScanner) path() string {
	var b strings.Builder
	for i, f := range s.stack {
		if f.key != "" {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		if f.array && i < len(s.stack)-1 {
			b.WriteString("[]")
		}
	}
	if b.Len() == 0 {
		return "the record"
	}
	return b.String()
}

func (s *limitScanner) push(array bool, typ reflect.Type, key string) {
	typ = s.plain(typ)
	f := frame{array: array, key: key, state: wantKey}
	if array {
		f.state = wantValue
	}
	switch {
	case typ != nil && typ.Kind() == reflect.Interface:
		// Decoded as []any and map[string]any all the way down.
		f.typ, f.cost = typ, interfaceEntryBytes
	case array:
		f.cost = opaqueEntryBytes
		if typ != nil && (typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array) {
			f.typ = s.plain(typ.Elem())
			f.cost = max(int64(typ.Elem().Size()), 1)
		}
	case typ != nil && typ.Kind() == reflect.Map:
		f.typ = typ
		f.cost = int64(typ.Key().Size() + typ.Elem().Size())
	case typ != nil && typ.Kind() == reflect.Struct:
		f.typ = typ
	}
	f.limit, f.limitName = arrayLimit(key)
	s.stack = append(s.stack, f)
}

// plain is typ without pointers, or nil when the type decodes itself
// (its text is then opaque to the scanner) or is not known.
func (s *limitScanner) plain(typ reflect.Type) reflect.Type {
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == nil {
		return nil
	}
	u, ok := s.unmarshalers[typ]
	if !ok {
		// A type whose decoder only adds the bytes of its names (the
		// _b64 keys) decodes its own fields as a plain struct would: the
		// scanner follows them.
		ptr := reflect.PointerTo(typ)
		u = (ptr.Implements(reflect.TypeFor[json.Unmarshaler]()) || typ.Implements(reflect.TypeFor[json.Unmarshaler]())) &&
			!typ.Implements(reflect.TypeFor[byteExactNames]())
		s.unmarshalers[typ] = u
	}
	if u {
		return nil
	}
	return typ
}

// keyEnd resolves the key just read to the Go type of its value.
func (s *limitScanner) keyEnd() {
	top := s.top()
	if top == nil || top.array {
		return
	}
	top.state = wantColon
	top.valTyp, top.valKey = nil, ""
	switch {
	case top.typ == nil:
	case top.typ.Kind() == reflect.Map:
		top.valTyp = top.typ.Elem()
	case top.typ.Kind() == reflect.Interface:
		top.valTyp = top.typ
	case top.typ.Kind() == reflect.Struct && !s.keyLong:
		key := s.key
		if s.keyEscaped {
			var k string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) != nil {
				return
			}
			key = []byte(k)
		}
		if f, ok := s.field(top.typ, key); ok {
			top.valTyp, top.valKey = f.typ, f.name
		}
	}
}

// field finds the field key names in struct type t as encoding/json
// does: the exact name first, else one equal under case folding.
func (s *limitScanner) field(t reflect.Type, key []byte) (fieldInfo, bool) {
	fs, ok := s.fields[t]
	if !ok {
		fs = jsonFields(t, nil)
		s.fields[t] = fs
	}
	for _, f := range fs {
		if f.name == string(key) {
			return f, true
		}
	}
	for _, f := range fs {
		if bytes.EqualFold([]byte(f.name), key) {
			return f, true
		}
	}
	return fieldInfo{}, false
}

// jsonFields lists the JSON keys of struct type t, those of its embedded
// structs without a name of their own included.
func jsonFields(t reflect.Type, out []fieldInfo) []fieldInfo {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = jsonFields(ft, out)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, fieldInfo{typ: sf.Type, name: name})
	}
	return out
}

// scanningReader passes what it reads through a limitScanner.
type scanningReader struct {
	r io.Reader
	s *limitScanner
}

func (sr *scanningReader) Read(p []byte) (int, error) {
	n, err := sr.r.Read(p)
	if serr := sr.s.scan(p[:n]); serr != nil {
		return 0, serr
	}
	return n, err
}
