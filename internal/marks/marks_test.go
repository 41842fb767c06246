package marks

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestListenSendFind(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir, 0); !errors.Is(err, ErrNoTrace) {
		t.Fatalf("Find with no trace: %v", err)
	}
	l, err := Listen(dir, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Tracing([]int{4242}); err != nil {
		t.Fatal(err)
	}
	tr, err := Find(dir, 4242)
	if err != nil || tr.Socket != l.Path() {
		t.Fatalf("Find(4242) = %+v, %v", tr, err)
	}
	if _, err := Find(dir, 4243); err == nil {
		t.Error("Find(4243): want an error")
	}
	if got, err := TracedBy(dir, 4242); err != nil || got != 0 {
		// Our own trace does not count: the caller is the trace.
		t.Errorf("TracedBy(4242) from the tracer itself = %d, %v", got, err)
	}
	if err := Send(tr.Socket, "round 1\nwith a newline"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-l.C:
		if got != "round 1 with a newline" {
			t.Errorf("label %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no mark arrived")
	}
	st, err := os.Stat(l.Path())
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, %v: want a 0600 socket (never a FIFO)", st.Mode(), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// With coldtrace gone a send fails at once, without blocking.
	start := time.Now()
	if err := Send(tr.Socket, "late"); err == nil {
		t.Error("send to a closed trace: want an error")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("send to a closed trace took %v", d)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestCleanLabel(t *testing.T) {
	if got := CleanLabel(" a\x00b\tc \xff"); got != "a b c ?" {
		t.Errorf("CleanLabel = %q", got)
	}
	if got := CleanLabel(strings.Repeat("é", 300)); len(got) > MaxLabel {
		t.Errorf("CleanLabel kept %d bytes", len(got))
	}
}
