package pystack

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Bounds on what a code object may make the decoder read.
const (
	maxName      = 4096
	maxLinetable = 1 << 20
)

// procMem reads one process's memory: /proc/PID/mem opened once, with the
// process's start time, so that a reused pid is never read as the process.
type procMem struct {
	pid   int
	start uint64
	f     *os.File
}

func openMem(pid int) (*procMem, error) {
	st, err := startTime(pid)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, fmt.Errorf("open memory of %d: %w", pid, err)
	}
	return &procMem{pid: pid, start: st, f: f}, nil
}

// alive reports whether pid is still the process the memory was opened for.
func (m *procMem) alive() bool {
	st, err := startTime(m.pid)
	return err == nil && st == m.start
}

func (m *procMem) close() { m.f.Close() }

func (m *procMem) read(addr uint64, b []byte) error {
	if addr == 0 || addr > 1<<47 {
		return fmt.Errorf("address %#x outside user space", addr)
	}
	if _, err := m.f.ReadAt(b, int64(addr)); err != nil {
		return fmt.Errorf("read %#x of %d: %w", addr, m.pid, err)
	}
	return nil
}

// startTime is field 22 of /proc/PID/stat (clock ticks since boot).
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("stat of %d: %w", pid, err)
	}
	// The command name may hold spaces and parentheses: fields count
	// from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("stat of %d: malformed", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// code is a decoded code object.
type code struct {
	key       FrameKey
	qualname  string
	filename  string
	linetable []byte
	adaptive  uint64 // address of its first instruction
}

// FrameKey is what the walker read of a frame's code object: a decoded
// object is accepted only when it still matches.
type FrameKey struct {
	Code, Qualname, Filename uint64
	FirstLineno              uint32
	// NameTag folds the qualname string's length and hash (nameTag): a
	// freed name's address may hold the next function's name.
	NameTag uint32
}

// strLength is PyASCIIObject's length, followed by its hash, in every
// minor walked (the walker's PY_STR_LEN).
const strLength = 16

// nameTag is the walker's py_name_tag: a str's length and hash folded.
func nameTag(length, hash uint64) uint32 {
	return uint32(hash^hash>>32) ^ uint32(length)*0x9e3779b1
}

// live checks the head of an object that should be a live code object:
// a freed one has pymalloc's free-list pointer (an address in an mmapped
// arena, so bits 32-47 set, or 0) for its reference count, or glibc's
// tcache key over its type, while the fields the key compares may still
// hold the freed function's values. A live count fits in 32 bits in the
// minors walked (3.12's immortal objects hold 0xffffffff; 3.14 keeps
// flags in bits 48-63 and an overflow count, 0 in practice, in 32-47).
func live(head []byte, codeType uint64) bool {
	refcnt := binary.LittleEndian.Uint64(head)
	return uint32(refcnt) != 0 && refcnt>>32&0xffff == 0 && binary.LittleEndian.Uint64(head[8:]) == codeType
}

// decodeCode reads the code object at key.Code and checks it against key:
// live, of PyCode_Type, with the key's fields and name; and still live
// once its names and line table are read.
func decodeCode(m *procMem, l *Layout, codeType uint64, key FrameKey) (*code, error) {
	b := make([]byte, l.CoCodeAdaptive)
	if err := m.read(key.Code, b); err != nil {
		return nil, err
	}
	if !live(b, codeType) {
		return nil, fmt.Errorf("code object at %#x freed since the walk", key.Code)
	}
	u64 := func(off uint32) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	first := binary.LittleEndian.Uint32(b[l.CoFirstLineno:])
	if u64(l.CoQualname) != key.Qualname || u64(l.CoFilename) != key.Filename || first != key.FirstLineno {
		return nil, fmt.Errorf("code object at %#x changed since the walk", key.Code)
	}
	var lh [16]byte
	if err := m.read(key.Qualname+strLength, lh[:]); err != nil {
		return nil, err
	}
	if nameTag(binary.LittleEndian.Uint64(lh[:]), binary.LittleEndian.Uint64(lh[8:])) != key.NameTag {
		return nil, fmt.Errorf("name of the code object at %#x changed since the walk", key.Code)
	}
	c := &code{key: key, adaptive: key.Code + uint64(l.CoCodeAdaptive)}
	var err error
	if c.qualname, err = readUnicode(m, l, key.Qualname); err != nil {
		return nil, err
	}
	if c.filename, err = readUnicode(m, l, key.Filename); err != nil {
		return nil, err
	}
	if c.linetable, err = readBytes(m, u64(l.CoLinetable)); err != nil {
		return nil, err
	}
	again := make([]byte, len(b))
	if err := m.read(key.Code, again); err != nil {
		return nil, err
	}
	same := func(off uint32) bool { return binary.LittleEndian.Uint64(again[off:]) == u64(off) }
	if !live(again, codeType) || !same(l.CoQualname) || !same(l.CoFilename) || !same(l.CoLinetable) ||
		binary.LittleEndian.Uint32(again[l.CoFirstLineno:]) != first {
		return nil, fmt.Errorf("code object at %#x freed while it was read", key.Code)
	}
	return c, nil
}

// line is the source line of instruction pointer instr in c.
func (c *code) line(instr uint64) int {
	if instr < c.adaptive {
		return 0
	}
	return lineAt(c.linetable, int(c.key.FirstLineno), int(instr-c.adaptive))
}

func readBytes(m *procMem, addr uint64) ([]byte, error) {
	var h [bytesData]byte
	if err := m.read(addr, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(h[bytesSize:])
	if n > maxLinetable {
		return nil, fmt.Errorf("bytes object of %d bytes", n)
	}
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	return b, m.read(addr+bytesData, b)
}

// readUnicode decodes a compact str object (code object names always are).
func readUnicode(m *procMem, l *Layout, addr uint64) (string, error) {
	h := make([]byte, l.CompactSize)
	if err := m.read(addr, h); err != nil {
		return "", err
	}
	state := binary.LittleEndian.Uint32(h[l.UniState:])
	length := binary.LittleEndian.Uint64(h[l.UniLength:])
	kind, compact, ascii := (state>>2)&7, (state>>5)&1, (state>>6)&1
	if compact == 0 || length > maxName || kind == 0 || kind == 3 || kind > 4 {
		return "", fmt.Errorf("str at %#x: not a compact string of at most %d characters", addr, maxName)
	}
	data := addr + uint64(l.CompactSize)
	if ascii == 1 {
		data, kind = addr+uint64(l.ASCIISize), 1
	}
	raw := make([]byte, length*uint64(kind))
	if len(raw) > 0 {
		if err := m.read(data, raw); err != nil {
			return "", err
		}
	}
	return decodeKind(raw, kind), nil
}

// decodeKind turns PEP 393 data of 1, 2 or 4 bytes a character into UTF-8.
func decodeKind(raw []byte, kind uint32) string {
	var sb strings.Builder
	for i := 0; i+int(kind) <= len(raw); i += int(kind) {
		var r rune
		switch kind {
		case 1:
			r = rune(raw[i])
		case 2:
			r = rune(binary.LittleEndian.Uint16(raw[i:]))
		default:
			r = rune(binary.LittleEndian.Uint32(raw[i:]))
		}
		if !utf8.ValidRune(r) || utf16.IsSurrogate(r) {
			r = utf8.RuneError
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
