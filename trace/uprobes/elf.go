package uprobes

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"

	"github.com/coldtrace/coldtrace/internal/elfsym"
)

// symbolOffsets reads the function symbols of the ELF file f (static and
// dynamic tables) and returns each one's file offset, the place a uprobe
// goes. It reads only through f; a malformed file is an error, never a
// panic.
func symbolOffsets(f *os.File) (out map[string]uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("malformed ELF file: %v", r)
		}
	}()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("read ELF: %w", err)
	}
	if ef.Type != elf.ET_DYN && ef.Type != elf.ET_EXEC {
		return nil, errors.New("not a shared object or executable")
	}
	syms, err := ef.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("read symbols: %w", err)
	}
	dyn, err := ef.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("read dynamic symbols: %w", err)
	}
	out = map[string]uint64{}
	for _, s := range append(syms, dyn...) {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
			continue // data, or an undefined (imported) function
		}
		if off, ok := textOffset(ef, s.Value); ok {
			out[s.Name] = off
		}
	}
	return out, nil
}

// textOffset is the file offset of address value inside one of ef's
// executable loadable segments.
func textOffset(ef *elf.File, value uint64) (uint64, bool) {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= value && value < p.Vaddr+p.Memsz {
			return value - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// exportedOffset finds function sym among f's exported symbols through
// the file's GNU hash table (a few pages read, where symbolOffsets reads
// every symbol and name: the symbol tables of a JIT library are tens of
// megabytes) and returns its file offset. ok is false when the table
// does not hold it as a defined function, or cannot be read: the caller
// reads every symbol then.
func exportedOffset(f *os.File, sym string) (off uint64, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			off, ok, err = 0, false, fmt.Errorf("malformed ELF file: %v", r)
		}
	}()
	ef, err := elf.NewFile(f)
	if err != nil {
		return 0, false, fmt.Errorf("read ELF: %w", err)
	}
	// No table, a table that cannot be read, or no such function in it:
	// the scan of every symbol decides.
	s, found, err := elfsym.Lookup(ef, sym)
	if err != nil || !found || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF {
		return 0, false, nil
	}
	off, ok = textOffset(ef, s.Value)
	return off, ok, nil
}
