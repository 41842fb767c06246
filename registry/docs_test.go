package registry

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

var updateRegistryDoc = flag.Bool("update-registry-doc", false, "rewrite docs/cache-registry.md's table from Registry")

const (
	registryDocPath  = "../docs/cache-registry.md"
	registryDocBegin = "<!-- registry:begin: generated from registry/registry.go; go test ./registry -run TestCacheRegistryDocMatchesRegistry -update-registry-doc -->"
	registryDocEnd   = "<!-- registry:end -->"
)

// codeList renders items as comma-separated code spans, "—" when none.
// A '|' would end a table cell, so it is escaped.
func codeList(items []string) string {
	if len(items) == 0 {
		return "—"
	}
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
	}
	return strings.Join(out, ", ")
}

// entryWords says what one entry of s is.
func entryWords(s Spec) string {
	switch {
	case s.EntryDepth == 1:
		return "a directory below the root"
	case s.EntryDepth > 1:
		return "a directory " + strconv.Itoa(s.EntryDepth) + " levels below the root"
	case len(s.Entries) > 0:
		return "files named " + codeList(s.Entries)
	}
	return "every file"
}

// switchList names the switches of s with the values that trigger them.
func switchList(s Spec) string {
	var out []string
	for _, sw := range s.Switches {
		v := sw.Env
		if len(sw.Values) > 0 {
			v += "=" + sw.Values[0]
		}
		out = append(out, v)
	}
	return codeList(out)
}

// registryTable renders Registry as the Markdown table of
// docs/cache-registry.md.
func registryTable() string {
	var b strings.Builder
	b.WriteString("| cache | framework | root, highest precedence first | also | one entry | temp names | bookkeeping | switches | in use when a process maps or runs | or imports |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range Registry {
		cells := []string{"`" + s.Name + "`", s.Framework, codeList(s.Paths), codeList(s.Also), entryWords(s),
			codeList(s.Temp), codeList(s.Ignore), switchList(s), codeList(s.Uses), codeList(s.Packages)}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

func TestCacheRegistryDocMatchesRegistry(t *testing.T) {
	raw, err := os.ReadFile(registryDocPath)
	if err != nil {
		t.Fatalf("read cache-registry.md: %v", err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, registryDocBegin), strings.Index(doc, registryDocEnd)
	if i < 0 || j < i {
		t.Fatalf("registry table markers not found in order in %s", registryDocPath)
	}
	want := "\n" + registryTable()
	got := doc[i+len(registryDocBegin) : j]
	if *updateRegistryDoc {
		doc = doc[:i+len(registryDocBegin)] + want + doc[j:]
		if err := os.WriteFile(registryDocPath, []byte(doc), 0o644); err != nil {
			t.Fatalf("rewrite cache-registry.md: %v", err)
		}
		return
	}
	if got != want {
		t.Errorf("docs/cache-registry.md's table differs from Registry (rerun with -update-registry-doc):\n got:\n%s\nwant:\n%s", got, want)
	}
	for _, s := range Registry {
		if !strings.Contains(doc, "\n### `"+s.Name+"`") {
			t.Errorf("docs/cache-registry.md has no section \"### `%s`\"", s.Name)
		}
	}
}
