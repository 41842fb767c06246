// Package elfsym reads the few dynamic symbols and needed libraries of an
// ELF file that coldtrace asks about, without reading its whole symbol
// and string tables.
package elfsym

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
)

// Looking up a few exported names, and a file's needed libraries, reads
// a few pages of it: its GNU hash table and the entries it leads to, the
// dynamic section and the names it points at. Reading every symbol to
// find three (debug/elf's DynamicSymbols and Symbols, and ImportedLibraries,
// which read the whole string tables) made every exec of a new image read
// its symbol and string tables: 17 MB of node's, 8 MiB of them from disk
// on a cold start, while the command itself was starting.

// ErrNoGNUHash is returned for a file without a GNU hash table (DT_HASH
// only, or no dynamic symbols): the caller reads every symbol instead.
var ErrNoGNUHash = errors.New("no GNU hash table")

// maxChain bounds the hash chain one lookup walks: a chain is the
// symbols of one bucket, a handful in a table sized by the linker.
const maxChain = 4096

// maxELFName bounds a symbol or library name read from a string table.
const maxELFName = 4096

// gnuHash is the GNU symbol hash of name (the dynamic linker's dl_new_hash).
func gnuHash(name string) uint32 {
	h := uint32(5381)
	for i := 0; i < len(name); i++ {
		h = h*33 + uint32(name[i])
	}
	return h
}

// Lookup finds name among f's dynamic symbols through its GNU hash
// table; ok is false when f does not export it.
func Lookup(f *elf.File, name string) (sym elf.Symbol, ok bool, err error) {
	hs := f.SectionByType(elf.SHT_GNU_HASH)
	if hs == nil {
		return sym, false, ErrNoGNUHash
	}
	dynsym := f.SectionByType(elf.SHT_DYNSYM)
	if dynsym == nil || int(dynsym.Link) >= len(f.Sections) {
		return sym, false, ErrNoGNUHash
	}
	dynstr := f.Sections[dynsym.Link]
	word, entSize := uint64(8), uint64(24)
	if f.Class == elf.ELFCLASS32 {
		word, entSize = 4, 16
	}
	bo := f.ByteOrder
	var hdr [16]byte
	if _, err := hs.ReadAt(hdr[:], 0); err != nil {
		return sym, false, fmt.Errorf("read GNU hash header: %w", err)
	}
	nbuckets, symOffset := bo.Uint32(hdr[0:]), bo.Uint32(hdr[4:])
	bloomSize, bloomShift := bo.Uint32(hdr[8:]), bo.Uint32(hdr[12:])
	if nbuckets == 0 || bloomSize == 0 {
		return sym, false, nil
	}
	h := gnuHash(name)
	bits := uint32(word * 8)
	var w [8]byte
	bloomAt := 16 + uint64((h/bits)%bloomSize)*word
	if _, err := hs.ReadAt(w[:word], int64(bloomAt)); err != nil {
		return sym, false, fmt.Errorf("read GNU hash bloom filter: %w", err)
	}
	bloom := uint64(bo.Uint32(w[:]))
	if word == 8 {
		bloom = bo.Uint64(w[:])
	}
	if mask := uint64(1)<<(h%bits) | uint64(1)<<((h>>bloomShift)%bits); bloom&mask != mask {
		return sym, false, nil
	}
	buckets := 16 + uint64(bloomSize)*word
	var b4 [4]byte
	if _, err := hs.ReadAt(b4[:], int64(buckets+uint64(h%nbuckets)*4)); err != nil {
		return sym, false, fmt.Errorf("read GNU hash bucket: %w", err)
	}
	i := bo.Uint32(b4[:])
	if i < symOffset {
		return sym, false, nil
	}
	// A versioned name can be defined more than once (glibc's old and
	// current lio_listio64): the one the loader binds is the version not
	// marked hidden in .gnu.version.
	versym := f.SectionByType(elf.SHT_GNU_VERSYM)
	chain := buckets + uint64(nbuckets)*4
	for n := 0; n < maxChain; n, i = n+1, i+1 {
		if _, err := hs.ReadAt(b4[:], int64(chain+uint64(i-symOffset)*4)); err != nil {
			return sym, false, fmt.Errorf("read GNU hash chain: %w", err)
		}
		h2 := bo.Uint32(b4[:])
		if h|1 == h2|1 {
			s, err := readSymbol(f, dynsym, dynstr, uint64(i), entSize)
			if err != nil {
				return sym, false, err
			}
			if s.Name == name {
				if !hiddenVersion(f, versym, uint64(i)) {
					return s, true, nil
				}
				if !ok {
					sym, ok = s, true // bound only where no default version is
				}
			}
		}
		if h2&1 != 0 {
			return sym, ok, nil // the bucket's last symbol
		}
	}
	return sym, false, fmt.Errorf("GNU hash chain longer than %d", maxChain)
}

// hiddenVersion reports whether dynamic symbol i's version is marked
// hidden (not the default a lookup by name binds).
func hiddenVersion(f *elf.File, versym *elf.Section, i uint64) bool {
	if versym == nil {
		return false
	}
	var v [2]byte
	if _, err := versym.ReadAt(v[:], int64(i*2)); err != nil {
		return false
	}
	return f.ByteOrder.Uint16(v[:])&0x8000 != 0
}

// readSymbol reads dynamic symbol i and its name.
func readSymbol(f *elf.File, dynsym, dynstr *elf.Section, i, entSize uint64) (elf.Symbol, error) {
	var e [24]byte
	if _, err := dynsym.ReadAt(e[:entSize], int64(i*entSize)); err != nil {
		return elf.Symbol{}, fmt.Errorf("read dynamic symbol %d: %w", i, err)
	}
	bo := f.ByteOrder
	var s elf.Symbol
	var nameAt uint32
	if f.Class == elf.ELFCLASS32 {
		nameAt = bo.Uint32(e[0:])
		s.Value, s.Size = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))
		s.Info, s.Other, s.Section = e[12], e[13], elf.SectionIndex(bo.Uint16(e[14:]))
	} else {
		nameAt = bo.Uint32(e[0:])
		s.Info, s.Other, s.Section = e[4], e[5], elf.SectionIndex(bo.Uint16(e[6:]))
		s.Value, s.Size = bo.Uint64(e[8:]), bo.Uint64(e[16:])
	}
	name, err := readString(dynstr, uint64(nameAt))
	if err != nil {
		return elf.Symbol{}, fmt.Errorf("read dynamic symbol %d's name: %w", i, err)
	}
	s.Name = name
	return s, nil
}

// readString reads the NUL-terminated string at off in string table sec,
// at most maxELFName bytes.
func readString(sec *elf.Section, off uint64) (string, error) {
	if off >= sec.Size {
		return "", fmt.Errorf("string at %d outside a %d-byte table", off, sec.Size)
	}
	buf := make([]byte, min(maxELFName, sec.Size-off))
	n, err := sec.ReadAt(buf, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	buf = buf[:n]
	end := bytes.IndexByte(buf, 0)
	if end < 0 {
		return "", fmt.Errorf("string at %d longer than %d bytes", off, maxELFName)
	}
	return string(buf[:end]), nil
}

// Needed returns f's DT_NEEDED names, read from its dynamic section
// one string at a time.
func Needed(f *elf.File) ([]string, error) {
	ds := f.SectionByType(elf.SHT_DYNAMIC)
	if ds == nil {
		return nil, nil
	}
	if int(ds.Link) >= len(f.Sections) || ds.Size > 1<<20 {
		return nil, fmt.Errorf("dynamic section: %d bytes, string table %d", ds.Size, ds.Link)
	}
	strs := f.Sections[ds.Link]
	d, err := ds.Data()
	if err != nil {
		return nil, fmt.Errorf("read dynamic section: %w", err)
	}
	ent := 16
	if f.Class == elf.ELFCLASS32 {
		ent = 8
	}
	var out []string
	for ; len(d) >= ent; d = d[ent:] {
		var tag, val uint64
		if ent == 8 {
			tag, val = uint64(f.ByteOrder.Uint32(d)), uint64(f.ByteOrder.Uint32(d[4:]))
		} else {
			tag, val = f.ByteOrder.Uint64(d), f.ByteOrder.Uint64(d[8:])
		}
		if elf.DynTag(tag) == elf.DT_NULL {
			break
		}
		if elf.DynTag(tag) != elf.DT_NEEDED {
			continue
		}
		name, err := readString(strs, val)
		if err != nil {
			return out, err
		}
		out = append(out, name)
	}
	return out, nil
}

// maxImports bounds the unhashed dynamic symbols Imports reads: the
// imports, which the linker puts before the hashed ones (node: 479 of
// 74,985).
const maxImports = 1 << 20

// Imports reports whether f imports any of names: an undefined dynamic
// symbol. Those the GNU hash table leaves out (symbols before its first
// hashed one: most imports) are read entry by entry, a name only as far
// as the longest of names; an undefined symbol it hashes (a function
// whose address is taken, given a canonical PLT entry) is looked up. A
// file without a GNU hash table has every entry read the same way.
func Imports(f *elf.File, names ...string) (bool, error) {
	dynsym := f.SectionByType(elf.SHT_DYNSYM)
	if dynsym == nil || len(names) == 0 {
		return false, nil
	}
	if int(dynsym.Link) >= len(f.Sections) {
		return false, fmt.Errorf("dynamic symbols' string table %d", dynsym.Link)
	}
	dynstr := f.Sections[dynsym.Link]
	entSize := uint64(24)
	if f.Class == elf.ELFCLASS32 {
		entSize = 16
	}
	unhashed := dynsym.Size / entSize
	hashed := false
	if hs := f.SectionByType(elf.SHT_GNU_HASH); hs != nil {
		var hdr [8]byte
		if _, err := hs.ReadAt(hdr[:], 0); err != nil {
			return false, fmt.Errorf("read GNU hash header: %w", err)
		}
		unhashed, hashed = min(unhashed, uint64(f.ByteOrder.Uint32(hdr[4:]))), true
	}
	if unhashed > maxImports {
		return false, fmt.Errorf("%d dynamic symbols to read", unhashed)
	}
	longest := 0
	for _, n := range names {
		longest = max(longest, len(n))
	}
	entries := make([]byte, unhashed*entSize)
	if _, err := dynsym.ReadAt(entries, 0); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read dynamic symbols: %w", err)
	}
	name := make([]byte, longest+1)
	for i := uint64(1); i < unhashed; i++ {
		e := entries[i*entSize:]
		nameAt, shndx := uint64(f.ByteOrder.Uint32(e)), f.ByteOrder.Uint16(e[6:])
		if f.Class == elf.ELFCLASS32 {
			shndx = f.ByteOrder.Uint16(e[14:])
		}
		if elf.SectionIndex(shndx) != elf.SHN_UNDEF || nameAt >= dynstr.Size {
			continue
		}
		n, err := dynstr.ReadAt(name[:min(uint64(len(name)), dynstr.Size-nameAt)], int64(nameAt))
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read dynamic symbol %d's name: %w", i, err)
		}
		got := name[:n]
		if end := bytes.IndexByte(got, 0); end >= 0 {
			got = got[:end]
		} else if n == len(name) {
			continue // longer than every name asked about
		}
		for _, want := range names {
			if string(got) == want {
				return true, nil
			}
		}
	}
	if !hashed {
		return false, nil
	}
	for _, n := range names {
		sym, ok, err := Lookup(f, n)
		if err != nil {
			return false, err
		}
		if ok && sym.Section == elf.SHN_UNDEF {
			return true, nil
		}
	}
	return false, nil
}
