package text

import (
	"bytes"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// TestTextSaysWhatMayBeACache: one run that created 3 MiB under the
// user's cache home names the directory as "may be a cache"; 3 MiB under
// /tmp names nothing.
func TestTextSaysWhatMayBeACache(t *testing.T) {
	r := &record.Record{Files: []record.File{
		{Path: "/home/u/.cache/newtool/v2/a.bin", PagesCreated: 768, SizeBytes: 3 << 20},
		{Path: "/tmp/scratch/b.bin", PagesCreated: 768, SizeBytes: 3 << 20},
	}}
	r.User.Home, r.Host.PageSize = "/home/u", 4096
	var b bytes.Buffer
	if err := Write(&b, r, attribution.Analyze(r), Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := "/home/u/.cache/newtool/v2 may be a cache: this run created 3.0 MiB in 1 file there"
	if !strings.Contains(out, "may be caches") || !strings.Contains(out, want) {
		t.Errorf("text lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "/tmp/scratch may be") {
		t.Errorf("text names a /tmp directory as a cache:\n%s", out)
	}
}
