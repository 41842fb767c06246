package pystack

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coldtrace/coldtrace/internal/elfsym"
	"github.com/coldtrace/coldtrace/internal/procmaps"
)

// Interp is a located interpreter: its layout and the run-time addresses
// the walker starts from.
type Interp struct {
	Layout   Layout
	Version  uint64 // Py_Version, PY_VERSION_HEX
	Runtime  uint64 // _PyRuntime
	CodeType uint64 // PyCode_Type
	// Fixed: the runtime lies in a fixed-address executable (not PIE,
	// not libpython), so every process of that file has it at the same
	// address.
	Fixed bool
	exec  bool // found in an ELF of type ET_EXEC
}

// ErrNotPython is a process whose executable neither is CPython nor
// links libpython.
var ErrNotPython = errors.New("not a CPython process")

// errNotYet is a dynamically linked Python whose libpython the loader
// has not mapped yet.
var errNotYet = errors.New("libpython not mapped yet")

// Bounds on what an ELF file may make the locator read.
const (
	maxELFSize    = 1 << 30
	maxSymSection = 64 << 20
)

// Locate finds the interpreter of process pid, reading its ELF files
// through /proc/PID/map_files.
func Locate(pid int) (*Interp, error) {
	maps, err := procmaps.Read(pid)
	if err != nil {
		return nil, fmt.Errorf("read maps of %d: %w", pid, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, fmt.Errorf("locate python in %d: %w", pid, err)
	}
	var exeMap, libMap *procmaps.Mapping
	for i := range maps {
		m := &maps[i]
		if m.Offset != 0 {
			continue
		}
		if m.Path == exe && exeMap == nil {
			exeMap = m
		}
		if b := filepath.Base(m.Path); strings.HasPrefix(b, "libpython3.") && strings.Contains(b, ".so") && libMap == nil {
			libMap = m
		}
	}
	if exeMap == nil {
		return nil, fmt.Errorf("locate python in %d: executable not mapped", pid)
	}
	if libMap != nil {
		return locateIn(pid, *libMap)
	}
	in, err := locateIn(pid, *exeMap)
	if errors.Is(err, ErrNotPython) && needsLibpython(pid, *exeMap) {
		return nil, errNotYet
	}
	if err == nil && in.exec {
		in.Fixed = true
	}
	return in, err
}

// needsLibpython reports whether the executable links libpython.
func needsLibpython(pid int, m procmaps.Mapping) bool {
	f, closeF, err := openELF(pid, m)
	if err != nil {
		return false
	}
	defer closeF()
	libs, err := elfsym.Needed(f)
	if err != nil {
		return false
	}
	for _, l := range libs {
		if strings.HasPrefix(l, "libpython3.") {
			return true
		}
	}
	return false
}

func openELF(pid int, m procmaps.Mapping) (*elf.File, func(), error) {
	// Through the process's own mapping, device and inode checked: never
	// the path it names.
	fh, err := procmaps.Open(pid, m)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", m.Path, err)
	}
	st, err := fh.Stat()
	if err != nil || st.Size() > maxELFSize {
		fh.Close()
		return nil, nil, fmt.Errorf("open %s: unreadable or over %d bytes", m.Path, int64(maxELFSize))
	}
	f, err := elf.NewFile(fh)
	if err != nil {
		fh.Close()
		return nil, nil, fmt.Errorf("parse %s: %w", m.Path, err)
	}
	return f, func() { fh.Close() }, nil
}

// locateIn finds _PyRuntime, PyCode_Type and Py_Version in the ELF file
// mapped at m (offset 0), and reads the layout.
func locateIn(pid int, m procmaps.Mapping) (*Interp, error) {
	f, closeF, err := openELF(pid, m)
	if err != nil {
		return nil, err
	}
	defer closeF()
	b := filepath.Base(m.Path)
	python := strings.HasPrefix(b, "python") || strings.HasPrefix(b, "libpython")
	syms, err := exportedSymbols(f, python, "_PyRuntime", "PyCode_Type", "Py_Version")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	rt, ok1 := syms["_PyRuntime"]
	ct, ok2 := syms["PyCode_Type"]
	pv, ok3 := syms["Py_Version"]
	if !ok1 || !ok2 {
		return nil, ErrNotPython
	}
	if !ok3 {
		return nil, fmt.Errorf("%w: no Py_Version (3.10 or older)", ErrUnsupported)
	}
	bias := loadBias(f, m)
	ver, err := readFileU64(f, pv.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: read Py_Version: %w", m.Path, err)
	}
	head := make([]byte, debugHead)
	if n, _ := readFileAt(f, rt.Value, head); n < len(head) {
		head = head[:n]
	}
	l, err := layoutFor(ver, head)
	if err != nil {
		return nil, err
	}
	return &Interp{Layout: l, Version: ver, Runtime: rt.Value + bias, CodeType: ct.Value + bias, exec: f.Type == elf.ET_EXEC}, nil
}

// exportedSymbols looks names up among f's dynamic symbols through its
// GNU hash table (internal/elfsym), and where some are not there and the file
// may be a Python built without exporting them (scanSymtab: its name says
// python), or f has no such table, by reading every symbol of .dynsym,
// then .symtab, each only when under maxSymSection.
func exportedSymbols(f *elf.File, scanSymtab bool, names ...string) (map[string]elf.Symbol, error) {
	out := map[string]elf.Symbol{}
	hashed := true
	for _, n := range names {
		sy, ok, err := elfsym.Lookup(f, n)
		if errors.Is(err, elfsym.ErrNoGNUHash) {
			hashed = false
			break
		}
		if err != nil {
			return nil, err
		}
		if ok && sy.Section != elf.SHN_UNDEF && sy.Value != 0 {
			out[n] = sy
		}
	}
	if hashed && (len(out) == len(names) || !scanSymtab) {
		return out, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	types := []elf.SectionType{elf.SHT_DYNSYM, elf.SHT_SYMTAB}
	if hashed {
		types = types[1:] // .dynsym was searched through its table
	}
	for _, typ := range types {
		s := f.SectionByType(typ)
		if s == nil || s.Size > maxSymSection {
			continue
		}
		var syms []elf.Symbol
		var err error
		if typ == elf.SHT_DYNSYM {
			syms, err = f.DynamicSymbols()
		} else {
			syms, err = f.Symbols()
		}
		if err != nil {
			continue
		}
		for _, sy := range syms {
			if want[sy.Name] && sy.Section != elf.SHN_UNDEF && sy.Value != 0 {
				if _, dup := out[sy.Name]; !dup {
					out[sy.Name] = sy
				}
			}
		}
		if len(out) == len(names) {
			break
		}
	}
	return out, nil
}

// loadBias is what the loader added to the file's addresses: 0 for a
// fixed-address executable, else the mapping's start less the first
// loadable segment's page-aligned address.
func loadBias(f *elf.File, m procmaps.Mapping) uint64 {
	if f.Type == elf.ET_EXEC {
		return 0
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			return m.Start - (p.Vaddr &^ 0xfff)
		}
	}
	return 0
}

// readFileAt reads the file bytes behind virtual address addr.
func readFileAt(f *elf.File, addr uint64, b []byte) (int, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr >= p.Vaddr+p.Filesz {
			continue
		}
		n := min(uint64(len(b)), p.Vaddr+p.Filesz-addr)
		return p.ReadAt(b[:n], int64(addr-p.Vaddr))
	}
	return 0, fmt.Errorf("address %#x not in the file", addr)
}

func readFileU64(f *elf.File, addr uint64) (uint64, error) {
	var b [8]byte
	n, err := readFileAt(f, addr, b[:])
	if n < 8 {
		return 0, fmt.Errorf("short read at %#x: %w", addr, err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
