package advice

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coldtrace/coldtrace/record"
)

// Persist is one cache this run wrote: where it is, whether it survives,
// how to move it, and what a fresh machine pays without it.
type Persist struct {
	Cache     string `json:"cache"`
	Framework string `json:"framework,omitempty"`
	Root      string `json:"root"`
	SizeBytes int64  `json:"size_bytes"`
	FS        string `json:"fs,omitempty"`
	// Survival is the record's verdict by the one rule of docs/definitions.md ("persistent",
	// "lost at reboot", "container layer", "aged"); Age the tmpfiles rule.
	Survival string `json:"survival,omitempty"`
	Age      string `json:"age,omitempty"`
	// Env is the variable that moves the cache; empty when none does.
	Env string `json:"env,omitempty"`
	// RerunNS is what a run without this cache would pay again: its
	// compile time in this run.
	RerunNS int64 `json:"rerun_ns"`
	// Export is the shell line that keeps the cache: the current root
	// when it survives, a directory under the user's cache home when it
	// does not. Empty when no variable moves it.
	Export string `json:"export,omitempty"`
	// Skipped says why a cache a variable moves has no export line: the
	// variable is no shell name, or its value would carry a control
	// character or invalid UTF-8 into the user's shell and terminal.
	Skipped string  `json:"-"`
	Action  *Action `json:"-"`
}

// Survives says whether the cache outlives a reboot and its container
// (an aged cache survives while it is used).
func (p Persist) Survives() bool {
	return p.Survival == "persistent" || p.Survival == "aged" || p.Survival == ""
}

// PersistList lists each cache this run wrote entries into.
func PersistList(r *record.Record) []Persist {
	if r.JIT == nil {
		return nil
	}
	var out []Persist
	for _, c := range r.JIT.Caches {
		if c.EntriesWritten == 0 {
			continue
		}
		p := Persist{Cache: c.Name, Framework: c.Framework, Root: c.Root, SizeBytes: c.SizeBytes, FS: c.FS,
			Survival: c.Survival, Age: c.SurvivalAge, Env: c.MovedBy, RerunNS: c.CompileNS}
		// An in-tree cache (every __pycache__ beside the sources) lives
		// wherever the sources do: nothing says it should move.
		inTree := strings.Contains(c.Root, "*") || c.Root == ""
		if p.Env != "" && !inTree {
			p.Export, p.Skipped = exportLine(&p, c)
		}
		if !p.Survives() && p.RerunNS > 0 {
			p.Action = &Action{SavesNS: p.RerunNS, Finding: p}
		}
		out = append(out, p)
	}
	return out
}

// Exports are the export lines of list, one per cache that a variable
// moves, as valid sh.
func Exports(list []Persist) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range list {
		if p.Export == "" || seen[p.Env] {
			continue
		}
		seen[p.Env] = true
		out = append(out, p.Export)
	}
	return out
}

// cacheHome is where a cache that does not survive is moved: the user's
// cache home, expanded by the shell that reads the line. It is the one
// part of an export line not in single quotes, and it is coldtrace's own
// text, never the record's.
const cacheHome = `"${XDG_CACHE_HOME:-$HOME/.cache}"/`

// exportLine is the sh line that keeps p's cache, every value from the
// record in single quotes; or, when no such line is safe, why not.
func exportLine(p *Persist, c record.Cache) (line, skipped string) {
	if !p.Survives() {
		if !ShellName(p.Env) {
			return "", "not a shell variable name"
		}
		if p.Env == "XDG_CACHE_HOME" {
			// The cache has no variable of its own: the user's cache
			// home, at its default; the framework adds its own folder.
			return "export XDG_CACHE_HOME=\"$HOME/.cache\"", ""
		}
		name := p.Cache
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return "", "the cache name is not one directory name"
		}
		if !PlainText(name) {
			return "", "its value holds a control character or invalid UTF-8"
		}
		return "export " + p.Env + "=" + cacheHome + singleQuote(name), ""
	}
	// The variable that makes the framework find the cache where it is
	// (the registry's inverse): not always the root itself, as torch
	// looks in $TORCH_HOME/hub.
	a, ok := keepAt(c, c.Root)
	if !ok {
		p.Env = ""
		return "", ""
	}
	p.Env = a.Var
	if !ShellName(a.Var) {
		return "", "not a shell variable name"
	}
	if !PlainText(a.Value) {
		return "", "its value holds a control character or invalid UTF-8"
	}
	return "export " + a.Var + "=" + singleQuote(a.Value), ""
}

// ShellName reports whether s is a POSIX sh variable name,
// [A-Za-z_][A-Za-z0-9_]*.
func ShellName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// PlainText reports whether s is valid UTF-8 of printable characters
// and spaces only: nothing a terminal would act on (escape sequences,
// other C0 and C1 controls, newlines, bidi overrides).
func PlainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// singleQuote quotes s for sh: in single quotes, each quote inside
// closed, escaped and reopened. Inside single quotes sh expands nothing.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellQuote quotes s for sh, leaving a word of plain path characters
// bare (a sentence reads better without quotes where none are needed).
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@") == "" {
		return s
	}
	return singleQuote(s)
}
