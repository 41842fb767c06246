package target

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
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
// as exited.
func TestLookZombie(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 0 & echo $!; exec sleep 5")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
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
