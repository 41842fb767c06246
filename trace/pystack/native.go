package pystack

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/coldtrace/coldtrace/internal/procmaps"
	"github.com/coldtrace/coldtrace/record"
)

// maxModules bounds the symbol tables kept between native frames.
const maxModules = 64

// moduleID is one ELF file: device and inode as maps lists them.
type moduleID struct {
	major, minor uint32
	ino          uint64
}

// funcSym is one function symbol with its size.
type funcSym struct {
	name        string
	start, size uint64
}

// decodeNative interns the one-frame stack id of process pid whose leaf
// native frame is at ip (bpf/pystack's native_leaf).
func (s *Sensor) decodeNative(pid uint32, id, ip uint64) {
	s.mu.Lock()
	_, done := s.byHash[id]
	s.mu.Unlock()
	if done {
		return
	}
	f := s.nativeFrame(int(pid), ip)
	if f.Func == unknownFunc {
		s.mu.Lock()
		s.unknown++ // gone before its mappings were read
		s.mu.Unlock()
	}
	s.intern(pid, id, record.PyStack{Frames: []record.PyFrame{f}})
}

// nativeFrame symbolizes ip in pid: the function of the mapped ELF file's
// .symtab or .dynsym whose extent holds it; else module+0xOFFSET (the
// address in the file's own numbering); "?" outside any file mapping.
func (s *Sensor) nativeFrame(pid int, ip uint64) record.PyFrame {
	maps, err := procmaps.Read(pid)
	if err != nil {
		return record.PyFrame{Func: unknownFunc, Native: true}
	}
	for _, m := range maps {
		if ip < m.Start || ip >= m.End {
			continue
		}
		f := record.PyFrame{File: m.Path, Native: true}
		vaddr, syms, err := s.moduleSymbols(pid, m, ip)
		if err != nil {
			f.Func = fmt.Sprintf("%s+%#x", filepath.Base(m.Path), ip-m.Start+m.Offset)
			return f
		}
		f.Func = fmt.Sprintf("%s+%#x", filepath.Base(m.Path), vaddr)
		if name, ok := symbolAt(syms, vaddr); ok {
			f.Func = name
		}
		return f
	}
	return record.PyFrame{Func: unknownFunc, Native: true}
}

// symbolAt is the function whose [start, start+size) holds vaddr: a
// symbol without a size, or one that ends before vaddr, names nothing.
func symbolAt(syms []funcSym, vaddr uint64) (string, bool) {
	i := sort.Search(len(syms), func(i int) bool { return syms[i].start > vaddr })
	for j := i - 1; j >= 0 && j >= i-8; j-- { // nested or aliased symbols share starts
		if vaddr < syms[j].start+syms[j].size {
			return syms[j].name, true
		}
	}
	return "", false
}

// moduleSymbols reads the ELF file behind mapping m of pid (through
// map_files, device and inode checked) and returns ip's address in the
// file's numbering and its function symbols, sorted, cached by file.
func (s *Sensor) moduleSymbols(pid int, m procmaps.Mapping, ip uint64) (uint64, []funcSym, error) {
	f, closeF, err := openELF(pid, m)
	if err != nil {
		return 0, nil, err
	}
	defer closeF()
	vaddr, ok := fileVaddr(f, ip-m.Start+m.Offset)
	if !ok {
		return 0, nil, fmt.Errorf("%#x outside %s's segments", ip, m.Path)
	}
	id := moduleID{m.Major, m.Minor, m.Inode}
	s.mu.Lock()
	syms, cached := s.modules[id]
	s.mu.Unlock()
	if cached {
		return vaddr, syms, nil
	}
	syms = funcSymbols(f)
	s.mu.Lock()
	if len(s.modules) >= maxModules {
		clear(s.modules)
	}
	s.modules[id] = syms
	s.mu.Unlock()
	return vaddr, syms, nil
}

// fileVaddr is the virtual address, in the file's numbering, of file
// offset off: inside the loadable segment that maps it.
func fileVaddr(f *elf.File, off uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && off >= p.Off && off < p.Off+p.Filesz {
			return p.Vaddr + off - p.Off, true
		}
	}
	return 0, false
}

// funcSymbols are the sized function symbols of .symtab and .dynsym,
// each section read only under maxSymSection, sorted by start.
func funcSymbols(f *elf.File) []funcSym {
	var out []funcSym
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		sec := f.SectionByType(typ)
		if sec == nil || sec.Size > maxSymSection {
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
			if elf.ST_TYPE(sy.Info) == elf.STT_FUNC && sy.Size > 0 && sy.Section != elf.SHN_UNDEF && sy.Name != "" {
				out = append(out, funcSym{name: sy.Name, start: sy.Value, size: sy.Size})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}
