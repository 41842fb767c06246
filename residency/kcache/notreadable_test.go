package kcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/registry"
)

// A cache root the user cannot reach is "not readable", whether or not
// it exists (saying "missing" for one and not the other would tell the
// user what a root-only directory holds); a root the user can reach but
// not list is not readable either, and neither is counted as empty.
func TestSurveyUnreachableRootIsNotReadable(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	a, err := actor.Resolve("", u.SudoEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", "kcache-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(base, "private")
	mkfile(t, filepath.Join(private, "kept", "k.bin"), 100)
	locked := filepath.Join(base, "locked")
	mkfile(t, filepath.Join(locked, "k.bin"), 100)
	for _, d := range []string{private, locked} {
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(base, "open")
	mkfile(t, filepath.Join(open, "k.bin"), 100)
	gone := filepath.Join(base, "gone")
	var roots []registry.Root
	for _, p := range []string{filepath.Join(private, "kept"), filepath.Join(private, "absent"), locked, open, gone} {
		spec := registry.UserSpec("c"+filepath.Base(p), p)
		roots = append(roots, registry.Root{Spec: &spec, Path: p, Via: "record"})
	}
	got := map[string]Cache{}
	for _, c := range Survey(a, roots, registry.Env{}, Options{}) {
		got[c.Root] = c
	}
	kept, absent := got[filepath.Join(private, "kept")], got[filepath.Join(private, "absent")]
	for _, c := range []Cache{kept, absent} {
		if !c.NotReadable || c.Exists || c.FS != nil || c.Files != 0 {
			t.Errorf("%s behind a 0700 root directory: %+v; want not readable, nothing more", c.Root, c)
		}
	}
	if strings.ReplaceAll(kept.Error, kept.Root, "P") != strings.ReplaceAll(absent.Error, absent.Root, "P") {
		t.Errorf("an existing and a missing root-only path differ: %q vs %q", kept.Error, absent.Error)
	}
	if c := got[locked]; !c.NotReadable || c.Files != 0 {
		t.Errorf("%s (0700, not the user's): %+v; want not readable", locked, c)
	}
	if c := got[open]; c.NotReadable || !c.Exists || c.Files != 1 {
		t.Errorf("%s (readable): %+v", open, c)
	}
	if c := got[gone]; c.NotReadable || c.Exists || c.FS == nil || !c.FS.Missing {
		t.Errorf("%s (missing in a readable directory): %+v; want missing", gone, c)
	}
}
