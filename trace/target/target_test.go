package target

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// TestLookZombie: a process that exited but was not collected is refused
// as exited. The test's own child, never waited for until the end, is the
// zombie: a shell's background job may be collected by the shell itself
// before its exec (seen in CI: gone entirely, not a zombie).
func TestLookZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	pid := cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for {
		_, err = Look(pid)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(err, ErrNoProcess) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("Look(zombie): %v", err)
	}
}

func TestParseStat(t *testing.T) {
	comm, state, flags, err := parseStat("12 (a (b) c) S 1 12 12 0 -1 4194560 0 0")
	if err != nil || comm != "a (b) c" || state != "S" || flags != 4194560 {
		t.Errorf("parseStat = %q, %q, %d, %v", comm, state, flags, err)
	}
}
