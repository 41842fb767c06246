package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s never appeared; stderr: %s", path, stderr.String())
		}
	}
}

// processesRunning lists the pids whose argv is exactly argv.
func processesRunning(argv ...string) []string {
	want := strings.Join(argv, "\x00") + "\x00"
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == want {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestThirdSignalKillsEverything: a command that ignores SIGTERM, with a
// child in its process group and one that left it (setsid). Two TERMs are
// forwarded and ignored; the third kills all of them.
func TestThirdSignalKillsEverything(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	// Durations no other process uses, to find them in /proc.
	inGroup, detached := []string{"sleep", "20.731"}, []string{"sleep", "21.913"}
	script := fmt.Sprintf(`trap "" TERM; setsid %s & touch %s; %s`, strings.Join(detached, " "), ready, strings.Join(inGroup, " "))
	cmd := exec.Command(ctBin, "-q", "--", "sh", "-c", script)
	cmd.Env = os.Environ()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, cmd, &errb)
	for len(processesRunning(detached...)) == 0 || len(processesRunning(inGroup...)) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("coldtrace did not end after three SIGTERMs; stderr: %s", errb.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+9 {
		t.Errorf("coldtrace ended with %v, want exit %d (the command killed); stderr: %s", err, 128+9, errb.String())
	}
	for _, argv := range [][]string{inGroup, detached} {
		var left []string
		for i := 0; i < 50; i++ {
			if left = processesRunning(argv...); len(left) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("%v still runs (pids %v)", argv, left)
			for _, p := range left {
				var pid int
				fmt.Sscan(p, &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}
