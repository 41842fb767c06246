package uprobes

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// emptyProgram loads a uprobe program that does nothing, for uprobe_multi
// links or perf-event ones.
func emptyProgram(t *testing.T, multi bool) *ebpf.Program {
	t.Helper()
	spec := &ebpf.ProgramSpec{Type: ebpf.Kprobe, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
	if multi {
		spec.AttachType = ebpf.AttachTraceUprobeMulti
	}
	p, err := ebpf.NewProgram(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// sleepers starts n processes that map libc and wait.
func sleepers(t *testing.T, n int) []int32 {
	t.Helper()
	var pids []int32
	for i := 0; i < n; i++ {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pids = append(pids, int32(cmd.Process.Pid))
	}
	for _, pid := range pids {
		waitForLibc(t, pid)
	}
	return pids
}

// linksByPID counts the uprobe_multi links filtered to each pid.
func linksByPID(t *testing.T) map[uint32]int {
	t.Helper()
	out := map[uint32]int{}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue
		}
		if umi := info.UprobeMulti(); umi != nil {
			if pid, ok := umi.Pid(); ok {
				out[pid]++
			}
		}
	}
	return out
}

// TestScoperLinksEachProcessOnceAndClosesAll: 50 processes mapping libc
// get one uprobe_multi link each, found through their own mappings; the
// links of one that exits are closed at the next poll, the rest at Close.
func TestScoperLinksEachProcessOnceAndClosesAll(t *testing.T) {
	testenv.RequireTracing(t)
	pids := sleepers(t, 50)
	live := map[int32]bool{}
	for _, p := range pids {
		live[p] = true
	}
	s := New(Options{LivePIDs: func() ([]int, error) {
		var out []int
		for p, ok := range live {
			if ok {
				out = append(out, int(p))
			}
		}
		return out, nil
	}})
	if !s.Multi() {
		t.Skip("no uprobe_multi links on this kernel")
	}
	set := &Set{Name: "test", Entry: emptyProgram(t, true), Targets: []Target{
		{Name: "getpid", Lib: "libc.so.6", Symbol: "getpid"}, {Name: "malloc", Lib: "libc.so.6", Symbol: "malloc", Cookie: 1},
		{Name: "nope", Lib: "libc.so.6", Symbol: "no_such_function_here", Cookie: 2}}}
	s.Add(set)
	start := time.Now()
	for _, p := range pids {
		s.Track(p, true)
	}
	// Their mappings are read at the next poll: libc is found in them.
	if err := s.Poll(0, nil); err != nil {
		t.Fatal(err)
	}
	attachTook := time.Since(start)
	made, _ := s.Counts()
	if made != 50 {
		t.Errorf("%d links made for 50 processes, want 50", made)
	}
	byPID := linksByPID(t)
	for _, p := range pids {
		if byPID[uint32(p)] != 1 {
			t.Errorf("pid %d has %d links, want 1", p, byPID[uint32(p)])
		}
	}
	st := s.States(set)
	if st[0].Processes != 50 || st[1].Processes != 50 || st[2].Processes != 0 || !strings.Contains(st[2].Error, "no function no_such_function_here") {
		t.Errorf("states: %+v", st)
	}
	// Tracking again (an exec) makes no second link.
	s.Track(pids[0], false)
	if made, _ := s.Counts(); made != 50 {
		t.Errorf("%d links after tracking a process again, want 50", made)
	}

	live[pids[0]] = false
	if err := s.Poll(0, nil); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closeTook := time.Since(start)
	if _, closed := s.Counts(); closed != 50 {
		t.Errorf("%d links closed, want 50", closed)
	}
	after := linksByPID(t)
	for _, p := range pids {
		if after[uint32(p)] != 0 {
			t.Errorf("pid %d still has %d links after Close", p, after[uint32(p)])
		}
	}
	t.Logf("50 processes: attach %v (%v each), close %v together", attachTook, attachTook/50, closeTook)
}

// TestScoperCapsPerfEventProbes: without uprobe_multi links, perf-event
// uprobes go into the first MaxPerfProcesses processes only, and the
// record says so.
func TestScoperCapsPerfEventProbes(t *testing.T) {
	testenv.RequireTracing(t)
	pids := sleepers(t, MaxPerfProcesses+2)
	s := New(Options{})
	s.multi = false // as on a kernel without uprobe_multi links
	set := &Set{Name: "test", Entry: emptyProgram(t, false), Targets: []Target{{Name: "getpid", Lib: "libc.so.6", Symbol: "getpid"}}}
	s.Add(set)
	start := time.Now()
	for _, p := range pids {
		s.Track(p, true)
	}
	if err := s.Poll(0, nil); err != nil {
		t.Fatal(err)
	}
	attachTook := time.Since(start)
	if made, _ := s.Counts(); made != MaxPerfProcesses {
		t.Errorf("%d perf-event links for %d processes, want %d", made, len(pids), MaxPerfProcesses)
	}
	if st := s.States(set); st[0].Processes != MaxPerfProcesses {
		t.Errorf("states: %+v", st)
	}
	if len(s.warnings) != 1 || !strings.Contains(s.warnings[0], "no uprobe_multi links") {
		t.Errorf("warnings: %q", s.warnings)
	}
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d perf-event uprobes: attach %v, close %v together", MaxPerfProcesses, attachTook, time.Since(start))
}

// TestScoperMakesNoLinksForAReapedProcess: a process reaped before its
// start is handled (most of a shell loop's children) gets no links and is
// not kept, nor does its exec's later record make any; a live process
// handled beside it gets its link.
func TestScoperMakesNoLinksForAReapedProcess(t *testing.T) {
	testenv.RequireTracing(t)
	live := sleepers(t, 1)[0]
	s := New(Options{})
	if !s.Multi() {
		t.Skip("no uprobe_multi links on this kernel")
	}
	defer s.Close()
	libc := libcOf(t, live)
	f, err := os.Open(libc)
	if err != nil {
		t.Fatalf("libc of the sleeper: %v", err)
	}
	// Known from the start, as the system's libc is: a process is linked
	// as soon as its start is handled.
	if err := s.AddFile(f, libc); err != nil {
		t.Fatal(err)
	}
	s.Add(&Set{Name: "test", Entry: emptyProgram(t, true), Targets: []Target{{Name: "getpid", Lib: "libc.so.6", Symbol: "getpid"}}})

	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	reaped := int32(done.Process.Pid)
	s.TrackLater(reaped, true)
	s.TrackLater(live, true)
	s.TrackLater(reaped, false) // its exec's record
	s.drain()

	s.mu.Lock()
	kept := s.procs[reaped] != nil
	s.mu.Unlock()
	byPID := linksByPID(t)
	if kept || byPID[uint32(reaped)] != 0 {
		t.Errorf("reaped pid %d: kept %v, %d links; want neither", reaped, kept, byPID[uint32(reaped)])
	}
	if byPID[uint32(live)] != 1 {
		t.Errorf("live pid %d has %d links, want 1", live, byPID[uint32(live)])
	}
	if made, _ := s.Counts(); made != 1 {
		t.Errorf("%d links made, want 1 (the live process's)", made)
	}
}

// libcOf returns the path of the C library pid maps.
func libcOf(t *testing.T, pid int32) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(l); len(f) == 6 && strings.HasSuffix(f[5], "/libc.so.6") {
			return f[5]
		}
	}
	t.Fatalf("pid %d maps no libc.so.6", pid)
	return ""
}

// TestGatedSetLinksOnlyProcessesThatCanCallIt: with a gate on
// getaddrinfo, a program that needs only libc gets no link, whether
// tracked by its pid (as its exec is handled) or before its exec by its
// program's file, until it opens a library that imports getaddrinfo; a
// program importing it gets its link at once, and so does a process
// announced by its fork (it executes another program sooner than a link
// could follow); the processes never linked are counted.
func TestGatedSetLinksOnlyProcessesThatCanCallIt(t *testing.T) {
	testenv.RequireTracing(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	buildELF(t, dir, "libnet.so", `#include <netdb.h>
int net_lookup(const char *n) { struct addrinfo *r; return getaddrinfo(n, 0, 0, &r); }
`, "-shared", "-fPIC")
	// Quiet until told: then it opens libnet.so and says so.
	opener := buildELF(t, dir, "opener", `#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char c;
	if (read(0, &c, 1) != 1) return 1;
	if (!dlopen(argv[1], RTLD_NOW)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
	printf("open\n"); fflush(stdout);
	return read(0, &c, 1) < 0;
}
`)
	caller := buildELF(t, dir, "caller", `#include <netdb.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char c;
	if (argc > 5) { struct addrinfo *r; return getaddrinfo(argv[0], 0, 0, &r); }
	return read(0, &c, 1) < 0;
}
`)
	start := func(args ...string) (*exec.Cmd, func(string), *strings.Builder) {
		cmd := exec.Command(args[0], args[1:]...)
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
		t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
		got := &strings.Builder{}
		say := func(want string) {
			if _, err := in.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, len(want)+1)
			if _, err := io.ReadFull(out, b); err != nil {
				t.Fatalf("%s: %v", args[0], err)
			}
			got.Write(b)
		}
		return cmd, say, got
	}
	quietCmd, open, said := start(opener, filepath.Join(dir, "libnet.so"))
	callerCmd, _, _ := start(caller)
	heldCmd, _, _ := start(opener, filepath.Join(dir, "libnet.so"))
	quiet, calls, held := int32(quietCmd.Process.Pid), int32(callerCmd.Process.Pid), int32(heldCmd.Process.Pid)
	for _, pid := range []int32{quiet, calls, held} {
		waitForLibc(t, pid)
	}

	s := New(Options{})
	if !s.Multi() {
		t.Skip("no uprobe_multi links on this kernel")
	}
	defer s.Close()
	libc := libcOf(t, quiet)
	f, err := os.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddFile(f, libc); err != nil {
		t.Fatal(err)
	}
	set := &Set{Name: "test", Entry: emptyProgram(t, true), Targets: []Target{{Name: "getpid", Lib: "libc.so.6", Symbol: "getpid"}},
		Gate: testGate()}
	s.Add(set)
	s.Track(quiet, false)
	s.Track(calls, false)
	prog, err := os.Open(opener)
	if err != nil {
		t.Fatal(err)
	}
	s.TrackProgram(held, []*os.File{prog})
	forked := sleepers(t, 1)[0]
	s.Track(forked, true)
	if err := s.Poll(0, nil); err != nil { // the first scans
		t.Fatal(err)
	}
	s.drain()
	byPID := linksByPID(t)
	if byPID[uint32(quiet)] != 0 || byPID[uint32(held)] != 0 || byPID[uint32(calls)] != 1 || byPID[uint32(forked)] != 1 {
		t.Fatalf("links before the library opens: quiet %d, held %d, caller %d, forked %d; want 0, 0, 1, 1",
			byPID[uint32(quiet)], byPID[uint32(held)], byPID[uint32(calls)], byPID[uint32(forked)])
	}

	open("open")
	if said.String() != "open\n" {
		t.Fatalf("the opener said %q", said.String())
	}
	s.Track(quiet, false)                  // as its library's open is handled
	if err := s.Poll(0, nil); err != nil { // its next scan
		t.Fatal(err)
	}
	s.drain()
	byPID = linksByPID(t)
	if byPID[uint32(quiet)] != 1 || byPID[uint32(held)] != 0 {
		t.Errorf("links once the library is open: quiet %d, held %d; want 1, 0", byPID[uint32(quiet)], byPID[uint32(held)])
	}
	if made, _ := s.Counts(); made != 3 {
		t.Errorf("%d links made, want 3", made)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.States(set); st[0].Processes != 3 || st[0].Unprobed != 1 {
		t.Errorf("states: %+v; want 3 processes probed, 1 not", st)
	}
}

// waitForLibc waits until pid's maps list libc.
func waitForLibc(t *testing.T, pid int32) {
	t.Helper()
	for i := 0; ; i++ {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/maps")
		if strings.Contains(string(b), "/libc.so.6") {
			return
		}
		if i == 2000 {
			t.Fatalf("pid %d never mapped libc", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestForkedChildCallsWhatItsParentCould: a child announced by its fork
// runs its parent's program until it executes another, so it is linked
// when the parent is, not when the parent cannot call the gated
// function (a shell loop's children: each link takes the write lock of
// every process mapping the library); a child of a parent not known is
// linked, and one that runs another program by the time its fork is
// handled is judged by that program. Its exec then decides as any process's: a program that can
// call the function is linked, and one that cannot is reported quiet for
// the inode and device its exec named only, read from the name it
// executed once the process is gone. Whoever watches is told of each
// first link and of a linked process leaving.
func TestForkedChildCallsWhatItsParentCould(t *testing.T) {
	testenv.RequireTracing(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	caller := buildELF(t, dir, "caller", `#include <netdb.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char c;
	if (argc > 5) { struct addrinfo *r; return getaddrinfo(argv[0], 0, 0, &r); }
	return read(0, &c, 1) < 0;
}
`)
	start := func(args ...string) int32 {
		cmd := exec.Command(args[0], args[1:]...)
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitForLibc(t, int32(cmd.Process.Pid))
		return int32(cmd.Process.Pid)
	}
	sleeps := sleepers(t, 5)
	quietParent, quietChild, strayChild, execd, ranOn := sleeps[0], sleeps[1], sleeps[2], sleeps[3], sleeps[4]
	callerParent, callerChild := start(caller), start(caller)

	s := New(Options{})
	if !s.Multi() {
		t.Skip("no uprobe_multi links on this kernel")
	}
	defer s.Close()
	libc := libcOf(t, quietParent)
	f, err := os.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddFile(f, libc); err != nil {
		t.Fatal(err)
	}
	s.Add(&Set{Name: "test", Entry: emptyProgram(t, true), Targets: []Target{{Name: "getpid", Lib: "libc.so.6", Symbol: "getpid"}},
		Gate: testGate()})
	told := map[int32][]bool{}
	s.OnLinked(func(pid int32, linked bool) { told[pid] = append(told[pid], linked) })

	s.Track(quietParent, false)
	s.Track(callerParent, false)
	s.TrackForkLater(quietChild, quietParent)
	s.TrackForkLater(callerChild, callerParent)
	s.TrackForkLater(strayChild, 1<<22-1) // a parent never tracked
	s.TrackForkLater(ranOn, callerParent) // and executed sleep since
	s.drain()
	byPID := linksByPID(t)
	for _, c := range []struct {
		name string
		pid  int32
		want int
	}{{"the quiet parent", quietParent, 0}, {"its child", quietChild, 0}, {"the calling parent", callerParent, 1},
		{"its child", callerChild, 1}, {"a child of an unknown parent", strayChild, 1},
		{"its child that executed a quiet program before its fork was handled", ranOn, 0}} {
		if byPID[uint32(c.pid)] != c.want {
			t.Errorf("%s (pid %d): %d links, want %d", c.name, c.pid, byPID[uint32(c.pid)], c.want)
		}
	}

	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(int(execd))+"/exe", &st); err != nil {
		t.Fatal(err)
	}
	kdev := func(st unix.Stat_t) uint32 { return unix.Major(st.Dev)<<20 | unix.Minor(st.Dev) }
	quiet := map[string]bool{}
	s.TrackExecLater(execd, st.Ino, kdev(st), nil, func() { quiet["sleep"] = true })
	s.TrackExecLater(execd, st.Ino+1, kdev(st), nil, func() { quiet["another inode"] = true })
	s.TrackExecLater(execd, st.Ino, kdev(st)+1, nil, func() { quiet["another device"] = true })
	sleepPath, err := os.Readlink("/proc/" + strconv.Itoa(int(execd)) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	reaped := exec.Command(sleepPath, "0")
	if err := reaped.Run(); err != nil {
		t.Fatal(err)
	}
	openSleep := func() (*os.File, error) { return os.Open(sleepPath) }
	s.TrackExecLater(int32(reaped.Process.Pid), st.Ino, kdev(st), openSleep, func() { quiet["sleep, gone, opened by name"] = true })
	s.TrackExecLater(int32(reaped.Process.Pid), st.Ino, kdev(st), nil, func() { quiet["sleep, gone"] = true })
	var cst unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(int(callerChild))+"/exe", &cst); err != nil {
		t.Fatal(err)
	}
	s.TrackExecLater(callerChild, cst.Ino, kdev(cst), nil, func() { quiet["caller"] = true })
	s.drain()
	if !quiet["sleep"] || !quiet["sleep, gone, opened by name"] || len(quiet) != 2 {
		t.Errorf("reported quiet: %v; want sleep, running and opened by name once gone", quiet)
	}

	if err := unix.Kill(int(callerChild), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.Exited(callerChild)
	s.drain()
	if got := told[callerChild]; len(got) != 2 || !got[0] || got[1] {
		t.Errorf("the child that left (pid %d): told %v, want [true false]", callerChild, got)
	}
	for _, pid := range []int32{callerParent, strayChild} {
		if got := told[pid]; len(got) != 1 || !got[0] {
			t.Errorf("pid %d: told %v, want [true]", pid, got)
		}
	}
	for _, pid := range []int32{quietParent, quietChild, execd} {
		if got := told[pid]; len(got) != 0 {
			t.Errorf("pid %d without links: told %v", pid, got)
		}
	}
}
