package jsonindent

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// want is what this package must write: encoding/json's indented output.
func want(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func check(t *testing.T, name string, v any) {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if w := want(t, v); b.String() != w {
		t.Errorf("%s:\ngot  %s\nwant %s", name, b.String(), w)
	}
}

type Inner struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
	// C is shadowed by Outer.C at a shallower depth.
	C string `json:"c"`
}

type Other struct {
	A int   // named "A": no conflict with Inner's "a"
	D []int `json:"d"`
	E int   `json:"e"`
}

type Twin struct {
	E int `json:"e"` // same depth as Other.E, both tagged: neither is written
}

type hidden struct {
	H int `json:"h"`
}

type Stamp struct{ at time.Time }

func (s Stamp) MarshalJSON() ([]byte, error) { return json.Marshal(s.at.UTC().Format(time.RFC3339)) }

type PtrText struct{ n int }

func (p *PtrText) MarshalText() ([]byte, error) { return []byte(strings.Repeat("x", p.n)), nil }

type Outer struct {
	Inner
	*Other
	Twin
	hidden
	C        string `json:"c"`
	Skip     int    `json:"-"`
	private  int    // left out
	NoTag    float64
	Empty    []int             `json:"empty"`
	Nil      []int             `json:"nil"`
	OmitNil  []int             `json:"omit_nil,omitempty"`
	OmitZero int               `json:"omit_zero,omitempty"`
	Ptr      *Inner            `json:"ptr"`
	NilPtr   *Inner            `json:"nil_ptr"`
	Map      map[string][]int  `json:"map"`
	EmptyMap map[string]string `json:"empty_map"`
	Bytes    []byte            `json:"bytes"`
	Arr      [2]Inner          `json:"arr"`
	Any      any               `json:"any"`
	HTML     string            `json:"html"`
	When     Stamp             `json:"when"`
	Text     PtrText           `json:"text"`
	TextPtr  *PtrText          `json:"text_ptr"`
	Nested   [][]Inner         `json:"nested"`
	Struct   struct{}          `json:"struct"`
	Float    float64           `json:"float"`
	Key      string            `json:"<key>"`
}

func TestMatchesEncodingJSON(t *testing.T) {
	full := Outer{
		Inner: Inner{A: 1, B: "b", C: "inner c"},
		Other: &Other{A: 2, D: []int{1, 2}, E: 3},
		Twin:  Twin{E: 4}, hidden: hidden{H: 5},
		C: "outer c", Skip: 6, private: 8, NoTag: 1.5,
		Empty: []int{}, Ptr: &Inner{A: 9},
		Map:   map[string][]int{"z": {1}, "a": nil},
		Bytes: []byte("hello"), Arr: [2]Inner{{A: 1}, {B: "x"}},
		Any:  map[string]any{"k": []any{1, "two", nil}},
		HTML: "<a href=\"x\">&</a>\u2028", When: Stamp{time.Unix(1e9, 0)},
		Text: PtrText{3}, TextPtr: &PtrText{2},
		Nested: [][]Inner{{{A: 1}}, {}, nil}, Float: 1e21, Key: "k",
	}
	check(t, "full", &full)
	check(t, "by value", full)
	check(t, "zero", Outer{})
	check(t, "slice of pointers", []*Inner{{A: 1}, nil})
	check(t, "scalar", 42)
	check(t, "nil", nil)
	check(t, "empty struct", struct{}{})
}

// The options this package leaves to encoding/json: the struct is
// marshaled whole, with the same result.
type Quoted struct {
	N int    `json:"n,string"`
	S []int  `json:"s"`
	Z string `json:"z,omitzero"`
}

func TestFallbacks(t *testing.T) {
	check(t, "string option", []Quoted{{N: 1, S: []int{2}}})
	check(t, "embedded non-struct", struct {
		time.Duration
		X int `json:"x"`
	}{time.Second, 1})
}

func TestErrorsAsEncodingJSON(t *testing.T) {
	v := struct {
		F float64 `json:"f"`
	}{math.Inf(1)}
	var b bytes.Buffer
	err := Encode(&b, v)
	var ue *json.UnsupportedValueError
	if !errors.As(err, &ue) {
		t.Errorf("+Inf: %v, want encoding/json's UnsupportedValueError", err)
	}
}
