package main

// The repository's rules that a reviewer would otherwise check by hand:
// function sizes, what internal/ and report/ may link, the README's size,
// and make test's durations.

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Function sizes: no function of the product over 120 lines, none of the
// command line's over 60 (it wires; the logic lives below it). Tests and
// generated files are left out.
const (
	maxFuncLines    = 120
	maxCmdFuncLines = 60
)

func TestNoFunctionOverItsLimit(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || generated(t, path) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		limit := maxFuncLines
		if filepath.Dir(rel) == filepath.Join("cmd", "coldtrace") {
			limit = maxCmdFuncLines
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			checked++
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > limit {
				t.Errorf("%s: %s is %d lines, over %d", rel, funcName(fn), lines, limit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 1000 {
		t.Fatalf("only %d functions found: is the walk rooted at the module?", checked)
	}
}

// generated reports whether path carries Go's generated-code header.
func generated(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	header := regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if header.MatchString(line) {
			return true
		}
		if strings.HasPrefix(line, "package ") {
			return false
		}
	}
	return false
}

// funcName is a function's name with its receiver's type, if any.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// goList runs go list in the module's root with args and returns its
// output's lines; without go on PATH the test skips.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go is not on PATH (%v): cannot list the module's packages", err)
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, errb.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// internal/ holds leaves and test helpers: its packages, tests included,
// import no package of the module but other internal/ ones.
func TestInternalImportsNothingAbove(t *testing.T) {
	mod := goList(t, "-m")[0]
	lines := goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./internal/...")
	if len(lines) < 5 {
		t.Fatalf("go list found %d internal packages", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, mod+"/") && !strings.HasPrefix(imp, mod+"/internal/") && imp != fields[0] {
				t.Errorf("%s imports %s, above internal/", strings.TrimPrefix(fields[0], mod+"/"), strings.TrimPrefix(imp, mod+"/"))
			}
		}
	}
}

// The renderers run on a saved record, anywhere: nothing under report/
// links a BPF object (go list -deps ./report/...).
func TestReportLinksNoBPF(t *testing.T) {
	mod := goList(t, "-m")[0]
	deps := goList(t, "-deps", "./report/...")
	for _, p := range deps {
		if strings.HasPrefix(p, mod+"/bpf/") || strings.HasPrefix(p, mod+"/trace") {
			t.Errorf("report/... links %s", strings.TrimPrefix(p, mod+"/"))
		}
	}
	if len(deps) < 20 {
		t.Fatalf("go list -deps ./report/... listed %d packages", len(deps))
	}
}

// The README is a front door: at most 200 lines (the subcommand table is
// held to `coldtrace help` by TestReadmeListsEverySubcommand), nothing
// outside the repository.
func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 200 {
		t.Errorf("README.md is %d lines, over 200: the manual belongs in docs/", n)
	}
	if bytes.Contains(b, []byte("../shared")) {
		t.Error("README.md points outside the repository (../shared)")
	}
}

// make test runs the three test targets and prints each one's wall time,
// failed or not. GO=true makes every go command a no-op: what is checked
// is the Makefile's loop, not the tests.
func TestMakeTestPrintsThreeDurations(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skipf("make is not on PATH: %v", err)
	}
	cmd := exec.Command(makeBin, "--no-print-directory", "test", "GO=true")
	cmd.Dir = "../.."
	// The Makefile's own defaults, not those of a make this runs under.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "TEST_TARGETS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make test GO=true: %v\n%s", err, out)
	}
	got := regexp.MustCompile(`(?m)^(test-unit|test-kernel|test-e2e): \d+s$`).FindAllStringSubmatch(string(out), -1)
	var targets []string
	for _, m := range got {
		targets = append(targets, m[1])
	}
	if strings.Join(targets, " ") != "test-unit test-kernel test-e2e" {
		t.Errorf("make test printed durations for %v, want test-unit, test-kernel and test-e2e:\n%s", targets, out)
	}
}
