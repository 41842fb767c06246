package uprobes

import (
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/elfsym"
	"github.com/coldtrace/coldtrace/internal/procmaps"
)

// Gate keeps a set's links out of the processes that cannot call its
// function. A uprobe's breakpoint gives the library's text an anonymous
// page, and from then on every fork of the process copies the page
// table of that whole mapping (a mapping with anonymous pages cannot be
// faulted in again from the file): measured on a 2,000-process
// fork/exec storm of a program that never resolves a name, the probe of
// getaddrinfo in libc made the storm 6–12% slower. A program that can
// call the function is probed from its exec on, as before; one that
// cannot is probed once one of its mappings imports it (a library it
// opened).
type Gate struct {
	// Symbols are the function and those that call it from inside its
	// own library: an ELF object that imports one (an undefined dynamic
	// symbol) can call it.
	Symbols []string
	// Quiet lists libraries, by name without ".so" ("libc", "libm",
	// "ld-linux-x86-64"), known never to call the function themselves
	// nor to need a library that does. A program that imports a symbol or
	// needs a library outside the list is taken to call it (its libraries
	// are not mapped yet when its exec is handled), as is a file that
	// cannot be read as ELF; a program whose needed libraries are all
	// quiet can reach it only through a library it opens later, which
	// the process's mappings then show.
	Quiet []string
}

// gateFile is one file's answer for one gate, cached: the program rule
// (imports or needs) or the mapping rule (imports).
type gateFile struct {
	g       *Gate
	key     fileKey
	program bool
}

// quiet says whether a needed library's name is one of g's.
func (g *Gate) quiet(needed string) bool {
	if strings.Contains(needed, "/") {
		return false // a path, which the loader opens as it is
	}
	for _, q := range g.Quiet {
		if needed == q+".so" || strings.HasPrefix(needed, q+".so.") {
			return true
		}
	}
	return false
}

// mayCall reads f's ELF dynamic section and imports: whether it imports
// one of g.Symbols and, when program, whether it needs a library that is not
// quiet. A file that is not a well-formed ELF may call it.
func (g *Gate) mayCall(f io.ReaderAt, program bool) (calls bool) {
	defer func() {
		if recover() != nil {
			calls = true
		}
	}()
	ef, err := elf.NewFile(f)
	if err != nil {
		return true
	}
	// The imports and the needed names only, not the whole symbol and
	// string tables (node's are 17 MB, read at every new image's exec).
	imports, err := elfsym.Imports(ef, g.Symbols...)
	if err != nil || imports {
		return true
	}
	if !program {
		return false
	}
	needed, err := elfsym.Needed(ef)
	if err != nil {
		return true
	}
	for _, n := range needed {
		if !g.quiet(n) {
			return true
		}
	}
	return false
}

// answer is the cached answer of g for the file key, read with read
// the first time its inode is asked about (and again while read cannot
// tell: ok false).
func (s *Scoper) answer(g *Gate, key fileKey, program bool, read func() (v, ok bool)) bool {
	k := gateFile{g, key, program}
	if v, ok := s.gated[k]; ok {
		return v
	}
	v, ok := read()
	if !ok {
		return v
	}
	if s.gated == nil {
		s.gated = map[gateFile]bool{}
	}
	s.gated[k] = v
	return v
}

// programReadTimeout bounds TrackProgram's reading of the programs a
// command will run, which the command's release waits for.
const programReadTimeout = time.Second

// readPrograms asks each gate whether one of programs can call its
// function, reading them in a goroutine for at most timeout; past it,
// or with no programs, every gate's answer is yes. It closes programs,
// once read.
func readPrograms[F interface {
	io.ReaderAt
	io.Closer
}](gates []*Gate, programs []F, timeout time.Duration) map[*Gate]bool {
	all := func() map[*Gate]bool {
		out := map[*Gate]bool{}
		for _, g := range gates {
			out[g] = true
		}
		return out
	}
	if len(programs) == 0 {
		return all()
	}
	done := make(chan map[*Gate]bool, 1)
	go func() {
		out := map[*Gate]bool{}
		for _, g := range gates {
			for _, f := range programs {
				if g.mayCall(f, true) {
					out[g] = true
					break
				}
			}
		}
		for _, f := range programs {
			f.Close()
		}
		done <- out
	}()
	select {
	case out := <-done:
		return out
	case <-time.After(timeout):
		return all()
	}
}

// reachProgram marks the gated sets that the program pid runs can call.
// It returns whether a set became reachable. A program that cannot be
// read is taken to call them.
func (s *Scoper) reachProgram(pid int32, p *proc) bool {
	if !s.unreached(p) {
		return false
	}
	// The kernel's own link to the program, never a path the process named.
	f, err := os.Open("/proc/" + strconv.Itoa(int(pid)) + "/exe")
	if errors.Is(err, fs.ErrNotExist) {
		// Exited, or a zombie: it runs nothing more (most children of a
		// shell loop by the time their exec is handled).
		return false
	}
	if err != nil {
		return s.reachAll(p)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return s.reachAll(p)
	}
	key := fileKey{st.Dev, st.Ino}
	changed := false
	for _, set := range s.sets {
		if set.Gate == nil || p.reach[set] {
			continue
		}
		if s.answer(set.Gate, key, true, func() (bool, bool) { return set.Gate.mayCall(f, true), true }) {
			p.reach[set], changed = true, true
		}
	}
	return changed
}

// programQuiet says whether the program of an exec record, the file of
// inode ino on device dev (as the kernel numbers it), can call none of
// the gated sets' functions; with no gated set, every program is quiet.
// The file is the one pid runs, or, once pid is gone (most children of a
// shell loop by the time their exec is handled), the one open gives,
// both taken only if they are that inode.
func (s *Scoper) programQuiet(pid int32, ino uint64, dev uint32, open func() (*os.File, error)) bool {
	gates := s.gatesLocked()
	if len(gates) == 0 {
		return true
	}
	f, err := os.Open("/proc/" + strconv.Itoa(int(pid)) + "/exe")
	if err != nil {
		if open == nil {
			return false
		}
		if f, err = open(); err != nil {
			return false
		}
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		st.Ino != ino || unix.Major(st.Dev)<<20|unix.Minor(st.Dev) != dev {
		return false
	}
	key := fileKey{st.Dev, st.Ino}
	for _, g := range gates {
		if s.answer(g, key, true, func() (bool, bool) { return g.mayCall(f, true), true }) {
			return false
		}
	}
	return true
}

// reachMapped marks the gated sets that one of maps' executable
// mappings imports. It returns whether a set became reachable.
func (s *Scoper) reachMapped(pid int32, p *proc, maps []procmaps.Mapping) bool {
	if !s.unreached(p) {
		return false
	}
	changed := false
	for _, set := range s.sets {
		if set.Gate == nil || p.reach[set] {
			continue
		}
		for _, m := range maps {
			if !m.Exec() || m.Inode == 0 {
				continue
			}
			key := fileKey{uint64(unix.Mkdev(m.Major, m.Minor)), m.Inode}
			read := func() (bool, bool) {
				f, err := procmaps.Open(int(pid), m)
				if err != nil {
					return false, false // unmapped meanwhile: asked again at the next scan
				}
				defer f.Close()
				return set.Gate.mayCall(f, false), true
			}
			if s.answer(set.Gate, key, false, read) {
				p.reach[set], changed = true, true
				break
			}
		}
	}
	return changed
}

// gatesLocked lists the sets' gates (s.mu held).
func (s *Scoper) gatesLocked() []*Gate {
	var gates []*Gate
	for _, set := range s.sets {
		if set.Gate != nil {
			gates = append(gates, set.Gate)
		}
	}
	return gates
}

// unreached says whether p has a gated set it cannot call yet.
func (s *Scoper) unreached(p *proc) bool {
	for _, set := range s.sets {
		if set.Gate != nil && !p.reach[set] {
			return true
		}
	}
	return false
}

// reachAll marks every gated set reachable in p.
func (s *Scoper) reachAll(p *proc) bool {
	changed := false
	for _, set := range s.sets {
		if set.Gate != nil && !p.reach[set] {
			p.reach[set], changed = true, true
		}
	}
	return changed
}
