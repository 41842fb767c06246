// Package jsonindent writes a value as json.Encoder with SetIndent("", "  ")
// does, byte for byte, without building all of its text first.
//
// encoding/json marshals a whole value into one buffer, then indents it
// into another: a long run's JSON summary (4,000 files, each also listed
// under its category) is megabytes of text, and those buffers, grown by
// doubling, were a third of coldtrace's peak RSS while it wrote its
// outputs. Here structs, pointers and slices are walked with reflection
// and only their scalar leaves (and maps, and values with their own
// MarshalJSON or MarshalText) go through encoding/json, one at a time.
package jsonindent

import (
	"bufio"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
)

const indent = "  "

// Encode writes v and a newline to w, as json.NewEncoder(w) with
// SetIndent("", "  ") would.
func Encode(w io.Writer, v any) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	e := &encoder{w: bw}
	rv := reflect.ValueOf(v)
	if err := e.value(rv, ""); err != nil {
		return err
	}
	bw.WriteByte('\n')
	return bw.Flush()
}

type encoder struct {
	w      *bufio.Writer
	fields map[reflect.Type]typeInfo
}

type typeInfo struct {
	fields []field
	ok     bool
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// leaf marshals v whole, as encoding/json would at this depth.
func (e *encoder) leaf(v reflect.Value, prefix string) error {
	var x any
	switch {
	case !v.IsValid():
		x = nil
	case v.CanAddr():
		// encoding/json calls pointer-receiver methods on addressable
		// values; a copy would lose them.
		x = v.Addr().Interface()
	default:
		x = v.Interface()
	}
	b, err := json.MarshalIndent(x, prefix, indent)
	if err != nil {
		return err
	}
	_, err = e.w.Write(b)
	return err
}

func custom(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(marshalerType) || t.Implements(textMarshalerType) ||
		pt.Implements(marshalerType) || pt.Implements(textMarshalerType)
}

func (e *encoder) value(v reflect.Value, prefix string) error {
	if !v.IsValid() || custom(v.Type()) {
		return e.leaf(v, prefix)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			_, err := e.w.WriteString("null")
			return err
		}
		return e.value(v.Elem(), prefix)
	case reflect.Struct:
		return e.object(v, prefix)
	case reflect.Slice:
		if v.IsNil() {
			_, err := e.w.WriteString("null")
			return err
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return e.leaf(v, prefix) // base64
		}
		return e.array(v, prefix)
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return e.leaf(v, prefix)
		}
		return e.array(v, prefix)
	default:
		return e.leaf(v, prefix)
	}
}

func (e *encoder) array(v reflect.Value, prefix string) error {
	if v.Len() == 0 {
		_, err := e.w.WriteString("[]")
		return err
	}
	inner := prefix + indent
	e.w.WriteByte('[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			e.w.WriteByte(',')
		}
		e.w.WriteByte('\n')
		e.w.WriteString(inner)
		if err := e.value(v.Index(i), inner); err != nil {
			return err
		}
	}
	e.w.WriteByte('\n')
	e.w.WriteString(prefix)
	_, err := e.w.WriteString("]")
	return err
}

// field is one member of an object as encoding/json lists it: its name
// and where it is (the index path through embedded structs).
type field struct {
	name      string
	key       []byte // name quoted, as encoding/json writes it
	index     []int
	depth     int
	tagged    bool
	omitEmpty bool
}

func (e *encoder) object(v reflect.Value, prefix string) error {
	ti, seen := e.fields[v.Type()]
	if !seen {
		ti.fields, ti.ok = typeFields(v.Type())
		if e.fields == nil {
			e.fields = map[reflect.Type]typeInfo{}
		}
		e.fields[v.Type()] = ti
	}
	fields, ok := ti.fields, ti.ok
	if !ok {
		return e.leaf(v, prefix)
	}
	inner := prefix + indent
	n := 0
	for _, f := range fields {
		fv, ok := fieldValue(v, f.index)
		if !ok || f.omitEmpty && empty(fv) {
			continue
		}
		if n == 0 {
			e.w.WriteByte('{')
		} else {
			e.w.WriteByte(',')
		}
		n++
		e.w.WriteByte('\n')
		e.w.WriteString(inner)
		e.w.Write(f.key)
		e.w.WriteString(": ")
		if err := e.value(fv, inner); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if n == 0 {
		_, err := e.w.WriteString("{}")
		return err
	}
	e.w.WriteByte('\n')
	e.w.WriteString(prefix)
	_, err := e.w.WriteString("}")
	return err
}

// fieldValue follows index from v; ok is false when it passes a nil
// embedded pointer (encoding/json leaves those fields out).
func fieldValue(v reflect.Value, index []int) (reflect.Value, bool) {
	for k, i := range index {
		if k > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

// maxEmbedding bounds the walk through embedded structs.
const maxEmbedding = 8

// typeFields lists t's fields in encoding/json's order, embedded structs'
// fields in their place, a name given more than once resolved as
// encoding/json does (the shallowest; at one depth, the one tagged;
// otherwise none). ok is false for what this package does not mirror
// (the string and omitzero options, an embedded non-struct, embedding
// deeper than maxEmbedding): the caller marshals the struct whole.
func typeFields(t reflect.Type) ([]field, bool) {
	var all []field
	var walk func(t reflect.Type, index []int, depth int) bool
	walk = func(t reflect.Type, index []int, depth int) bool {
		if depth > maxEmbedding {
			return false
		}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag, tagged := sf.Tag.Lookup("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			opts = "," + opts + ","
			if strings.Contains(opts, ",string,") || strings.Contains(opts, ",omitzero,") {
				return false
			}
			idx := append(append([]int(nil), index...), i)
			if sf.Anonymous && name == "" {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
					if ft.Kind() == reflect.Struct && !sf.IsExported() {
						continue // encoding/json ignores these
					}
				}
				if ft.Kind() != reflect.Struct || custom(sf.Type) {
					return false
				}
				if !walk(ft, idx, depth+1) {
					return false
				}
				continue
			}
			if !sf.IsExported() {
				continue
			}
			fromTag := tagged && name != ""
			if name == "" {
				name = sf.Name
			}
			all = append(all, field{name: name, index: idx, depth: depth, tagged: fromTag,
				omitEmpty: strings.Contains(opts, ",omitempty,")})
		}
		return true
	}
	if !walk(t, nil, 0) {
		return nil, false
	}
	byName := map[string][]int{}
	for i, f := range all {
		byName[f.name] = append(byName[f.name], i)
	}
	keep := make([]bool, len(all))
	for _, is := range byName {
		least := all[is[0]].depth
		for _, i := range is {
			least = min(least, all[i].depth)
		}
		var top, tagged []int
		for _, i := range is {
			if all[i].depth == least {
				top = append(top, i)
				if all[i].tagged {
					tagged = append(tagged, i)
				}
			}
		}
		switch {
		case len(top) == 1:
			keep[top[0]] = true
		case len(tagged) == 1:
			keep[tagged[0]] = true
		}
	}
	var out []field
	for i, f := range all {
		if keep[i] {
			key, err := json.Marshal(f.name)
			if err != nil {
				return nil, false
			}
			f.key = key
			out = append(out, f)
		}
	}
	return out, true
}

// empty is encoding/json's omitempty test.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
