package format

import "testing"

// TestPathKeepsBracketedLabels: a row that is no file is shortened
// without cutting inside its label; only a long mount path in it shrinks.
func TestPathKeepsBracketedLabels(t *testing.T) {
	for in, want := range map[string]string{
		"[filesystem metadata of 254:0, mounted on /]":                        "[filesystem metadata of 254:0, mounted on /]",
		"[I/O outside the page cache]":                                        "[I/O outside the page cache]",
		"[filesystem metadata of 8:1, mounted on /srv/data/volumes/models]":   "[filesystem metadata of 8:1, mounted on …/models]",
		"/home/dev/[x]/" + "abcdefghijklmnopqrstuvwxyz0123456789abcdefghij/f": "…/f",
	} {
		if got := Path(in, 20); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
}
