package main

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's subcommand table from `coldtrace help`")

const (
	readmePath     = "../../README.md"
	tableBegin     = "<!-- subcommands:begin: generated from `coldtrace help`; go test ./cmd/coldtrace -run TestReadmeListsEverySubcommand -update-readme -->"
	tableEnd       = "<!-- subcommands:end -->"
	archPath       = "../../docs/architecture.md"
	packagesBegin  = "<!-- packages:begin -->"
	packagesEnd    = "<!-- packages:end -->"
	helpUsageLabel = "usage:"
)

// helpEntry is one line of `coldtrace help`: a usage and what it does.
type helpEntry struct {
	name, usage, what string
}

// helpEntries reads the usage block of `coldtrace help`: an entry starts
// with "coldtrace" or "sudo coldtrace"; its description follows three or
// more spaces, or stands alone on the deeper-indented line after it.
func helpEntries(help string) []helpEntry {
	var out []helpEntry
	inUsage := false
	gap := regexp.MustCompile(`\s{3,}`)
	for _, line := range strings.Split(help, "\n") {
		if strings.TrimSpace(line) == helpUsageLabel {
			inUsage = true
			continue
		}
		if !inUsage {
			continue
		}
		text := strings.TrimSpace(line)
		if text == "" {
			break
		}
		if !strings.HasPrefix(text, "coldtrace") && !strings.HasPrefix(text, "sudo coldtrace") {
			if len(out) > 0 {
				out[len(out)-1].what = strings.TrimSpace(out[len(out)-1].what + " " + text)
			}
			continue
		}
		e := helpEntry{usage: text}
		if loc := gap.FindStringIndex(text); loc != nil {
			e.usage, e.what = text[:loc[0]], text[loc[1]:]
		}
		e.name = subcommandOf(e.usage)
		out = append(out, e)
	}
	return out
}

// subcommandOf is the subcommand a usage line names: the word after
// "coldtrace", or "run" when a flag or "--" comes first.
func subcommandOf(usage string) string {
	f := strings.Fields(strings.TrimPrefix(usage, "sudo "))
	if len(f) < 2 || strings.HasPrefix(f[1], "-") || strings.HasPrefix(f[1], "[") {
		return "run"
	}
	return f[1]
}

// subcommandTable renders the help's entries as the README's Markdown
// table. A '|' inside a code span must be escaped in a GitHub table.
func subcommandTable(help string) string {
	var b strings.Builder
	b.WriteString("| subcommand | usage | what it does |\n|---|---|---|\n")
	for _, e := range helpEntries(help) {
		link := "[`" + e.name + "`](docs/cmd/" + e.name + ".md)"
		if e.name == "version" {
			link = "`version`"
		}
		b.WriteString("| " + link + " | `" + strings.ReplaceAll(e.usage, "|", `\|`) + "` | " + e.what + " |\n")
	}
	return b.String()
}

// between returns the text between the begin and end markers of doc.
func between(t *testing.T, doc, begin, end string) (before, inside, after string) {
	t.Helper()
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("markers %q … %q not found in order", begin, end)
	}
	return doc[:i+len(begin)], doc[i+len(begin) : j], doc[j:]
}

func TestReadmeListsEverySubcommand(t *testing.T) {
	var help bytes.Buffer
	printUsage(&help)
	want := "\n" + subcommandTable(help.String())
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	before, got, after := between(t, string(raw), tableBegin, tableEnd)
	if *updateReadme {
		if err := os.WriteFile(readmePath, []byte(before+want+after), 0o644); err != nil {
			t.Fatalf("rewrite README: %v", err)
		}
		return
	}
	if got != want {
		t.Errorf("README's subcommand table differs from `coldtrace help` (rerun with -update-readme):\n got:\n%s\nwant:\n%s", got, want)
	}
	listed := map[string]bool{}
	for _, e := range helpEntries(help.String()) {
		listed[e.name] = true
		if e.name != "version" {
			if _, err := os.Stat(filepath.Join("../../docs/cmd", e.name+".md")); err != nil {
				t.Errorf("subcommand %s has no page in docs/cmd: %v", e.name, err)
			}
		}
	}
	for _, name := range dispatchedSubcommands(t) {
		if !listed[name] {
			t.Errorf("subcommand %q is dispatched in main.go but missing from `coldtrace help` and the README", name)
		}
	}
}

// dispatchedSubcommands are the string cases of the switch in main.go's
// run, the subcommands the binary accepts (help itself left out).
func dispatchedSubcommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatalf("parse main.go: %v", err)
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" {
			continue
		}
		ast.Inspect(fn, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, x := range cc.List {
				lit, ok := x.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err == nil && s != "help" && !strings.HasPrefix(s, "-") {
					names = append(names, s)
				}
			}
			return true
		})
	}
	if len(names) == 0 {
		t.Fatal("no subcommand cases found in main.go's run: the dispatch moved; point this test at it")
	}
	return names
}

func TestArchitectureMapsEveryPackage(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go is not on PATH (%v): cannot list the module's packages", err)
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	modCmd := exec.Command(goBin, "list", "-m")
	modCmd.Dir = "../.."
	mod, err := modCmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(mod)) + "/"
	var listed []string
	for _, p := range strings.Fields(string(out)) {
		listed = append(listed, strings.TrimPrefix(p, prefix))
	}
	raw, err := os.ReadFile(archPath)
	if err != nil {
		t.Fatalf("read architecture.md: %v", err)
	}
	_, table, _ := between(t, string(raw), packagesBegin, packagesEnd)
	mapped := mappedPackages(table)
	if len(mapped) == 0 {
		t.Fatal("docs/architecture.md's package table has no rows")
	}
	inDoc := map[string]bool{}
	for _, p := range mapped {
		if inDoc[p] {
			t.Errorf("docs/architecture.md maps %s twice", p)
		}
		inDoc[p] = true
	}
	inList := map[string]bool{}
	for _, p := range listed {
		inList[p] = true
		if !inDoc[p] {
			t.Errorf("package %s is not in docs/architecture.md's package map", p)
		}
	}
	sort.Strings(mapped)
	for _, p := range mapped {
		if !inList[p] {
			t.Errorf("docs/architecture.md maps %s, which go list no longer lists", p)
		}
	}
}

// mappedPackages are the first cells of the package table's rows.
func mappedPackages(table string) []string {
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var out []string
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		out = append(out, m[1])
	}
	return out
}
