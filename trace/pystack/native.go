package pystack

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"

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
	f, lazy := s.nativeFrame(int(pid), ip)
	if f.Func == unknownFunc {
		s.mu.Lock()
		s.unknown++ // gone before its mappings were read
		s.mu.Unlock()
	}
	s.intern(pid, id, record.PyStack{Frames: []record.PyFrame{f}})
	if lazy != nil {
		s.mu.Lock()
		lazy.stack = s.byHash[id]
		s.lazy = append(s.lazy, *lazy)
		s.mu.Unlock()
	}
}

// A module's symbol tables are read once the command has ended
// (nameLazyFrames), not when its first native frame arrives: node's
// .symtab, .strtab, .dynsym and .dynstr are 17 MB, read from disk on a
// cold start while the command itself was starting and reading them.
// Until then, and in checkpoints, such a frame is named module+0xVADDR.

// lazyFrame is a native frame to name at the end: stack index stack's
// only frame, at vaddr in module.
type lazyFrame struct {
	stack  int
	module moduleID
	vaddr  uint64
}

// pendingModule is an ELF file opened through its mapping, its symbols
// to be read at the end.
type pendingModule struct {
	f      *elf.File
	closeF func()
}

// nativeFrame symbolizes ip in pid: the function of the mapped ELF file's
// .symtab or .dynsym whose extent holds it; else module+0xOFFSET (the
// address in the file's own numbering); "?" outside any file mapping.
// A module whose symbols are not read yet gives module+0xVADDR and the
// frame to name at the end.
func (s *Sensor) nativeFrame(pid int, ip uint64) (record.PyFrame, *lazyFrame) {
	maps, err := procmaps.Read(pid)
	if err != nil {
		return record.PyFrame{Func: unknownFunc, Native: true}, nil
	}
	for _, m := range maps {
		if ip < m.Start || ip >= m.End {
			continue
		}
		f := record.PyFrame{File: m.Path, Native: true}
		vaddr, syms, id, err := s.moduleSymbols(pid, m, ip)
		if err != nil {
			f.Func = fmt.Sprintf("%s+%#x", filepath.Base(m.Path), ip-m.Start+m.Offset)
			return f, nil
		}
		f.Func = fmt.Sprintf("%s+%#x", filepath.Base(m.Path), vaddr)
		if syms == nil {
			return f, &lazyFrame{module: id, vaddr: vaddr}
		}
		if name, ok := symbolAt(syms, vaddr); ok {
			f.Func, f.Symbol = nativeName(name)
		}
		return f, nil
	}
	return record.PyFrame{Func: unknownFunc, Native: true}, nil
}

// maxMangled bounds the linkage names demangled: a name is the ELF
// file's own text, and a longer one is kept as it is.
const maxMangled = 4096

// nativeName is how a native frame names function symbol sym: a C++ or
// Rust linkage name (_Z…, _R…) demangled the way pprof shows names by
// default, without parameters or template arguments (a libtorch
// kernel's full name runs to hundreds of characters), with sym kept as
// linkage; any other name, or one that does not demangle, as it is.
func nativeName(sym string) (name, linkage string) {
	if len(sym) > maxMangled || !(strings.HasPrefix(sym, "_Z") || strings.HasPrefix(sym, "_R")) {
		return sym, ""
	}
	d := demangle.Filter(sym, demangle.NoParams, demangle.NoEnclosingParams, demangle.NoTemplateParams)
	if d == "" || d == sym {
		return sym, ""
	}
	return d, sym
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

// moduleSymbols opens the ELF file behind mapping m of pid (through
// map_files, device and inode checked) and returns ip's address in the
// file's numbering, the file's function symbols if already read, and the
// file's identity; nil symbols with no error: the file is kept open and
// its symbols read at the end (nameLazyFrames).
func (s *Sensor) moduleSymbols(pid int, m procmaps.Mapping, ip uint64) (uint64, []funcSym, moduleID, error) {
	id := moduleID{m.Major, m.Minor, m.Inode}
	f, closeF, err := openELF(pid, m)
	if err != nil {
		return 0, nil, id, err
	}
	vaddr, ok := fileVaddr(f, ip-m.Start+m.Offset)
	if !ok {
		closeF()
		return 0, nil, id, fmt.Errorf("%#x outside %s's segments", ip, m.Path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if syms, cached := s.modules[id]; cached {
		closeF()
		return vaddr, syms, id, nil
	}
	if _, pending := s.pending[id]; pending {
		closeF()
		return vaddr, nil, id, nil
	}
	if len(s.pending) >= maxModules {
		closeF()
		return 0, nil, id, fmt.Errorf("over %d modules to symbolize", maxModules)
	}
	s.pending[id] = pendingModule{f: f, closeF: closeF}
	return vaddr, nil, id, nil
}

// nameLazyFrames reads the symbols of the modules kept open and names
// the frames that waited for them; stacks that come out alike are one.
// Called with s.mu held, once the walker's records are drained.
func (s *Sensor) nameLazyFrames() {
	for id, pm := range s.pending {
		s.modules[id] = funcSymbols(pm.f)
		pm.closeF()
	}
	clear(s.pending)
	if len(s.lazy) == 0 {
		return
	}
	for _, lf := range s.lazy {
		if name, ok := symbolAt(s.modules[lf.module], lf.vaddr); ok && lf.stack < len(s.stacks) {
			fr := &s.stacks[lf.stack].Frames[0]
			fr.Func, fr.Symbol = nativeName(name)
		}
	}
	s.lazy = nil
	// Two addresses in one function were two stacks: keep the first.
	first := make(map[string]int, len(s.stacks))
	remap := make([]int, len(s.stacks))
	for i, st := range s.stacks {
		k := stackKey(st)
		if j, ok := first[k]; ok {
			remap[i] = j
			continue
		}
		first[k] = i
		remap[i] = i
	}
	for h, i := range s.byHash {
		s.byHash[h] = remap[i]
	}
	s.byKey = first
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
