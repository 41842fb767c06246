package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
)

// killedRun starts coldtrace with args on a command that reads a 4 MiB
// file, then sleeps (with a detached child beside it), and SIGKILLs
// coldtrace 5 s after it started. It returns the command's sleep argv
// and the detached child's, both still to be looked for in /proc.
func killedRun(t *testing.T, dir string, args ...string) (inGroup, detached []string) {
	t.Helper()
	data := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(data, bytes.Repeat([]byte("x"), 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready")
	// Durations no other process uses, to find them in /proc.
	stamp := time.Now().UnixNano() % 1000
	inGroup = []string{"sleep", fmt.Sprintf("41.%03d", stamp)}
	detached = []string{"sleep", fmt.Sprintf("42.%03d", stamp)}
	script := fmt.Sprintf("cat %s >/dev/null; setsid %s & touch %s; %s", data, strings.Join(detached, " "), ready, strings.Join(inGroup, " "))
	t.Cleanup(func() {
		for _, argv := range [][]string{inGroup, detached} {
			for _, pid := range processesRunning(argv...) {
				var p int
				fmt.Sscan(pid, &p)
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	cmd := exec.Command(ctBin, append(args, "-q", "--", "sh", "-c", script)...)
	cmd.Env = os.Environ()
	// A file, not a pipe: the command that runs on keeps its stderr, and
	// Wait would wait for it to close.
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var none bytes.Buffer
	waitFile(t, ready, cmd, &none)
	time.Sleep(time.Until(started.Add(5 * time.Second)))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The watcher (--kill-on-exit) writes its line just after.
	time.Sleep(300 * time.Millisecond)
	stderr, _ := os.ReadFile(errf.Name())
	t.Logf("coldtrace SIGKILLed %v after start; stderr: %s", time.Since(started).Round(time.Millisecond), stderr)
	return inGroup, detached
}

// checkPartial reads a checkpoint and checks that it is a readable,
// partial record of the run up to a few seconds in, that saw the file
// read, and that report says it is partial.
func checkPartial(t *testing.T, path string) {
	t.Helper()
	rec, err := record.ReadFile(path)
	if err != nil {
		t.Fatalf("the checkpoint is not a readable record: %v", err)
	}
	if rec.Partial == nil {
		t.Fatalf("the checkpoint does not say it is partial")
	}
	// Started 5 s before the kill, checkpoints every 1 s: the last one is
	// at least 2 s in (startup and a busy machine take the rest).
	if rec.Partial.AtNS < 2e9 || rec.Partial.AtNS > 5e9 || rec.WallNS != rec.Partial.AtNS {
		t.Errorf("partial at %v, wall %v: want the last checkpoint, 2-5 s in", time.Duration(rec.Partial.AtNS), time.Duration(rec.WallNS))
	}
	var read bool
	for _, f := range rec.Files {
		if strings.HasSuffix(f.Path, "data.bin") && f.PagesAccessed >= 1024 {
			read = true
		}
	}
	if !read || len(rec.Processes) < 2 || len(rec.Samples) < 10 {
		t.Errorf("the checkpoint lacks the run: data.bin read %v, %d processes, %d samples", read, len(rec.Processes), len(rec.Samples))
	}
	t.Logf("checkpoint: at %v, %d samples, %d processes, %d files", time.Duration(rec.Partial.AtNS), len(rec.Samples), len(rec.Processes), len(rec.Files))
	code, out, errs := coldtrace(t, nil, "report", path)
	if code != 0 || !strings.Contains(out, "PARTIAL record") || !strings.Contains(out, "exit status unknown") {
		t.Errorf("report of the checkpoint (exit %d) does not say it is partial:\n%s%s", code, out, errs)
	}
	code, out, errs = coldtrace(t, nil, "report", "--json", path)
	var doc struct {
		Partial *record.Partial `json:"partial"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Partial == nil || doc.Partial.AtNS != rec.Partial.AtNS {
		t.Errorf("report --json of the checkpoint (exit %d, %v) has no partial key: %+v; %s", code, err, doc.Partial, errs)
	}
}

// TestKill9LeavesPartialRecord: coldtrace SIGKILLed 5 s into a run with
// --checkpoint 1s leaves PATH.partial, a readable record that says it is
// partial; the command and its children run on (the default).
func TestKill9LeavesPartialRecord(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "run.rec")
	inGroup, detached := killedRun(t, dir, "--checkpoint", "1s", "-o", out)
	checkPartial(t, out+".partial")
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a killed run wrote its final record")
	}
	time.Sleep(500 * time.Millisecond)
	if len(processesRunning(inGroup...)) != 1 || len(processesRunning(detached...)) != 1 {
		t.Errorf("without --kill-on-exit the command should run on: %v running %v, %v running %v",
			inGroup, processesRunning(inGroup...), detached, processesRunning(detached...))
	}
}

// TestKillOnExit: with --kill-on-exit, coldtrace's death kills the
// command, its process group and a child that left the group (setsid).
func TestKillOnExit(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	inGroup, detached := killedRun(t, dir, "--checkpoint", "1s", "--kill-on-exit", "-o", filepath.Join(dir, "run.rec"))
	deadline := time.Now().Add(5 * time.Second)
	for len(processesRunning(inGroup...))+len(processesRunning(detached...)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after coldtrace died, still running: %v %v, %v %v",
				inGroup, processesRunning(inGroup...), detached, processesRunning(detached...))
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkPartial(t, filepath.Join(dir, "run.rec.partial"))
}

// TestCheckpointRemovedOnFinish: a run that ends normally leaves its
// record and no checkpoint; with no -o, under sudo, the checkpoints go to
// /var/tmp/coldtrace-USER/, a 0700 directory of the user's.
func TestCheckpointRemovedOnFinish(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "run.rec")
	// A stale checkpoint of an earlier, killed run at the same path.
	if err := os.WriteFile(out+".partial", []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := coldtrace(t, nil, "--checkpoint", "100ms", "-q", "-o", out, "--", "sleep", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rec, err := record.ReadFile(out)
	if err != nil || rec.Partial != nil {
		t.Fatalf("final record: %v, partial %+v", err, rec.Partial)
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the checkpoint is still there after a normal finish: %v", err)
	}
	for _, w := range rec.Warnings {
		if strings.Contains(w, "checkpoint") {
			t.Errorf("warning: %s", w)
		}
	}

	u := testuser.Create(t)
	state := filepath.Join("/var/tmp", "coldtrace-"+u.Name)
	t.Cleanup(func() { os.RemoveAll(state) })
	shared, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o777)
	ready := filepath.Join(shared, "ready")
	cmd := exec.Command(ctBin, "--checkpoint", "100ms", "-q", "--", "sh", "-c", "touch "+ready+"; sleep 1")
	cmd.Env = u.SudoEnviron(os.Environ())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, cmd, &errb)
	time.Sleep(500 * time.Millisecond)
	var st syscall.Stat_t
	if err := syscall.Lstat(state, &st); err != nil || st.Mode&0o7777 != 0o700 || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != u.UID {
		t.Errorf("state directory %s: %v, mode %#o, uid %d (want 0700, uid %d)", state, err, st.Mode, st.Uid, u.UID)
	}
	during, _ := filepath.Glob(filepath.Join(state, "run-*.partial"))
	if len(during) != 1 {
		t.Errorf("checkpoints in %s during the run: %v", state, during)
	} else if err := syscall.Stat(during[0], &st); err != nil || int(st.Uid) != u.UID {
		t.Errorf("checkpoint %s: %v, owner %d, want %d", during[0], err, st.Uid, u.UID)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("coldtrace: %v: %s", err, errb.String())
	}
	if after, _ := filepath.Glob(filepath.Join(state, "*")); len(after) != 0 {
		t.Errorf("left in %s after a normal finish: %v", state, after)
	}
}

// TestCheckpointForeignStateDir: a state directory someone else made
// first is not used, and the run goes on without checkpoints.
func TestCheckpointForeignStateDir(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	state := filepath.Join("/var/tmp", "coldtrace-"+u.Name)
	if err := os.Mkdir(state, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	code, _, errs := coldtrace(t, u.SudoEnviron(nil), "--checkpoint", "100ms", "-q", "--", "sleep", "0.5")
	if code != 0 || !strings.Contains(errs, "no checkpoints for this run") || !strings.Contains(errs, "belongs to uid 0") {
		t.Errorf("exit %d, stderr: %s", code, errs)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "*")); len(left) != 0 {
		t.Errorf("written into a directory of root's: %v", left)
	}
}
