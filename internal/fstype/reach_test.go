package fstype

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
)

// A path behind a directory the caller may not search is no "missing"
// path: it may exist. Of says so with the permission error, and walks up
// only past a file in the way (ENOTDIR) or a name not there.
func TestOfUnreachableIsNotMissing(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	a, err := actor.Resolve("", u.SudoEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := os.MkdirTemp("", "fstype-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(priv) })
	if err := os.Mkdir(filepath.Join(priv, "there"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(priv, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// As root every one is reachable: the file in the way is walked past.
	if _, missing, err := Of(filepath.Join(file, "x")); err != nil || !missing {
		t.Errorf("Of(file/x) as root: missing %v, %v; want missing", missing, err)
	}
	if err := os.Chmod(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(priv, "there"), filepath.Join(priv, "absent")} {
		var missing bool
		var ofErr error
		if err := a.Do(func() error { _, missing, ofErr = Of(p); return nil }); err != nil {
			t.Fatal(err)
		}
		if missing || !errors.Is(ofErr, fs.ErrPermission) {
			t.Errorf("Of(%s) as %s: missing %v, err %v; want a permission error", p, u.Name, missing, ofErr)
		}
	}
}
