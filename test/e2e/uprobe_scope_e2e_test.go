package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
)

// swapMainC loads the library named in argv[1], replaces that path with a
// symlink to argv[2], waits until its own copy of common_fn carries a
// uprobe's breakpoint, and calls it three times.
const swapMainC = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h)
		return 2;
	int (*common)(int) = (int (*)(int))dlsym(h, "common_fn");
	if (!common)
		return 3;
	char old[4096];
	snprintf(old, sizeof old, "%s.old", argv[1]);
	if (rename(argv[1], old) != 0 || symlink(argv[2], argv[1]) != 0)
		return 4;
	volatile unsigned char *first = (volatile unsigned char *)common;
	for (int i = 0; i < 6000 && *first != 0xcc; i++)
		usleep(5000);
	if (*first != 0xcc)
		return 5;
	int x = 0;
	for (int i = 0; i < 3; i++)
		x = common(x);
	return x == 3 ? 0 : 6;
}
`

const userLibC = `int common_fn(int x) { return x + 1; }
`

const rootLibC = `int common_fn(int x) { return x + 1; }
int secret_fn(int x) { return x * 2; }
`

// ccFile compiles src into out with extra cc arguments.
func ccFile(t *testing.T, out, src string, extra ...string) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc)")
	}
	c := out + ".c"
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("cc", append([]string{"-O1", "-o", out, c}, extra...)...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", out, err, b)
	}
	if err := os.Remove(c); err != nil {
		t.Fatal(err)
	}
}

// TestUprobeLibraryOpenedOnlyThroughTheMapping: a traced user's process
// loads its own library, then swaps that path for a symlink to a
// root-only library with a symbol of its own. coldtrace probes the
// library the process mapped, never resolves the root-only one's symbol,
// and never opens the root-only file.
func TestUprobeLibraryOpenedOnlyThroughTheMapping(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	dir := userDir(t, u)
	lib := filepath.Join(dir, "libsecret.so")
	ccFile(t, lib, userLibC, "-shared", "-fPIC")
	prog := filepath.Join(dir, "swap")
	ccFile(t, prog, swapMainC)
	for _, p := range []string{lib, prog} {
		if err := os.Chown(p, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	secretDir := t.TempDir() // root's, 0700
	secret := filepath.Join(secretDir, "libsecret.so")
	ccFile(t, secret, rootLibC, "-shared", "-fPIC")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}

	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, secret, unix.IN_OPEN|unix.IN_ACCESS); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "swap.ctrace")
	r := runCT(t, ctOptions{env: sudoEnv(u)}, "-q", "-o", out,
		"--jit-uprobe", "libsecret.so:common_fn", "--jit-uprobe", "libsecret.so:secret_fn", "--", prog, lib, secret)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := inotifyEvents(t, in); n != 0 {
		t.Errorf("the root-only library was opened or read %d times during the run", n)
	}
	rec, err := record.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if rec.JIT == nil {
		t.Fatal("no JIT section")
	}
	probes := map[string]record.JITUprobe{}
	for _, up := range rec.JIT.Uprobes {
		probes[up.Name] = up
	}
	common, secretProbe := probes["libsecret.so:common_fn"], probes["libsecret.so:secret_fn"]
	if common.Calls != 3 || common.Path == "" || strings.HasPrefix(common.Path, secretDir) || !strings.Contains(common.Scope, "traced processes only") {
		t.Errorf("common_fn: %+v, want 3 calls in the user's library, scoped to traced processes", common)
	}
	if secretProbe.Calls != 0 || secretProbe.Path != "" || !strings.Contains(secretProbe.Error, "no function secret_fn") {
		t.Errorf("secret_fn: %+v, want it never attached: the mapped library has no such function", secretProbe)
	}

	// The watch works: an open of the file is seen.
	f, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n := inotifyEvents(t, in); n == 0 {
		t.Error("the inotify watch saw no open of the root-only library by the test itself")
	}
}

// inotifyEvents counts the events queued on a non-blocking inotify fd.
func inotifyEvents(t *testing.T, fd int) int {
	t.Helper()
	buf := make([]byte, 4096)
	n := 0
	for {
		k, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			n++ // struct inotify_event: wd, mask, cookie, len, name[len]
			off += unix.SizeofInotifyEvent + int(binary.LittleEndian.Uint32(buf[off+12:]))
		}
	}
}

// callerC prints the addresses of getpid, malloc, free and getaddrinfo in
// its own memory, then for each number it reads calls each that many
// times (getaddrinfo once) and answers "ok".
const callerC = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
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
`

// caller is a running callerC.
type caller struct {
	pid   int
	in    io.Writer
	out   *bufio.Scanner
	addrs []uint64
}

func newCaller(t *testing.T, pid int, in io.Writer, out io.Reader) *caller {
	t.Helper()
	c := &caller{pid: pid, in: in, out: bufio.NewScanner(out)}
	if !c.out.Scan() {
		t.Fatal("the caller printed nothing")
	}
	for _, f := range strings.Fields(c.out.Text()) {
		a, err := strconv.ParseUint(f, 16, 64)
		if err != nil || a == 0 {
			t.Fatalf("the caller printed %q", c.out.Text())
		}
		c.addrs = append(c.addrs, a)
	}
	if len(c.addrs) != 4 {
		t.Fatalf("the caller printed %q", c.out.Text())
	}
	return c
}

// firstBytes reads the first byte of getpid, malloc and free from its
// memory. (Not getaddrinfo's: any other tracer on the machine may probe
// that one; its programs' run counts are checked instead.)
func (c *caller) firstBytes(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", c.pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make([]byte, 3)
	for i, a := range c.addrs[:3] {
		if _, err := f.ReadAt(out[i:i+1], int64(a)); err != nil {
			t.Fatalf("read %#x of pid %d: %v", a, c.pid, err)
		}
	}
	return out
}

func (c *caller) calls(t *testing.T, n int) {
	t.Helper()
	if _, err := fmt.Fprintf(c.in, "%d\n", n); err != nil {
		t.Fatal(err)
	}
	if !c.out.Scan() || c.out.Text() != "ok" {
		t.Fatalf("the caller answered %q", c.out.Text())
	}
}

// pidPrograms are the programs of the uprobe_multi links filtered to pid.
func pidPrograms(t *testing.T, pid int) []ebpf.ProgramID {
	t.Helper()
	var out []ebpf.ProgramID
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue
		}
		if umi := info.UprobeMulti(); umi != nil {
			if p, ok := umi.Pid(); ok && int(p) == pid {
				out = append(out, info.Program)
			}
		}
	}
	return out
}

func runCountsOf(t *testing.T, ids []ebpf.ProgramID) uint64 {
	t.Helper()
	var n uint64
	for _, id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Stats()
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += st.RunCount
	}
	return n
}

// TestUprobesSkipOtherUsersProcesses: a user traces a command with
// libc's getpid, malloc and free probed; another user's process calling
// them keeps its first bytes and runs no BPF program (nor for
// getaddrinfo, the network sensor's probe), while the traced command's
// copy carries the breakpoints and its calls run the programs.
func TestUprobesSkipOtherUsersProcesses(t *testing.T) {
	requireTracing(t)
	if err := features.HaveBPFLinkUprobeMulti(); err != nil {
		t.Skipf("the links are found as uprobe_multi links: %v", err)
	}
	u, other := testuser.Create(t), testuser.Create(t)
	bin := filepath.Join(userDir(t, other), "caller")
	ccFile(t, bin, callerC)

	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(other.UID), Gid: uint32(other.GID)}}
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
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	untraced := newCaller(t, cmd.Process.Pid, in, out)
	before := untraced.firstBytes(t)

	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("enable bpf_stats: %v", err)
	}
	defer stats.Close()

	rec := filepath.Join(userDir(t, u), "scope.ctrace")
	ct, ctIn, ctOut := startTracedAs(t, u, "-q", "-o", rec, "--jit-uprobe", "libc.so.6:getpid", "--jit-uprobe", "libc.so.6:malloc",
		"--jit-uprobe", "libc.so.6:free", "--", bin)
	tracedPID := findCaller(t, bin, u.UID)
	traced := newCaller(t, tracedPID, ctIn, ctOut)
	for i, b := range traced.firstBytes(t) {
		if b != 0xcc {
			t.Errorf("the traced command's function %d starts with %#x, not a breakpoint", i, b)
		}
	}
	progs := pidPrograms(t, tracedPID)
	if len(progs) != 4 { // compile entry and return, getaddrinfo entry and return
		t.Fatalf("%d uprobe_multi links filtered to the traced pid %d, want 4", len(progs), tracedPID)
	}

	// Once round its loop first: its first read of stdin allocates the
	// buffer, a traced call of malloc. Then it waits in read(2).
	traced.calls(t, 0)
	was := runCountsOf(t, progs)
	untraced.calls(t, 1000)
	if now := runCountsOf(t, progs); now != was {
		t.Errorf("the probes' programs ran %d times for another user's calls", now-was)
	}
	if got := untraced.firstBytes(t); string(got) != string(before) {
		t.Errorf("another user's process: first bytes % x while traced, % x before", got, before)
	}
	was = runCountsOf(t, progs)
	traced.calls(t, 100)
	if now := runCountsOf(t, progs); now-was < 2*300 {
		t.Errorf("the traced command's 300 calls ran the programs %d times, want at least 600", now-was)
	}
	ctIn.Close()
	if err := ct.Wait(); err != nil {
		t.Fatalf("coldtrace: %v", err)
	}
	r, err := record.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range r.JIT.Uprobes {
		if up.Name == "libc.so.6:getpid" && (up.Calls != 100 || !strings.Contains(up.Scope, "traced processes only")) {
			t.Errorf("getpid: %+v, want 100 calls in traced processes only", up)
		}
	}
}

// startTracedAs starts coldtrace with args under sudo as u, the command's
// stdin and stdout piped; it is killed at the test's end if still running.
func startTracedAs(t *testing.T, u testuser.User, args ...string) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	ct := exec.Command(ctBin, args...)
	ct.Env = append(os.Environ(), sudoEnv(u)...)
	in, err := ct.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := ct.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ct.Stderr = os.Stderr
	if err := ct.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ct.Process.Kill(); _ = ct.Wait() })
	return ct, in, out
}

// findCaller finds the process running bin as uid.
func findCaller(t *testing.T, bin string, uid int) int {
	t.Helper()
	for i := 0; i < 2000; i++ {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			var st unix.Stat_t
			if err == nil && string(b) == bin+"\x00" && unix.Stat("/proc/"+e.Name(), &st) == nil && int(st.Uid) == uid {
				return pid
			}
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 5e6}, nil)
	}
	t.Fatal("the traced command never ran")
	return 0
}

// lookupFirstByteC prints the first byte of getaddrinfo as its main
// begins, then waits for stdin to close. It imports getaddrinfo only
// when built with -DLOOKS_UP.
const lookupFirstByteC = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
	volatile unsigned char *g = (volatile unsigned char *)dlsym(RTLD_DEFAULT, "getaddrinfo");
	printf("%02x\n", g ? *g : 0);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
#ifdef LOOKS_UP
	if (argc > 5) {
		struct addrinfo *r;
		return getaddrinfo(argv[1], 0, 0, &r);
	}
#endif
	return 0;
}
`

// TestNameLookupProbeOnlyInProgramsThatResolve: libc's getaddrinfo is
// probed from the first instruction of a command that imports it, even
// one started through a program that does not (env), and not at all in
// a command that cannot call it (its breakpoint would make each of its
// forks copy the page table of libc's text).
func TestNameLookupProbeOnlyInProgramsThatResolve(t *testing.T) {
	requireTracing(t)
	if err := features.HaveBPFLinkUprobeMulti(); err != nil {
		t.Skipf("the links are found as uprobe_multi links: %v", err)
	}
	u := testuser.Create(t)
	dir := userDir(t, u)
	resolver, quiet := filepath.Join(dir, "resolver"), filepath.Join(dir, "quiet")
	ccFile(t, resolver, lookupFirstByteC, "-DLOOKS_UP")
	ccFile(t, quiet, lookupFirstByteC)
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("needs env")
	}
	shBin, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("needs sh")
	}
	// forked: started by a fork of a shell, whose links (if it has any)
	// it does not inherit; it is linked once its exec is read.
	cases := []struct {
		name   string
		argv   []string
		bin    string
		links  int
		forked bool
	}{
		{"a program that imports getaddrinfo", []string{resolver}, resolver, 2, false},
		{"the same through env", []string{envBin, "X=1", resolver}, resolver, 2, false},
		{"a program that cannot call it", []string{quiet}, quiet, 0, false},
		{"a resolver a shell forked", []string{shBin, "-c", resolver + "; true"}, resolver, 2, true},
		{"a quiet program a shell forked", []string{shBin, "-c", quiet + "; true"}, quiet, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct, in, out := startTracedAs(t, u, append([]string{"-q", "-o", filepath.Join(dir, "lookup.ctrace"), "--"}, c.argv...)...)
			first := bufio.NewScanner(out)
			if !first.Scan() {
				t.Fatal("the command printed nothing")
			}
			pid := findCaller(t, c.bin, u.UID)
			progs := pidPrograms(t, pid)
			if c.forked {
				// Read within a poll (50 ms) of its exec: waited for
				// generously, then no more links may come.
				deadline := time.Now().Add(3 * time.Second)
				for len(progs) < max(c.links, 1) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					progs = pidPrograms(t, pid)
				}
			}
			if len(progs) != c.links {
				t.Errorf("%d uprobe_multi links filtered to pid %d, want %d", len(progs), pid, c.links)
			}
			// Probed before its exec: the breakpoint was in place when main
			// began. (Another tracer's probe on getaddrinfo would read the
			// same, so a command not probed is told by its links alone.)
			if c.links > 0 && !c.forked && first.Text() != "cc" {
				t.Errorf("getaddrinfo began with %s as main began, not a breakpoint: probed only after the start", first.Text())
			}
			in.Close()
			if err := ct.Wait(); err != nil {
				t.Fatalf("coldtrace: %v", err)
			}
		})
	}
}
