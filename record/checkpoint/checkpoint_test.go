package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

func self(t *testing.T) actor.Actor {
	t.Helper()
	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPathNextToRecord(t *testing.T) {
	p, err := Path(self(t), Place{RecordPath: "out/run.rec", PID: 7, Start: time.Now()})
	if err != nil || p != "out/run.rec.partial" {
		t.Errorf("Path = %q, %v", p, err)
	}
}

// TestPathStateDir: with no -o, a 0700 directory per user, a file per
// run named by start time and pid, and concurrent runs apart.
func TestPathStateDir(t *testing.T) {
	a := self(t)
	root := t.TempDir()
	start := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	p1, err := Path(a, Place{StateRoot: root, PID: 100, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Path(a, Place{StateRoot: root, PID: 101, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "coldtrace-"+userName(a))
	if filepath.Dir(p1) != dir || p1 == p2 || filepath.Base(p1) != "run-20261201T050000Z-100.record.partial" {
		t.Errorf("paths %q, %q", p1, p2)
	}
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, %v", st.Mode(), err)
	}
	// One of the user's own, made too open, is closed again.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(a, Place{StateRoot: root, PID: 1, Start: start}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("mode after reuse %v", st.Mode())
	}
}

// TestPathRefusesForeignDir: a symbolic link or someone else's directory
// in the state root is never used.
func TestPathRefusesForeignDir(t *testing.T) {
	a := self(t)
	root := t.TempDir()
	dir := filepath.Join(root, "coldtrace-"+userName(a))
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(a, Place{StateRoot: root}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a symlink as the state directory: %v", err)
	}
	testenv.RequireRoot(t)
	os.Remove(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(a, Place{StateRoot: root}); err == nil || !strings.Contains(err.Error(), "belongs to uid 4242") {
		t.Errorf("another user's state directory: %v", err)
	}
}

func TestWriterWriteRemove(t *testing.T) {
	a := self(t)
	path := filepath.Join(t.TempDir(), "run.rec.partial")
	w := NewWriter(a, path)
	if err := w.Write(&record.Record{Schema: record.Schema}); err == nil {
		t.Error("a record not marked partial was written as a checkpoint")
	}
	for at := int64(1); at <= 2; at++ {
		if err := w.Write(&record.Record{Schema: record.Schema, WallNS: at, Partial: &record.Partial{AtNS: at, Reason: "test"}}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := record.ReadFile(path)
	if err != nil || rec.Partial == nil || rec.Partial.AtNS != 2 {
		t.Fatalf("read back: %+v, %v", rec, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := w.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v", err)
	}
	if err := w.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}
