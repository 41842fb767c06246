package record

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
