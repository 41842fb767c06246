package advice

import (
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// NoCacheCompile is compile work that no cache could have saved this
// run: an in-process compiler's entry points running outside any cache
// miss, or compiler subprocesses when no known cache was looked up.
type NoCacheCompile struct {
	// Framework is the compiler's framework when known ("Numba").
	Framework string `json:"framework,omitempty"`
	// Source is what was seen: "libllvmlite" or compiler names.
	Source string `json:"source"`
	NS     int64  `json:"ns"`
	Calls  uint64 `json:"calls"`
	// Enable is how to turn the framework's cache on; empty when no
	// step is known. Subprocess is set for compiler subprocesses, whose
	// Calls are their runs.
	Enable     string `json:"-"`
	Subprocess bool   `json:"-"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// minNoCacheNS is the least compile time worth a word: Numba compiles
// its own helpers at import (~10 ms here) whatever the user's code does.
const minNoCacheNS = 20e6

// In-process compilers by their library: the framework, its cache, and
// how to turn that cache on. NVRTC has no cache of its own (PyTorch's and
// CuPy's sit above it), so a call outside their misses compiled for
// nothing kept; which framework called it is not known, so no action.
var inProcess = []struct{ lib, framework, cache, enable string }{
	{"libllvmlite", "Numba", "numba", "enable cache=True on the @numba.jit/@njit functions (and a persistent NUMBA_CACHE_DIR)"},
	{"libnvrtc", "NVRTC", "", ""},
}

// NoCache finds compiles that had no cache.
func NoCache(r *record.Record) []NoCacheCompile {
	if r.JIT == nil {
		return nil
	}
	var out []NoCacheCompile
	for _, ip := range inProcess {
		// Windows of the cache's own misses already hold the compiles a
		// cache could save next time; what lies outside them had none.
		var cached []record.JITWindow
		for _, w := range r.JIT.Windows {
			if w.Kind == "in_process" && (w.Source == ip.cache || ip.cache == "") {
				cached = append(cached, w)
			}
		}
		var ns int64
		var calls uint64
		for _, w := range r.JIT.Windows {
			if w.Kind != "uprobe" || !strings.HasPrefix(w.Source, ip.lib+":") || inside(w, cached) {
				continue
			}
			ns += w.EndNS - w.StartNS
			calls++
		}
		if ns < minNoCacheNS {
			continue
		}
		n := NoCacheCompile{Framework: ip.framework, Source: ip.lib, NS: ns, Calls: calls, Enable: ip.enable}
		if ip.enable != "" {
			n.Action = &Action{SavesNS: ns, Finding: n}
		}
		out = append(out, n)
	}
	if c := subprocessNoCache(r); c != nil {
		out = append(out, *c)
	}
	return out
}

// inside says whether w lies within one of the windows of its process.
func inside(w record.JITWindow, ws []record.JITWindow) bool {
	for _, o := range ws {
		if o.PID == w.PID && w.StartNS >= o.StartNS && w.EndNS <= o.EndNS {
			return true
		}
	}
	return false
}

// subprocessNoCache is the compiler subprocesses of a run that looked
// nothing up in any known cache: their output was kept nowhere coldtrace
// knows of, so the next run compiles again.
func subprocessNoCache(r *record.Record) *NoCacheCompile {
	if len(r.JIT.Compilers) == 0 {
		return nil
	}
	for _, c := range r.JIT.Caches {
		if c.Lookups > 0 && compiles(c) {
			return nil
		}
	}
	var ns int64
	var runs int
	var names []string
	for _, c := range r.JIT.Compilers {
		ns += c.WallNS
		runs += c.Runs
		names = append(names, c.Name)
	}
	if ns < minNoCacheNS {
		return nil
	}
	sort.Strings(names)
	src := strings.Join(names, ", ")
	return &NoCacheCompile{Source: src, NS: ns, Calls: uint64(runs), Subprocess: true}
}
