package uprobes

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestTargetMatchesLibraryNames(t *testing.T) {
	cases := []struct {
		lib, base string
		want      bool
	}{
		{"libc.so.6", "libc.so.6", true},
		{"libc.so.6", "libc.so.6 (deleted)", true},
		{"libc.so.6", "libcrypt.so.1", false},
		{"libnvrtc", "libnvrtc.so.12", true},
		{"nvrtc", "libnvrtc-3a9b.so.12", true},
		{"libcuda", "libcudart.so.12", false},
		{"/opt/x/libjit.so", "libjit.so", true},
		{"/opt/x/libjit.so", "libjit.so.1", false},
	}
	for _, c := range cases {
		if got := (Target{Lib: c.lib}).Matches(c.base); got != c.want {
			t.Errorf("%q matches %q: %v, want %v", c.lib, c.base, got, c.want)
		}
	}
}

// TestSymbolOffsetsAreFileOffsetsOfFunctions builds a library and checks
// the offsets against its own section headers: a function's file offset
// is its address less its segment's, plus the segment's offset.
func TestSymbolOffsetsAreFileOffsetsOfFunctions(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	c := filepath.Join(dir, "l.c")
	so := filepath.Join(dir, "libl.so")
	if err := os.WriteFile(c, []byte("int data_v = 3;\nint fn_a(int x) { return x + data_v; }\nint fn_b(int x) { return x * 2; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("cc", "-O1", "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
	f, err := os.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := symbolOffsets(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["data_v"]; ok {
		t.Error("a data symbol was taken for a function")
	}
	ef, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	text := ef.Section(".text")
	for _, name := range []string{"fn_a", "fn_b"} {
		off, ok := got[name]
		if !ok {
			t.Fatalf("%s missing from %v", name, got)
		}
		if off < text.Offset || off >= text.Offset+text.Size {
			t.Errorf("%s at file offset %#x, outside .text [%#x, %#x)", name, off, text.Offset, text.Offset+text.Size)
		}
		// Found through the hash table alone, at the same offset.
		if hashed, ok, err := exportedOffset(f, name); err != nil || !ok || hashed != off {
			t.Errorf("%s through the hash table: %#x, %v, %v; every symbol gives %#x", name, hashed, ok, err, off)
		}
	}
	for _, name := range []string{"data_v", "fn_c"} {
		if _, ok, err := exportedOffset(f, name); ok || err != nil {
			t.Errorf("%s (not a function of the library) found through the hash table: %v", name, err)
		}
	}
}

func TestSymbolOffsetsRefuseAFileThatIsNotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libfake.so")
	if err := os.WriteFile(p, []byte("\x7fELF\x02\x01\x01garbage that is not an ELF header at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if syms, err := symbolOffsets(f); err == nil {
		t.Fatalf("a malformed file gave symbols %v", syms)
	}
}

// TestScoperTracksNothingWithoutSets: with no targets, tracking reads no
// mappings and makes no links.
func TestScoperTracksNothingWithoutSets(t *testing.T) {
	s := &Scoper{files: map[fileKey]*libFile{}, procs: map[int32]*proc{}, gone: map[int32]bool{}}
	s.Track(int32(os.Getpid()), true)
	if len(s.procs) != 0 {
		t.Fatalf("%d processes tracked with no targets", len(s.procs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
