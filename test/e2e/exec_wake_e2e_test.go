package e2e

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	"github.com/coldtrace/coldtrace/internal/testuser"
)

// TestExecsOfAKnownImageWaitForAPoll: the exec programs learn which
// images need their records read at once. After a shell has run a quiet
// program (true) a few times, that image (its inode, its device as the
// kernel numbers it, its environment's size) is known on both counts —
// it names no framework and cannot resolve names — so its later execs do
// not wake coldtrace (a fork/exec storm ran 5% slower for those wakes).
// The same program with a framework's cache variable in its environment
// is not known on the first count, and a program that imports
// getaddrinfo not on the second: their execs still wake it.
func TestExecsOfAKnownImageWaitForAPoll(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	dir := userDir(t, u)
	resolver := filepath.Join(dir, "resolver")
	ccFile(t, resolver, lookupFirstByteC, "-DLOOKS_UP")
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Skip("needs true")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("needs sh")
	}
	script := "for i in 1 2 3 4 5; do " + trueBin + "; done; TRITON_CACHE_DIR=" + dir + "/triton " + trueBin +
		"; " + resolver + " </dev/null >/dev/null; echo ran; read x || true"
	ct, in, out := startTracedAs(t, u, "-q", "-o", filepath.Join(dir, "wake.ctrace"), "--", sh, "-c", script)
	said := bufio.NewScanner(out)
	if !said.Scan() || said.Text() != "ran" {
		t.Fatalf("the script said %q", said.Text())
	}

	image := func(p string) (ino uint64, dev uint32) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		// The kernel's own numbering (MKDEV), which the program reads
		// from the superblock.
		return st.Ino, unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	}
	trueIno, trueDev := image(trueBin)
	resIno, resDev := image(resolver)
	var bits map[bpfjit.JitImageKey]uint32
	deadline := time.Now().Add(5 * time.Second)
	for {
		bits = knownExecs(t)
		var plain, withVar, res uint32
		for k, v := range bits {
			switch {
			case k.Ino == trueIno && k.Dev == trueDev && v == uint32(bpfjit.JitKnownBitKNOWN_ALL):
				plain = v
			case k.Ino == trueIno && k.Dev == trueDev:
				withVar = v
			case k.Ino == resIno && k.Dev == resDev:
				res = v
			}
		}
		if plain != 0 && withVar == uint32(bpfjit.JitKnownBitKNOWN_QUIET_PROGRAM) && res == uint32(bpfjit.JitKnownBitKNOWN_NO_FRAMEWORK) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("known images: true (ino %d dev %#x) %#x, with TRITON_CACHE_DIR %#x, the resolver %#x; want %#x, %#x, %#x\nall: %v",
				trueIno, trueDev, plain, withVar, res, bpfjit.JitKnownBitKNOWN_ALL, bpfjit.JitKnownBitKNOWN_QUIET_PROGRAM,
				bpfjit.JitKnownBitKNOWN_NO_FRAMEWORK, bits)
		}
		time.Sleep(20 * time.Millisecond)
	}
	in.Close()
	if err := ct.Wait(); err != nil {
		t.Fatalf("coldtrace: %v", err)
	}
}

// knownExecs reads the known_execs table of the coldtrace running now.
func knownExecs(t *testing.T) map[bpfjit.JitImageKey]uint32 {
	t.Helper()
	out := map[bpfjit.JitImageKey]uint32{}
	found := false
	for id := ebpf.MapID(0); ; {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		id = next
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := m.Info()
		if err != nil || info.Name != bpfjit.JitMapKnownExecs {
			m.Close()
			continue
		}
		found = true
		var k bpfjit.JitImageKey
		var v uint32
		it := m.Iterate()
		for it.Next(&k, &v) {
			out[k] = v
		}
		m.Close()
	}
	if !found {
		t.Fatal("no known_execs table: is coldtrace running?")
	}
	return out
}
