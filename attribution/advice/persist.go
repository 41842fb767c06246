package advice

import (
	"fmt"
	"strings"

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
	Export string  `json:"export,omitempty"`
	Action *Action `json:"-"`
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
			if !p.Survives() {
				// A fresh directory: the cache lands below it wherever
				// the framework puts it under the variable.
				dir := "${XDG_CACHE_HOME:-$HOME/.cache}/" + c.Name
				if p.Env == "XDG_CACHE_HOME" {
					// The cache has no variable of its own: the
					// user's cache home, at its default.
					dir = "$HOME/.cache"
				}
				p.Export = "export " + p.Env + "=\"" + dir + "\""
			} else if a, ok := keepAt(c, c.Root); ok {
				p.Env = a.Var
				p.Export = "export " + p.Env + "=" + shellQuote(a.Value)
			} else {
				p.Env = ""
			}
		}
		if !p.Survives() && p.RerunNS > 0 {
			what := "move it to a persistent directory"
			if p.Export != "" {
				what = p.Export
			}
			p.Action = &Action{
				Action:   fmt.Sprintf("persist the %s cache: %s", name(c), what),
				SavesNS:  p.RerunNS,
				Evidence: fmt.Sprintf("%s (%s) is on %s, %s; this run compiled into it for %s", c.Root, bytesWords(c.SizeBytes), c.FS, p.Survival, seconds(p.RerunNS)),
			}
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

// shellQuote quotes s for sh: in single quotes, each quote inside closed, escaped and reopened.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func seconds(ns int64) string {
	return fmt.Sprintf("%.2f s", float64(ns)/1e9)
}
