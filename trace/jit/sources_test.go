package jit

import (
	"os"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/registry"
)

const sourcesDocPath = "../../docs/sources.md"

func TestSourcesDocCoversEveryCache(t *testing.T) {
	raw, err := os.ReadFile(sourcesDocPath)
	if err != nil {
		t.Fatalf("read sources.md: %v", err)
	}
	doc := string(raw)
	for _, s := range registry.Registry {
		if !strings.Contains(doc, "| `"+s.Name+"` |") {
			t.Errorf("docs/sources.md has no table row for cache %s", s.Name)
		}
	}
	for _, sc := range PathSyscalls() {
		if !strings.Contains(doc, "`"+sc.Name+"`") {
			t.Errorf("docs/sources.md does not name the path syscall %s", sc.Name)
		}
	}
}
