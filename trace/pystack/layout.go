package pystack

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Layout is where the walker and the decoder find things in one minor's
// structures: byte offsets into the named struct. None marks a field the
// minor lacks.
type Layout struct {
	Minor int
	// _PyRuntimeState.interpreters.head, PyInterpreterState.threads.head
	InterpHead, ThreadsHead uint32
	// PyThreadState
	TSNext, TSNativeTID, TSCFrame uint32
	// _PyCFrame.current_frame (3.11, 3.12) or PyThreadState.current_frame (3.13+)
	CurrentFrame uint32
	// _PyInterpreterFrame: code (f_code, f_executable), previous,
	// instruction (prev_instr, instr_ptr), owner, localsplus
	FrCode, FrPrevious, FrInstr, FrOwner, FrLocals uint32
	SkipCStack                                     bool
	// PyCodeObject
	CoFilename, CoQualname, CoFirstLineno, CoLinetable, CoCodeAdaptive uint32
	// PyASCIIObject: state bits, length, and where compact ASCII data
	// starts; compact non-ASCII data starts at CompactSize.
	UniState, UniLength, ASCIISize, CompactSize uint32
}

// None marks a field the minor lacks.
const None = ^uint32(0)

// PyBytesObject's ob_size and ob_sval: the same in every minor here.
const (
	bytesSize = 16
	bytesData = 32
)

// layout311 and layout312 are offsetof() of CPython 3.11 and 3.12's
// internal structs on x86-64, computed by compiling against their
// Include/internal headers (Debian's 3.11.2 and pyenv's 3.11.7 agree).
var layout311 = Layout{Minor: 11, InterpHead: 40, ThreadsHead: 16, TSNext: 8, TSNativeTID: 160, TSCFrame: 56,
	CurrentFrame: 8, FrCode: 32, FrPrevious: 48, FrInstr: 56, FrOwner: 69, FrLocals: 72,
	CoFilename: 112, CoQualname: 128, CoFirstLineno: 72, CoLinetable: 136, CoCodeAdaptive: 184,
	UniState: 32, UniLength: 16, ASCIISize: 48, CompactSize: 72}

var layout312 = Layout{Minor: 12, InterpHead: 40, ThreadsHead: 72, TSNext: 8, TSNativeTID: 144, TSCFrame: 56,
	CurrentFrame: 0, FrCode: 0, FrPrevious: 8, FrInstr: 56, FrOwner: 70, FrLocals: 72, SkipCStack: true,
	CoFilename: 112, CoQualname: 128, CoFirstLineno: 68, CoLinetable: 136, CoCodeAdaptive: 192,
	UniState: 32, UniLength: 16, ASCIISize: 40, CompactSize: 56}

// ErrUnsupported is a Python whose layout is not known: no stacks.
var ErrUnsupported = errors.New("python minor without a known frame layout")

// debugTable is where the fields coldtrace reads lie inside one minor's
// _Py_DebugOffsets: the struct's own layout, fixed for a minor and
// different between minors (3.14 added fields to the interpreter,
// thread, frame and code sections).
type debugTable struct {
	minor                                                                        int
	size                                                                         int
	version, freeThreaded, interpHead, threadsHead, tsNext, tsFrame, tsNativeTID int
	frPrevious, frExecutable, frInstr, frLocals, frOwner                         int
	coFilename, coQualname, coLinetable, coFirstLineno, coAdaptive               int
	uniState, uniLength, uniASCIISize                                            int
}

// debugOffsets313 is 3.13's _Py_DebugOffsets.
var debugOffsets313 = debugTable{minor: 13, size: 584, version: 8, freeThreaded: 16, interpHead: 40, threadsHead: 72,
	tsNext: 168, tsFrame: 184, tsNativeTID: 200,
	frPrevious: 232, frExecutable: 240, frInstr: 248, frLocals: 256, frOwner: 264,
	coFilename: 280, coQualname: 296, coLinetable: 304, coFirstLineno: 312, coAdaptive: 344,
	uniState: 544, uniLength: 552, uniASCIISize: 560}

// debugOffsets314 is 3.14's (Include/internal/pycore_debug_offsets.h of
// 3.14.10): the interpreter section grew to 16 fields, the thread
// section to 9, the frame section to 8 (stackpointer, tlbc_index), the
// code section to 11 (co_tlbc), and the struct ends with the remote
// debugger's support fields.
var debugOffsets314 = debugTable{minor: 14, size: 760, version: 8, freeThreaded: 16, interpHead: 40, threadsHead: 72,
	tsNext: 192, tsFrame: 208, tsNativeTID: 224,
	frPrevious: 256, frExecutable: 264, frInstr: 272, frLocals: 280, frOwner: 288,
	coFilename: 320, coQualname: 336, coLinetable: 344, coFirstLineno: 352, coAdaptive: 384,
	uniState: 624, uniLength: 632, uniASCIISize: 640}

// debugHead is how much of _PyRuntime the locator reads: the largest
// _Py_DebugOffsets known.
const debugHead = 760

// debugCookie opens _Py_DebugOffsets.
const debugCookie = "xdebugpy"

// layoutFor is the layout of a Python whose Py_Version is hexVersion;
// head is the start of its _PyRuntime (read only for 3.13+).
func layoutFor(hexVersion uint64, head []byte) (Layout, error) {
	major, minor := hexVersion>>24, (hexVersion>>16)&0xff
	switch {
	case major == 3 && minor == 11:
		return layout311, nil
	case major == 3 && minor == 12:
		return layout312, nil
	case major == 3 && minor == 13:
		return parseDebugOffsets(debugOffsets313, head, hexVersion)
	case major == 3 && minor == 14:
		return parseDebugOffsets(debugOffsets314, head, hexVersion)
	}
	return Layout{}, fmt.Errorf("%w: %d.%d", ErrUnsupported, major, minor)
}

// parseDebugOffsets reads a _Py_DebugOffsets laid out as d: cookie and
// version (its minor must be d's) checked, a free-threaded build refused
// (its frames differ).
func parseDebugOffsets(d debugTable, b []byte, hexVersion uint64) (Layout, error) {
	if len(b) < d.size || string(b[:8]) != debugCookie {
		return Layout{}, fmt.Errorf("%w: 3.%d without _Py_DebugOffsets", ErrUnsupported, d.minor)
	}
	u := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	if v := u(d.version); v>>16 != hexVersion>>16 {
		return Layout{}, fmt.Errorf("%w: _Py_DebugOffsets version %#x, Py_Version %#x", ErrUnsupported, v, hexVersion)
	}
	if u(d.freeThreaded) != 0 {
		return Layout{}, fmt.Errorf("%w: free-threaded build", ErrUnsupported)
	}
	var bad bool
	f := func(off int) uint32 {
		v := u(off)
		if v > 1<<16 {
			bad = true
		}
		return uint32(v)
	}
	l := Layout{Minor: d.minor, InterpHead: f(d.interpHead), ThreadsHead: f(d.threadsHead), TSNext: f(d.tsNext),
		TSNativeTID: f(d.tsNativeTID), TSCFrame: None, CurrentFrame: f(d.tsFrame),
		FrCode: f(d.frExecutable), FrPrevious: f(d.frPrevious), FrInstr: f(d.frInstr), FrOwner: f(d.frOwner), FrLocals: f(d.frLocals), SkipCStack: true,
		CoFilename: f(d.coFilename), CoQualname: f(d.coQualname), CoFirstLineno: f(d.coFirstLineno),
		CoLinetable: f(d.coLinetable), CoCodeAdaptive: f(d.coAdaptive),
		UniState: f(d.uniState), UniLength: f(d.uniLength), ASCIISize: f(d.uniASCIISize)}
	// A compact non-ASCII string's data follows PyCompactUnicodeObject:
	// utf8_length and utf8 after the ASCII header.
	l.CompactSize = l.ASCIISize + 16
	// The walker reads a name's length and hash at PY_STR_LEN.
	if bad || l.UniLength != strLength {
		return Layout{}, fmt.Errorf("%w: implausible _Py_DebugOffsets", ErrUnsupported)
	}
	return l, nil
}
