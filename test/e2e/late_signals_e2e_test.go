package e2e

// Signals that arrive once the command has exited, while coldtrace writes
// its outputs or exits. coldtrace is held there from outside: its JSON
// summary goes to an inherited descriptor (`--json-fd 3`), a pipe the
// test filled beforehand, so the write blocks until the test reads; /proc
// says when a thread of coldtrace is blocked in that write(2).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

// heldPipe is a full pipe handed to a process: its first write there
// blocks until release reads the filler.
type heldPipe struct {
	r, w   *os.File
	filler int
	read   chan []byte // what the process wrote, once it closed the pipe
}

func newHeldPipe(t *testing.T) *heldPipe {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	fd := int(w.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	h := &heldPipe{r: r, w: w, read: make(chan []byte, 1)}
	page := make([]byte, 4096) // ≤ PIPE_BUF: written whole or not at all
	for {
		n, err := unix.Write(fd, page)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h.filler += n
	}
	// The flag is the open file's, which the process shares.
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	return h
}

// started gives up the test's write end once the process has its own.
func (h *heldPipe) started() { h.w.Close() }

// release reads the filler, and then what the process writes, until it
// closes the pipe.
func (h *heldPipe) release(t *testing.T) {
	t.Helper()
	if _, err := io.ReadFull(h.r, make([]byte, h.filler)); err != nil {
		t.Fatal(err)
	}
	go func() {
		b, _ := io.ReadAll(h.r)
		h.read <- b
	}()
}

// waitBlockedWriting waits until a thread of cmd's process is blocked in
// write(2) on fd (/proc/PID/task/TID/syscall: "1 0xFD …" on x86-64).
func waitBlockedWriting(t *testing.T, cmd *exec.Cmd, fd int, stderr *bytes.Buffer) {
	t.Helper()
	want := fmt.Sprintf("1 %#x ", fd)
	tasks := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ents, err := os.ReadDir(tasks)
		stat, _ := os.ReadFile(filepath.Join(tasks, "..", "stat"))
		if _, state, _ := strings.Cut(string(stat), ") "); err != nil || strings.HasPrefix(state, "Z") {
			t.Fatalf("coldtrace ended before its outputs: %v; stderr: %s", err, stderr.String())
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(tasks, e.Name(), "syscall"))
			if err == nil && strings.HasPrefix(string(b), want) {
				return
			}
		}
	}
	t.Fatalf("coldtrace never wrote to fd %d; stderr: %s", fd, stderr.String())
}

// startHeld starts coldtrace with args and a held pipe as its descriptor
// 3, and waits until it is blocked writing there.
func startHeld(t *testing.T, args ...string) (*exec.Cmd, *heldPipe, *bytes.Buffer) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("reads x86-64 syscall numbers from /proc/PID/task/TID/syscall")
	}
	out := newHeldPipe(t)
	cmd := exec.Command(ctBin, args...)
	var errb bytes.Buffer
	cmd.Stderr, cmd.ExtraFiles = &errb, []*os.File{out.w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.started()
	waitBlockedWriting(t, cmd, 3, &errb)
	return cmd, out, &errb
}

// A signal that arrives after the command exited, while coldtrace is
// writing its outputs (the record written, the JSON held, the text report
// to come), neither stops the writing nor changes the exit code, and
// leaves no temporary file beside them.
func TestSignalAfterExitKeepsOutputs(t *testing.T) {
	requireTracing(t)
	cases := []struct {
		command []string
		code    int
		sigs    []syscall.Signal
	}{
		{[]string{"true"}, 0, []syscall.Signal{syscall.SIGTERM}},
		{[]string{"sh", "-c", "exit 3"}, 3, []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}},
	}
	for _, c := range cases {
		dir := t.TempDir()
		rec := filepath.Join(dir, "r.ctrace")
		cmd, out, errb := startHeld(t, append([]string{"-o", rec, "--json-fd", "3", "--"}, c.command...)...)
		for _, sig := range c.sigs {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		out.release(t)
		err := cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != c.code {
			t.Fatalf("%v: coldtrace ended with %v, want the command's exit %d; stderr: %s", c.command, err, c.code, errb.String())
		}
		js := filepath.Join(dir, "s.json")
		if err := os.WriteFile(js, <-out.read, 0o644); err != nil {
			t.Fatal(err)
		}
		if s := readSummary(t, js); s.ExitCode != c.code {
			t.Errorf("%v: summary exit_code %d", c.command, s.ExitCode)
		}
		if r, err := record.ReadFile(rec); err != nil || r.ExitCode != c.code {
			t.Errorf("%v: record: %v", c.command, err)
		}
		if !strings.Contains(errb.String(), "verdict:") {
			t.Errorf("%v: no text report after the held JSON: %s", c.command, errb.String())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Errorf("%v: files in the output directory: %v, want the record and the JSON", c.command, ents)
		}
	}
}

// Signals that arrive as coldtrace writes its last output and exits are
// caught: 20 of 20 runs exit with the command's 3, none "killed by
// signal", whichever of SIGINT, SIGHUP and SIGTERM arrives, three times
// while the last output is held and then until the process is gone.
func TestLateSignalsKeepTheCommandsExitCode(t *testing.T) {
	requireTracing(t)
	const runs = 20
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM}
	kept := 0
	for i := range runs {
		rec := filepath.Join(t.TempDir(), "r.rec")
		// With -q the JSON is the last output.
		cmd, out, errb := startHeld(t, "-q", "-o", rec, "--json-fd", "3", "--", "sh", "-c", "exit 3")
		sig := sigs[i%len(sigs)]
		for range 3 {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		out.release(t)
		var err error
	signalling:
		for {
			select {
			case err = <-done:
				break signalling
			default:
				_ = cmd.Process.Signal(sig) // fails once it is gone
				time.Sleep(200 * time.Microsecond)
			}
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			kept++
		} else {
			t.Errorf("run %d (%v): coldtrace ended with %v, want the command's exit 3; stderr: %s", i, sig, err, errb.String())
		}
		if _, err := record.ReadFile(rec); err != nil {
			t.Errorf("run %d: record: %v", i, err)
		}
		if b := <-out.read; !bytes.Contains(b, []byte(`"exit_code": 3`)) && !bytes.Contains(b, []byte(`"exit_code":3`)) {
			t.Errorf("run %d: the JSON lacks the exit code: %.200s", i, b)
		}
	}
	if kept != runs {
		t.Errorf("%d of %d runs kept the command's exit code", kept, runs)
	}
}
