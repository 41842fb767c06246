package schematest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type inner struct {
	N int `json:"n"`
}

// sample has each kind of field whose description matters: required and
// optional keys, a nil-able slice and pointer with and without omitempty,
// a field hidden by an embedded struct's field of the same key, a time.
type sample struct {
	Schema string    `json:"schema"`
	Count  int       `json:"count"`
	Note   string    `json:"note,omitempty"`
	List   []string  `json:"list"`
	Opt    []string  `json:"opt,omitempty"`
	Ptr    *inner    `json:"ptr"`
	At     time.Time `json:"at"`
	embedded
	Shadow string `json:"shadow"`
}

type embedded struct {
	Shadow int `json:"shadow"`
	Extra  int `json:"extra"`
}

// validateSample generates sample's schema into a temporary file and
// validates doc against it.
func validateSample(t *testing.T, doc string) error {
	t.Helper()
	b, err := Generate(Document{Name: "sample", ID: "coldtrace.sample/v1", Type: sample{}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sample.schema.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return ValidateBytes(path, []byte(doc))
}

// The generated schema accepts what encoding/json writes for the type and
// refuses a document whose keys or types differ from it.
func TestSchemaHoldsDocumentsToTheirType(t *testing.T) {
	for _, v := range []sample{{Schema: "coldtrace.sample/v1"}, {Schema: "coldtrace.sample/v1", Note: "n", List: []string{"a"},
		Opt: []string{"b"}, Ptr: &inner{N: 1}, At: time.Unix(1, 0).UTC(), Shadow: "s", embedded: embedded{Extra: 2}}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateSample(t, string(b)); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	ok := `{"schema":"coldtrace.sample/v1","count":1,"list":null,"ptr":null,"at":"2026-01-02T03:04:05Z","shadow":"s","extra":0}`
	if err := validateSample(t, ok); err != nil {
		t.Fatalf("%s: %v", ok, err)
	}
	for _, c := range []struct{ what, from, to string }{
		{"an unknown key", `"count":1`, `"count":1,"counts":2`},
		{"a missing required key", `"count":1,`, ``},
		{"a number as a string", `"count":1`, `"count":"1"`},
		{"another schema id", `sample/v1`, `sample/v2`},
		{"the embedded field's type for the outer key", `"shadow":"s"`, `"shadow":3`},
		{"an integer as a fraction", `"count":1`, `"count":1.5`},
		{"a time that is not RFC 3339", `2026-01-02T03:04:05Z`, `yesterday`},
		{"null for a struct", `"at":"2026-01-02T03:04:05Z"`, `"at":null`},
	} {
		bad := strings.Replace(ok, c.from, c.to, 1)
		if err := validateSample(t, bad); err == nil {
			t.Errorf("%s is accepted: %s", c.what, bad)
		}
	}
}
