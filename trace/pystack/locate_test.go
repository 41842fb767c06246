package pystack

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// running starts python sleeping and returns its pid once the
// interpreter runs user code.
func running(t *testing.T, python string) int {
	t.Helper()
	cmd := exec.Command(python, "-c", "import sys; sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()")
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
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "up" {
		t.Fatalf("%s did not start: %q %v", python, line, err)
	}
	return cmd.Process.Pid
}

// TestLocateFindsRuntimeOfEachInterpreter: the located _PyRuntime of a
// running interpreter of each minor is where its memory holds the
// runtime (3.13, 3.14: the debug cookie at its head; 3.11, 3.12: a non-null
// interpreters.head), and the minor is the interpreter's.
func TestLocateFindsRuntimeOfEachInterpreter(t *testing.T) {
	testenv.RequireRoot(t)
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			pid := running(t, py.path)
			in, err := Locate(pid)
			if err != nil {
				t.Fatal(err)
			}
			_, v, _ := strings.Cut(py.name, "-")
			want := map[string]int{"3.11": 11, "3.12": 12, "3.13": 13, "3.14": 14}[v]
			if in.Layout.Minor != want || int(in.Version>>16&0xff) != want {
				t.Errorf("minor %d (Py_Version %#x), want %d", in.Layout.Minor, in.Version, want)
			}
			m, err := openMem(pid)
			if err != nil {
				t.Fatal(err)
			}
			defer m.close()
			head := make([]byte, in.Layout.InterpHead+8)
			if err := m.read(in.Runtime, head); err != nil {
				t.Fatal(err)
			}
			if want >= 13 && string(head[:8]) != debugCookie {
				t.Errorf("_PyRuntime starts %q, want the debug cookie", head[:8])
			}
			if interp := binary.LittleEndian.Uint64(head[in.Layout.InterpHead:]); interp == 0 {
				t.Errorf("interpreters.head is null at %#x", in.Runtime)
			}
			// PyCode_Type's name is "code".
			tp := make([]byte, 32)
			if err := m.read(in.CodeType, tp); err != nil {
				t.Fatal(err)
			}
			name := make([]byte, 4)
			if err := m.read(binary.LittleEndian.Uint64(tp[24:]), name); err != nil || string(name) != "code" {
				t.Errorf("PyCode_Type's tp_name %q (%v), want code", name, err)
			}
		})
	}
}

// TestLocateRefusesOtherMinors: 3.10 (no Py_Version) is unsupported and
// says so; Python 2.7 (no _PyRuntime) is not a CPython to walk.
func TestLocateRefusesOtherMinors(t *testing.T) {
	testenv.RequireRoot(t)
	for minor, want := range map[string]error{"3.10": ErrUnsupported, "2.7": ErrNotPython} {
		m, _ := filepath.Glob(filepath.Join("/root/.pyenv/versions", minor+".*", "bin", "python"+minor))
		if len(m) == 0 {
			t.Logf("no pyenv %s: not checked", minor)
			continue
		}
		pid := running(t, m[0])
		if _, err := Locate(pid); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", minor, err, want)
		}
	}
}

// TestDebugOffsetsChecked: 3.13's and 3.14's offsets are each read with
// their own minor's layout, and refused without the cookie, with another
// version, from a free-threaded build, with an implausible offset or
// short; another minor (3.15) is not read at all.
func TestDebugOffsetsChecked(t *testing.T) {
	for _, d := range []debugTable{debugOffsets313, debugOffsets314} {
		v := uint64(0x030000f0 | d.minor<<16)
		good := make([]byte, d.size)
		copy(good, debugCookie)
		binary.LittleEndian.PutUint64(good[d.version:], v)
		binary.LittleEndian.PutUint64(good[d.uniLength:], strLength)
		binary.LittleEndian.PutUint64(good[d.tsNativeTID:], 1234)
		binary.LittleEndian.PutUint64(good[d.coAdaptive:], 4321)
		l, err := layoutFor(v, good)
		if err != nil || l.Minor != d.minor || l.TSNativeTID != 1234 || l.CoCodeAdaptive != 4321 {
			t.Fatalf("3.%d: well-formed offsets read as %+v, %v", d.minor, l, err)
		}
		noCookie := append([]byte(nil), good...)
		copy(noCookie, "xdebugpz")
		other := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(other[d.version:], v+0x10000)
		ft := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(ft[d.freeThreaded:], 1)
		huge := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(huge[d.tsFrame:], 1<<40)
		for name, b := range map[string][]byte{"no cookie": noCookie, "other version": other, "free-threaded": ft,
			"implausible offset": huge, "short": good[:d.size-8]} {
			if _, err := parseDebugOffsets(d, b, v); !errors.Is(err, ErrUnsupported) {
				t.Errorf("3.%d %s: %v, want ErrUnsupported", d.minor, name, err)
			}
		}
	}
	head := make([]byte, debugHead)
	copy(head, debugCookie)
	if _, err := layoutFor(0x030f00a0, head); !errors.Is(err, ErrUnsupported) {
		t.Errorf("3.15: %v, want ErrUnsupported", err)
	}
}
