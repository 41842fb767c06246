package format

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// maxCallSiteFrames bounds a call site's chain of the user's own frames.
const maxCallSiteFrames = 4

// CallSite is a stack as the text report names it: from the innermost
// frame of the user's own code outward, up to four of the user's frames,
// a frame in the same file as the one before it shown as ":LINE func"
// (`spawn.py:4 run_compiler ← :7 compile_kernel ← :19 <module>`), and the
// innermost installed-package frame after it when the stack's leaf is
// one. A stack without a frame of the user's own code whose program runs
// from an installed package (`python -m pip`) names that package's
// frames instead, from the package directory on
// ("pip/_internal/network/session.py:518 PipSession.request ← …"). A
// stack with no Python frame but a native leaf (a program that is not
// Python, an interpreter whose layout is not known) is that leaf:
// "libc.so.6 vfork (native)". Names are escaped; "" for a stack without
// any frame of the program's.
func CallSite(st *record.PyStack) string {
	if st == nil {
		return ""
	}
	var parts []string
	prevFile := ""
	var leafLib, native *record.PyFrame
	pkg := st.ProgramPackage()
	for i := range st.Frames {
		f := st.Frames[i]
		if f.Native {
			if native == nil {
				native = &st.Frames[i]
			}
			continue
		}
		if f.File == "" {
			continue // unreadable ("?"), or the gap of a deep stack
		}
		if !record.OwnFile(f.File, pkg) {
			if len(parts) == 0 && leafLib == nil && !strings.HasPrefix(f.File, "<") && strings.Contains(f.File, "-packages/") {
				leafLib = &st.Frames[i]
			}
			continue
		}
		if len(parts) == maxCallSiteFrames {
			break
		}
		name := filepath.Base(f.File)
		if pkg != "" {
			name = packagePath(f.File) // pip/_internal/network/session.py
		}
		if f.File == prevFile {
			parts = append(parts, Escape(fmt.Sprintf(":%d %s", f.Line, f.Func)))
		} else {
			parts = append(parts, Escape(fmt.Sprintf("%s:%d %s", name, f.Line, f.Func)))
		}
		prevFile = f.File
	}
	if len(parts) == 0 {
		if native != nil && native.Func != "" {
			return Escape(strings.TrimSpace(filepath.Base(native.File)+" "+native.Func)) + " (native)"
		}
		return ""
	}
	s := strings.Join(parts, " ← ")
	if leafLib != nil {
		s += " (in " + Escape(fmt.Sprintf("%s:%d %s", packagePath(leafLib.File), leafLib.Line, leafLib.Func)) + ")"
	}
	return s
}

// packagePath is a path from its package directory on:
// "safetensors/torch.py" for ".../site-packages/safetensors/torch.py",
// else its last element.
func packagePath(p string) string {
	if rest, ok := record.PackagePath(p); ok {
		return rest
	}
	return filepath.Base(p)
}
