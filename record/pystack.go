package record

import (
	"fmt"
	"path/filepath"
	"strings"
)

// PyStack is one Python stack, innermost frame first.
type PyStack struct {
	Frames []PyFrame `json:"frames"`
	// Omitted is how many frames of a deep stack are left out between
	// its 64 innermost and 16 outermost (a frame with Func GapFunc and no
	// file stands in the gap).
	Omitted int `json:"omitted,omitempty"`
	// Truncated: the thread had more frames than the walker follows
	// (1,024); the outermost shown are not the thread's outermost.
	Truncated bool `json:"truncated,omitempty"`
}

// PyFrame is one frame. A frame whose code object could not be read, or
// had changed since the walk, has Func "?" and no file or line.
type PyFrame struct {
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Func string `json:"func"`
	// Native marks a machine-code frame of a process with no Python stack
	// (not Python, or an interpreter whose layout is not known): File is
	// the mapped ELF file, Func its function or "module+0xOFFSET", no Line.
	Native bool `json:"native,omitempty"`
	// Symbol is a native frame's function as the ELF file names it, where
	// that is a C++ or Rust linkage name and Func its demangled form
	// (without parameters or template arguments); empty otherwise.
	Symbol string `json:"symbol,omitempty"`
}

// GapFunc names the frame that stands for a deep stack's omitted frames.
const GapFunc = "…"

// StackOf is the stack a process was started from, nil when none.
func (r *Record) StackOf(p *Process) *PyStack {
	if r == nil || p == nil || p.Stack <= 0 || p.Stack > len(r.Stacks) {
		return nil
	}
	return &r.Stacks[p.Stack-1]
}

// StackCharge is the part of a subject's time (a file's, a download's, a
// cache's) charged to one Python stack: where the thread stood in its
// Python code when it filled the file's pages, opened the connection or
// looked the cache up (a thread with no Python stack: its leaf native
// frame, for files and downloads).
type StackCharge struct {
	// Stack is 1 + the index in Record.Stacks.
	Stack int `json:"stack"`
	// PID is the process whose thread stood there.
	PID int32 `json:"pid,omitempty"`
	// NS is thread time: for a file, the fill CPU, I/O waits and fill
	// waits of the kernel entries the stack started (MissCPUNS +
	// IOWaitNS + FillWaitNS); for a download, its time; for a cache, the
	// compile time of the misses the stack started.
	NS         int64 `json:"ns"`
	MissCPUNS  int64 `json:"miss_cpu_ns,omitempty"`
	IOWaitNS   int64 `json:"io_wait_ns,omitempty"`
	FillWaitNS int64 `json:"fill_wait_ns,omitempty"`
	// Bytes: for a file, the bytes the stack's kernel entries read or
	// mapped while filling; for a download, its bytes.
	Bytes uint64 `json:"bytes"`
	// BytesFromDisk: for a file, the bytes inserted into the page cache
	// while the stack's fill was open, its readahead's included (which
	// later reads may consume under another stack).
	BytesFromDisk uint64 `json:"bytes_from_disk,omitempty"`
	// Misses and Hits: for a cache, the lookups the stack made that
	// missed and hit (NS is then its misses' compile time).
	Misses uint64 `json:"misses,omitempty"`
	Hits   uint64 `json:"hits,omitempty"`
}

// StackAt is the stack a StackCharge (or a Process) names, nil when none.
func (r *Record) StackAt(idx int) *PyStack {
	if r == nil || idx <= 0 || idx > len(r.Stacks) {
		return nil
	}
	return &r.Stacks[idx-1]
}

// LibraryFile reports whether a frame's file is not the user's own code:
// the standard library (.../lib/python3.X/), an installed package (site-
// or dist-packages) or a frozen or generated module ("<frozen …>",
// "<string>").
func LibraryFile(p string) bool {
	switch {
	case strings.HasPrefix(p, "<"):
		return true
	case strings.Contains(p, "/site-packages/") || strings.Contains(p, "/dist-packages/"):
		return true
	}
	return strings.Contains(p, "/lib/python3.")
}

// UserFrame is the stack's innermost frame in the user's own code (see
// LibraryFile), or, in a stack without any, in the package its program
// runs from (ProgramPackage); nil when it has neither.
func (st *PyStack) UserFrame() *PyFrame {
	if st == nil {
		return nil
	}
	pkg := st.ProgramPackage()
	for i := range st.Frames {
		f := &st.Frames[i]
		if f.File != "" && OwnFile(f.File, pkg) {
			return f
		}
	}
	return nil
}

// PackagePath is p from its installed package's directory on
// ("pip/_internal/network/download.py" for
// ".../dist-packages/pip/_internal/network/download.py"), and whether p
// lies in site- or dist-packages at all.
func PackagePath(p string) (string, bool) {
	i := max(strings.LastIndex(p, "/site-packages/"), strings.LastIndex(p, "/dist-packages/"))
	if i < 0 {
		return "", false
	}
	return p[i+len("/site-packages/"):], true // both names are as long
}

// ProgramPackage is the installed package a stack's program runs from
// when the stack has no frame of the user's own code: `python -m pip`,
// a tool run as a module. It is the package of the stack's outermost
// frame in site- or dist-packages ("pip"); "" when the stack has a frame
// of the user's, or none in a package.
func (st *PyStack) ProgramPackage() string {
	if st == nil {
		return ""
	}
	pkg := ""
	for _, f := range st.Frames {
		if f.File == "" || f.Native {
			continue
		}
		if !LibraryFile(f.File) {
			return ""
		}
		if rest, ok := PackagePath(f.File); ok {
			pkg, _, _ = strings.Cut(rest, "/")
		}
	}
	return pkg
}

// OwnFile reports whether a frame's file is the code of the program a
// stack runs: the user's own (not LibraryFile), or, where pkg is the
// stack's ProgramPackage, that package's outside what it vendors
// (pip/_vendor/urllib3 is not pip's own).
func OwnFile(p, pkg string) bool {
	if !LibraryFile(p) {
		return true
	}
	rest, ok := PackagePath(p)
	if pkg == "" || !ok {
		return false
	}
	return (rest == pkg || strings.HasPrefix(rest, pkg+"/")) && !strings.Contains(rest, "/_vendor/")
}

// SiteName names a stack's call site in one line, for comparing runs:
// its innermost frame of the user's own code as "qualname (file.py:LINE)"
// with the file's base name, a native leaf as "FUNC (MODULE, native)";
// "" for a stack without one. Not escaped.
func (st *PyStack) SiteName() string {
	f := st.UserFrame()
	if f == nil {
		return ""
	}
	if f.Native {
		return fmt.Sprintf("%s (%s, native)", f.Func, filepath.Base(f.File))
	}
	return fmt.Sprintf("%s (%s:%d)", f.Func, filepath.Base(f.File), f.Line)
}
