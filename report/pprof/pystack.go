package pprof

import (
	"path/filepath"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// pythonFrames are the frames of the Python stack each process of r was
// started from, outermost first, as pprof frames: the function named
// module.qualname (spawn.run_compiler, spawn.<module>: pprof blanks a
// name made only of <…>, which would merge every module's top level),
// the source path as its file, the line as the Line. A native leaf
// (no Python stack) is its function, in its ELF file.
func pythonFrames(r *record.Record) map[int32][]frame {
	out := map[int32][]frame{}
	for i := range r.Processes {
		p := &r.Processes[i]
		st := r.StackOf(p)
		if st == nil {
			continue
		}
		fr := make([]frame, 0, len(st.Frames))
		for j := len(st.Frames) - 1; j >= 0; j-- {
			fr = append(fr, stackFrame(st.Frames[j]))
		}
		out[p.PID] = fr
	}
	return out
}

// stackParts files the parts of subject s that its Python stacks
// carry, each under its process and the stack's frames (outermost
// first), and returns what is left of its time and bytes for the
// processes without a stack.
func (b *builder) stackParts(stack []frame, labels map[string]string, s subject) (ns, bytes int64) {
	ns, bytes = s.ns, s.bytes
	for _, sh := range s.stacks {
		st := b.rec.StackAt(sh.Stack)
		if st == nil || sh.PID <= 0 {
			continue
		}
		w := min(sh.NS, ns)
		by := min(int64(sh.BytesFromDisk), bytes)
		if w <= 0 && by <= 0 {
			continue
		}
		fr := append(append([]frame(nil), stack...), frame{name: format.ProcessLabel(sh.PID, b.procs.name(sh.PID))})
		for j := len(st.Frames) - 1; j >= 0; j-- {
			fr = append(fr, stackFrame(st.Frames[j]))
		}
		l := mergeLabels(labels, map[string]string{"comm": b.procs.name(sh.PID)})
		b.add(fr, l, sh.PID, w, by)
		ns -= w
		bytes -= by
	}
	return ns, bytes
}

// stackFrame is a recorded stack's frame as a profile frame.
func stackFrame(f record.PyFrame) frame {
	return frame{name: pythonName(f), file: format.Escape(f.File), line: int64(f.Line), system: format.Escape(f.Symbol)}
}

func pythonName(f record.PyFrame) string {
	if f.File == "" || f.Native {
		// A native leaf is named by its symbol or module+0xOFFSET.
		return format.Escape(f.Func) // "?" (unreadable) or the gap of a deep stack
	}
	mod := strings.TrimSuffix(filepath.Base(f.File), ".py")
	return format.Escape(mod + "." + f.Func)
}
