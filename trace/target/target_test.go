package target

import (
	"errors"
	"os"
	"testing"
)

func TestLookSelf(t *testing.T) {
	p, err := Look(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.TIDs) == 0 || p.Exe == "" || len(p.Args) == 0 {
		t.Errorf("Look(self) = %+v", p)
	}
}

func TestLookRefuses(t *testing.T) {
	if _, err := Look(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Look(no such pid): %v", err)
	}
	// kthreadd is pid 2 wherever the kernel has its own pid namespace.
	if b, err := os.ReadFile("/proc/2/comm"); err == nil && string(b) == "kthreadd\n" {
		if _, err := Look(2); !errors.Is(err, ErrKernelThread) {
			t.Errorf("Look(kthreadd): %v", err)
		}
	}
	if err := CheckCgroup(t.TempDir()); !errors.Is(err, ErrNotCgroup) {
		t.Errorf("CheckCgroup(temp dir): %v", err)
	}
}

func TestParseStat(t *testing.T) {
	comm, flags, err := parseStat("12 (a (b) c) S 1 12 12 0 -1 4194560 0 0")
	if err != nil || comm != "a (b) c" || flags != 4194560 {
		t.Errorf("parseStat = %q, %d, %v", comm, flags, err)
	}
}
