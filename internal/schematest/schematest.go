// Package schematest generates the JSON Schema of each document coldtrace
// writes from the document's Go type, holds the committed schema under
// docs/schemas to what the type generates, and validates JSON against it.
// Tests use it: the package that owns a document type declares the
// document in a test, so that no package below report/ or cmd/ has to
// import the types it describes.
//
// `make schemas` (COLDTRACE_UPDATE_SCHEMAS=1 go test -run TestJSONSchema
// ./...) rewrites the committed schemas; without it a schema that differs
// from its type fails the test.
package schematest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// UpdateEnv, set to 1, makes Check rewrite the committed schema instead of
// comparing with it.
const UpdateEnv = "COLDTRACE_UPDATE_SCHEMAS"

// idBase is where the schemas live in the repository; each one's $id is
// this followed by its file name.
const idBase = "https://github.com/coldtrace/coldtrace/docs/schemas/"

// Document is one JSON document coldtrace writes.
type Document struct {
	// Name is the schema's file name without .schema.json.
	Name string
	// ID is the document's "schema" value (coldtrace.summary/v1), or ""
	// for a document that carries none.
	ID string
	// Type is a value of the document's Go type.
	Type any
	// Mapper describes a type whose MarshalJSON writes something other
	// than what its kind says; nil for none.
	Mapper func(reflect.Type) *jsonschema.Schema
}

// Check generates each document's schema and compares it with the file
// under docs/schemas, or rewrites the file when UpdateEnv is 1.
func Check(t *testing.T, docs ...Document) {
	t.Helper()
	update := os.Getenv(UpdateEnv) == "1"
	for _, d := range docs {
		got, err := Generate(d)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		path := schemaPath(t, d.Name)
		if update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (make schemas writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what %T generates: run make schemas and check the change", path, d.Type)
		}
	}
}

// Generate returns d's schema, indented, as it is committed.
func Generate(d Document) ([]byte, error) {
	root, module, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	r := &jsonschema.Reflector{ExpandedStruct: true, Namer: qualifiedName, Mapper: d.Mapper}
	if err := addComments(r, root, module); err != nil {
		return nil, err
	}
	s := r.Reflect(d.Type)
	s.ID = jsonschema.ID(idBase + d.Name + ".schema.json")
	s.Title = d.ID
	if d.ID == "" {
		s.Title = d.Name
	}
	if p, ok := s.Properties.Get("schema"); ok && d.ID != "" {
		p.Const = d.ID
	}
	allowNull(s, s.Definitions, reflect.TypeOf(d.Type), map[*jsonschema.Schema]bool{})
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal the %s schema: %w", d.Name, err)
	}
	return append(b, '\n'), nil
}

// addComments makes each type's and field's Go comment its description.
// The reflector names a package by the directory it parsed relative to the
// working directory, joined to base; a test runs in its package's
// directory, so base is that package's import path and the walk starts at
// the module's root relative to it.
func addComments(r *jsonschema.Reflector, root, module string) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	rel, err := filepath.Rel(root, wd)
	if err != nil {
		return fmt.Errorf("package directory: %w", err)
	}
	up, err := filepath.Rel(wd, root)
	if err != nil {
		return fmt.Errorf("module root: %w", err)
	}
	base := module + "/" + filepath.ToSlash(rel)
	if err := r.AddGoComments(base, up); err != nil {
		return fmt.Errorf("read the Go comments: %w", err)
	}
	return nil
}

// qualifiedName names a definition by its package and type (record.File,
// summary.File), so that two types of one name in different packages
// stay apart.
func qualifiedName(t reflect.Type) string {
	if t.Name() == "" || t.PkgPath() == "" {
		return ""
	}
	return filepath.Base(t.PkgPath()) + "." + t.Name()
}

// Validate checks that data is a valid instance of the committed schema
// named name.
func Validate(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := ValidateBytes(schemaPath(t, name), data); err != nil {
		t.Errorf("%s:\n%v\n%.2000s", name, err, data)
	}
}

// ValidateBytes validates data against the schema file at path.
func ValidateBytes(path string, data []byte) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	url := "file://" + filepath.ToSlash(path)
	if err := c.AddResource(url, doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("compile %s: %w", path, err)
	}
	inst, err := validator.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(inst)
}

func schemaPath(t testing.TB, name string) string {
	t.Helper()
	root, _, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "docs", "schemas", name+".schema.json")
}

// moduleRoot finds go.mod above the working directory and returns its
// directory and module path.
func moduleRoot() (dir, module string, err error) {
	dir, err = os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if m, ok := strings.CutPrefix(line, "module "); ok {
					return dir, strings.TrimSpace(m), nil
				}
			}
			return "", "", fmt.Errorf("%s/go.mod names no module", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
