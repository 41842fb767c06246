package registry

// Which programs are compilers: the tracer files their processes as
// compile work and the attribution engine counts their time as
// jit_compile, so both must agree on the names.

import "strings"

// Compilers are the compiler, assembler, linker and build-driver programs
// whose processes (and descendants) are compile work.
var Compilers = []string{
	"ptxas", "nvcc", "cicc", "cudafe++", "nvlink", "fatbinary",
	"gcc", "g++", "cc", "c++", "cc1", "cc1plus", "cc1obj", "collect2", "lto1", "lto-wrapper", "as",
	"ld", "ld.lld", "ld.gold", "ld.bfd", "ld.mold", "mold", "lld", "clang", "clang++",
	"ninja", "rustc",
}

// CompilerNames says whether a program name is a compiler.
type CompilerNames map[string]bool

// NewCompilerNames matches Compilers and extra.
func NewCompilerNames(extra []string) CompilerNames {
	m := CompilerNames{}
	for _, n := range Compilers {
		m[n] = true
	}
	for _, n := range extra {
		if n = strings.TrimSpace(n); n != "" {
			m[n] = true
		}
	}
	return m
}

// Match accepts the names in the set, versioned names ("gcc-13",
// "clang++-18") and target-prefixed ones ("x86_64-linux-gnu-g++-13").
// "as" and "ld" match with a prefix only when it looks like a target
// triple (two dashes or more), so names like "my-ld" stay unmatched.
func (m CompilerNames) Match(name string) bool {
	if name == "" {
		return false
	}
	if m[name] {
		return true
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 && isVersion(name[i+1:]) {
		name = name[:i]
		if m[name] {
			return true
		}
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Count(name[:i], "-") >= 1 {
		return m[name[i+1:]]
	}
	return false
}

func isVersion(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// QueriesOnly reports whether a compiler's arguments (argv, its name
// first) only ask it about itself — its version, its help, where its
// files are — so the process compiles nothing. pip runs `rustc --version`
// for its user agent on every install, cargo `rustc -vV`, build scripts
// `cc -dumpversion`: a warm rerun runs them again, so they are no compile
// a cache could save. Unknown arguments (none read) are not queries.
func QueriesOnly(args []string) bool {
	if len(args) < 2 {
		return false
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case queryFlags[a]:
		case a == "--print" && i+1 < len(args): // rustc --print sysroot
			i++
		case strings.HasPrefix(a, "--print="), strings.HasPrefix(a, "-print-"):
		default:
			return false
		}
	}
	return true
}

// queryFlags are the arguments of gcc, clang, rustc, nvcc, ld, as and
// ninja that print something about the program and stop.
var queryFlags = map[string]bool{
	"--version": true, "-V": true, "-vV": true, "-v": true, "--help": true, "-h": true,
	"-dumpversion": true, "-dumpfullversion": true, "-dumpmachine": true, "-dumpspecs": true,
}
