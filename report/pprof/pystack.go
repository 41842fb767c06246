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
			f := st.Frames[j]
			fr = append(fr, frame{name: pythonName(f), file: format.Escape(f.File), line: int64(f.Line)})
		}
		out[p.PID] = fr
	}
	return out
}

func pythonName(f record.PyFrame) string {
	if f.File == "" || f.Native {
		// A native leaf is named by its symbol or module+0xOFFSET.
		return format.Escape(f.Func) // "?" (unreadable) or the gap of a deep stack
	}
	mod := strings.TrimSuffix(filepath.Base(f.File), ".py")
	return format.Escape(mod + "." + f.Func)
}
