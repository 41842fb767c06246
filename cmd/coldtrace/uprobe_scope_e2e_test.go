package main

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
