package trace

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
)

// scopeC is both sides of the uprobe scope test. "untraced" prints the
// addresses of getpid, malloc, free and getaddrinfo in its own memory,
// then for each number read makes that many calls of each. "traced DIR"
// waits for its own getpid to carry the breakpoint, says "ready", waits
// for "go", calls getpid 50 times and forks a child that waits for
// "child-go" and calls it 7 times; then it says "done" and waits for
// "end".
const scopeC = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char path[4096];
static const char *dir;
static const char *at(const char *name) { snprintf(path, sizeof path, "%s/%s", dir, name); return path; }
static void say(const char *name) { int fd = open(at(name), O_CREAT | O_WRONLY, 0644); if (fd >= 0) close(fd); }
static int await(const char *name) {
	for (int i = 0; i < 12000; i++) {
		if (access(at(name), F_OK) == 0)
			return 0;
		usleep(5000);
	}
	return 1;
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "untraced") == 0) {
		printf("%lx %lx %lx %lx\n", (unsigned long)dlsym(RTLD_DEFAULT, "getpid"), (unsigned long)dlsym(RTLD_DEFAULT, "malloc"),
			(unsigned long)dlsym(RTLD_DEFAULT, "free"), (unsigned long)dlsym(RTLD_DEFAULT, "getaddrinfo"));
		fflush(stdout);
		char line[64];
		while (fgets(line, sizeof line, stdin)) {
			int n = atoi(line);
			for (int i = 0; i < n; i++) {
				getpid();
				void *volatile m = malloc(16); /* volatile: not optimised out */
				free(m);
			}
			struct addrinfo *res;
			if (getaddrinfo("localhost", NULL, NULL, &res) == 0)
				freeaddrinfo(res);
			printf("ok\n");
			fflush(stdout);
		}
		return 0;
	}
	dir = argv[2];
	volatile unsigned char *g = dlsym(RTLD_DEFAULT, "getpid");
	for (int i = 0; i < 12000 && *g != 0xcc; i++)
		usleep(5000);
	if (*g != 0xcc)
		return 3;
	say("ready");
	if (await("go"))
		return 4;
	/* Calls apart by more than the record's window merging gap: each
	   is a window of its own. */
	for (int i = 0; i < 50; i++) {
		getpid();
		usleep(2000);
	}
	for (int i = 0; i < 5; i++) {
		void *volatile m = malloc(16);
		free(m);
	}
	pid_t c = fork();
	if (c == 0) {
		if (await("child-go"))
			_exit(5);
		for (int i = 0; i < 7; i++) {
			getpid();
			usleep(2000);
		}
		_exit(0);
	}
	char pidtext[32];
	snprintf(pidtext, sizeof pidtext, "%d", c);
	int fd = open(at("child.tmp"), O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, pidtext, strlen(pidtext)) < 0)
		return 6;
	close(fd);
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s", at("child.tmp"));
	rename(tmp, at("child"));
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 7;
	say("done");
	return await("end") ? 8 : 0;
}
`

// untracedHelper is a process coldtrace does not trace, with the
// addresses of the probed functions in its memory.
type untracedHelper struct {
	cmd   *exec.Cmd
	in    io.Writer
	out   *bufio.Scanner
	addrs []uint64
}

func startUntraced(t *testing.T, bin string) *untracedHelper {
	t.Helper()
	cmd := exec.Command(bin, "untraced")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	h := &untracedHelper{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !h.out.Scan() {
		t.Fatal("the untraced helper printed nothing")
	}
	for _, f := range strings.Fields(h.out.Text()) {
		a, err := strconv.ParseUint(f, 16, 64)
		if err != nil || a == 0 {
			t.Fatalf("the untraced helper printed %q", h.out.Text())
		}
		h.addrs = append(h.addrs, a)
	}
	return h
}

// firstBytes reads the first byte of getpid, malloc and free from the
// helper's memory. (Not getaddrinfo's: any other tracer on the machine
// may probe that one; its programs' run counts are checked instead.)
func (h *untracedHelper) firstBytes(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", h.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make([]byte, 3)
	for i, a := range h.addrs[:3] {
		if _, err := f.ReadAt(out[i:i+1], int64(a)); err != nil {
			t.Fatalf("read %#x of the untraced helper: %v", a, err)
		}
	}
	return out
}

// calls has the helper call each function n times.
func (h *untracedHelper) calls(t *testing.T, n int) {
	t.Helper()
	if _, err := fmt.Fprintf(h.in, "%d\n", n); err != nil {
		t.Fatal(err)
	}
	if !h.out.Scan() || h.out.Text() != "ok" {
		t.Fatalf("the untraced helper answered %q", h.out.Text())
	}
}

// awaitFile waits for the traced side's marker (it gives up itself
// after a minute, failing the run).
func awaitFile(t *testing.T, p string, ended <-chan struct{}) {
	t.Helper()
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		select {
		case <-ended:
			t.Fatalf("the run ended before %s", filepath.Base(p))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// multiLinks returns the programs of the uprobe_multi links filtered to
// pid, and how many such links there are.
func multiLinks(t *testing.T, pid int) (map[ebpf.ProgramID]bool, int) {
	t.Helper()
	for try := 1; ; try++ {
		progs, n, err := scanMultiLinks(pid)
		// A link another process is closing meanwhile fails the walk
		// (EAGAIN, ENOENT): walk again.
		if err == nil || try == 5 {
			if err != nil {
				t.Fatal(err)
			}
			return progs, n
		}
		t.Logf("links: %v; again", err)
	}
}

// scanMultiLinks walks the machine's links once.
func scanMultiLinks(pid int) (map[ebpf.ProgramID]bool, int, error) {
	progs := map[ebpf.ProgramID]bool{}
	n := 0
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue
		}
		umi := info.UprobeMulti()
		if umi == nil {
			continue
		}
		if p, ok := umi.Pid(); ok && int(p) == pid {
			progs[info.Program] = true
			n++
		}
	}
	return progs, n, it.Err()
}

// runCounts sums the run counts of progs (bpf_stats).
func runCounts(t *testing.T, progs map[ebpf.ProgramID]bool) map[ebpf.ProgramID]uint64 {
	t.Helper()
	out := map[ebpf.ProgramID]uint64{}
	for id := range progs {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Stats()
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[id] = st.RunCount
	}
	return out
}

// TestUprobesStayOutOfUntracedProcesses: while a trace probes libc's
// getpid, malloc and free (and getaddrinfo, the network sensor's), an
// untraced process's copy of each function keeps its first byte and its
// calls run no BPF program; the traced command's calls and those of a
// child it forks are counted, each in its own process.
func TestUprobesStayOutOfUntracedProcesses(t *testing.T) {
	requireTracing(t)
	if err := features.HaveBPFLinkUprobeMulti(); err != nil {
		t.Skipf("the links are found as uprobe_multi links: %v", err)
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "scope", scopeC)
	h := startUntraced(t, bin)
	before := h.firstBytes(t)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("enable bpf_stats: %v", err)
	}
	defer stats.Close()

	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	var rec *record.Record
	var runErr error
	go func() {
		defer close(ended)
		rec, runErr = Run(context.Background(), Options{Command: []string{bin, "traced", dir}, NoGPU: true, Actor: a,
			Stdin: os.Stdin, Stdout: os.Stderr, Stderr: os.Stderr,
			JITUprobes: []string{"libc.so.6:getpid", "libc.so.6:malloc", "libc.so.6:free"}})
	}()
	defer func() {
		_ = os.WriteFile(filepath.Join(dir, "end"), nil, 0o644)
		<-ended
	}()
	awaitFile(t, filepath.Join(dir, "ready"), ended)
	if got := h.firstBytes(t); string(got) != string(before) {
		t.Errorf("the untraced process's first bytes went from % x to % x while traced", before, got)
	}
	for i, b := range h.firstBytes(t) {
		// (a probe of some other tool may have been there before)
		if b == 0xcc && before[i] != 0xcc {
			t.Errorf("function %d of the untraced process starts with a breakpoint", i)
		}
	}
	// The traced command is the one that said "ready": its links name it.
	cmdPID := tracedPID(t, bin)
	progs, nlinks := multiLinks(t, cmdPID)
	if nlinks == 0 {
		t.Fatalf("no uprobe_multi link filtered to the traced pid %d", cmdPID)
	}
	// jit entry and return, getaddrinfo entry and return
	if len(progs) != 4 {
		t.Errorf("%d programs on the traced pid's links, want 4", len(progs))
	}
	was := runCounts(t, progs)
	h.calls(t, 1000)
	now := runCounts(t, progs)
	for id := range progs {
		if now[id] != was[id] {
			t.Errorf("program %d ran %d times while only the untraced process called the probed functions", id, now[id]-was[id])
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	awaitFile(t, filepath.Join(dir, "child"), ended)
	b, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	// The child inherited the breakpoints but not the links: it is
	// counted once its own are in place.
	for {
		if _, n := multiLinks(t, child); n > 0 {
			break
		}
		select {
		case <-ended:
			t.Fatal("the run ended before the child had its links")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "child-go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	awaitFile(t, filepath.Join(dir, "done"), ended)
	after := runCounts(t, progs)
	var ran uint64
	for id := range progs {
		ran += after[id] - now[id]
	}
	if ran < 2*57 {
		t.Errorf("the traced calls ran the programs %d times, want at least %d (bpf_stats counts)", ran, 2*57)
	}
	if err := os.WriteFile(filepath.Join(dir, "end"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-ended
	if runErr != nil {
		t.Fatal(runErr)
	}
	if rec.ExitCode != 0 {
		t.Fatalf("the traced command exited %d", rec.ExitCode)
	}
	checkScopedCalls(t, rec, cmdPID, child)
	if got := h.firstBytes(t); string(got) != string(before) {
		t.Errorf("the untraced process's first bytes went from % x to % x after the run", before, got)
	}
}

// tracedPID finds the traced command: the process running bin traced.
func tracedPID(t *testing.T, bin string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), bin+"\x00traced\x00") {
			return pid
		}
	}
	t.Fatal("the traced command is not running")
	return 0
}

// checkScopedCalls: the getpid calls are counted per process, 50 in the
// command and 7 in its child, and the record says how they were scoped.
func checkScopedCalls(t *testing.T, rec *record.Record, cmdPID, child int) {
	t.Helper()
	if rec.JIT == nil {
		t.Fatal("no JIT section")
	}
	perPID := map[int32]int{}
	for _, w := range rec.JIT.Windows {
		if w.Kind == "uprobe" && w.Source == "libc.so.6:getpid" {
			perPID[w.PID]++
		}
	}
	if perPID[int32(cmdPID)] != 50 || perPID[int32(child)] != 7 {
		t.Errorf("getpid calls per pid: %v, want 50 in %d and 7 in %d", perPID, cmdPID, child)
	}
	for _, up := range rec.JIT.Uprobes {
		if !strings.HasPrefix(up.Name, "libc.so.6:") {
			continue
		}
		if up.Path == "" || up.Error != "" || !strings.Contains(up.Scope, "traced processes only") {
			t.Errorf("uprobe %+v", up)
		}
		if up.Name == "libc.so.6:malloc" && up.Calls < 5 {
			t.Errorf("malloc: %d calls counted, want at least 5: %+v", up.Calls, up)
		}
		if up.Name == "libc.so.6:getpid" && up.Calls != 57 {
			t.Errorf("getpid: %d calls counted, want 57", up.Calls)
		}
	}
}
