package schematest

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// allowNull lets a property be null where encoding/json writes null: a nil
// slice, map, pointer or interface in a field without omitempty. The
// reflector describes such a field by its element type alone, so a run
// with no files ("files": null) would fail a schema that is right about
// every run with files. It walks the schema beside the Go type; seen holds
// the schemas already done (definitions are shared).
func allowNull(s *jsonschema.Schema, defs jsonschema.Definitions, t reflect.Type, seen map[*jsonschema.Schema]bool) {
	s = resolve(s, defs)
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() || s.Properties == nil {
			return
		}
		for _, f := range jsonFields(t) {
			p, ok := s.Properties.Get(f.name)
			if !ok {
				continue
			}
			allowNull(p, defs, f.typ, seen)
			if f.nullable {
				s.Properties.Set(f.name, orNull(p))
			}
		}
	case reflect.Slice, reflect.Array:
		if s.Items != nil {
			allowNull(s.Items, defs, t.Elem(), seen)
		}
	case reflect.Map:
		if s.AdditionalProperties != nil {
			allowNull(s.AdditionalProperties, defs, t.Elem(), seen)
		}
		for _, p := range s.PatternProperties {
			allowNull(p, defs, t.Elem(), seen)
		}
	}
}

// resolve follows a reference to its definition.
func resolve(s *jsonschema.Schema, defs jsonschema.Definitions) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok {
		return defs[name]
	}
	return s
}

// orNull is p or null, p's description kept on the whole.
func orNull(p *jsonschema.Schema) *jsonschema.Schema {
	inner := *p
	inner.Description = ""
	return &jsonschema.Schema{Description: p.Description, AnyOf: []*jsonschema.Schema{&inner, {Type: "null"}}}
}

// field is one key encoding/json writes for a struct.
type field struct {
	name     string
	typ      reflect.Type
	nullable bool
	depth    int
}

// jsonFields lists t's keys as encoding/json writes them: embedded structs'
// fields promoted, a shallower field hiding a deeper one of its name.
func jsonFields(t reflect.Type) []field {
	byName := map[string]field{}
	var order []string
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if f.Anonymous && name == "" {
				et := f.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					walk(et, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
			k := f.Type.Kind()
			nullable := !omit && (k == reflect.Slice || k == reflect.Map || k == reflect.Pointer || k == reflect.Interface)
			if old, ok := byName[name]; ok && old.depth <= depth {
				continue
			} else if !ok {
				order = append(order, name)
			}
			byName[name] = field{name: name, typ: f.Type, nullable: nullable, depth: depth}
		}
	}
	walk(t, 0)
	out := make([]field, 0, len(order))
	for _, n := range order {
		out = append(out, byName[n])
	}
	return out
}
