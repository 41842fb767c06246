package kcache

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coldtrace/coldtrace/registry"
)

// Class is a kind of cache `run --cold` can make cold.
type Class string

const (
	// PageCache: the files of a record or of --evict, evicted.
	PageCache Class = "page-cache"
	// JIT: every compile cache of the registry but Python's bytecode.
	JIT Class = "jit"
	// Pycache: Python bytecode (PYTHONPYCACHEPREFIX): every .pyc of the
	// libraries compiles again.
	Pycache Class = "pycache"
	// Downloads: caches of downloaded weights: the model is fetched again.
	Downloads Class = "downloads"
)

// DefaultClasses are those of a bare --cold.
var DefaultClasses = []Class{PageCache, JIT}

// ParseClasses reads a --cold value ("page-cache,jit"); empty means the
// default classes.
func ParseClasses(v string) ([]Class, error) {
	if strings.TrimSpace(v) == "" {
		return append([]Class(nil), DefaultClasses...), nil
	}
	var out []Class
	for _, f := range strings.Split(v, ",") {
		c := Class(strings.TrimSpace(f))
		switch c {
		case PageCache, JIT, Pycache, Downloads:
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		default:
			return nil, fmt.Errorf("--cold class %q: want page-cache, jit, pycache or downloads", f)
		}
	}
	return out, nil
}

// ClassOf is the class of a registry cache.
func ClassOf(s registry.Spec) Class {
	switch {
	case s.Name == "python":
		return Pycache
	case !s.Compiles:
		return Downloads
	}
	return JIT
}

// Override points one cache at a fresh directory.
type Override struct {
	Cache string `json:"cache"`
	Env   string `json:"env"`
	Dir   string `json:"dir"`
}

// Untouched is a cache of a chosen class that no environment variable
// can move, or that is off anyway.
type Untouched struct {
	Cache  string `json:"cache"`
	Reason string `json:"reason"`
}

// ColdPlan is the environment of a run made cold.
type ColdPlan struct {
	Overrides []Override  `json:"overrides"`
	Untouched []Untouched `json:"untouched,omitempty"`
}

// Plan chooses, for every registry cache of the chosen classes, the
// variable of highest precedence that moves it, and a fresh directory
// tmpRoot/NAME for it. env is the command's environment: a cache that
// only exists when a variable is set (JAX) and is not set there is
// already off, and stays untouched. The user's real caches are never
// named: only variables are set, in the child's environment.
func Plan(specs []registry.Spec, env registry.Env, classes []Class, tmpRoot string) ColdPlan {
	var p ColdPlan
	for _, s := range specs {
		if !slices.Contains(classes, ClassOf(s)) {
			continue
		}
		variable, hasDefault, spared := "", false, ""
		for _, tmpl := range s.Paths {
			v, ok := leadingVar(tmpl)
			switch {
			case !ok:
				hasDefault = true
			case holdsMore[v] != "":
				spared = v
			case variable == "":
				variable = v
			}
		}
		switch {
		case variable == "" && spared != "":
			p.Untouched = append(p.Untouched, Untouched{s.Name, "$" + spared + " moves it but " + holdsMore[spared]})
		case variable == "":
			p.Untouched = append(p.Untouched, Untouched{s.Name, "no environment variable moves it (" + s.Source + ")"})
		case !hasDefault && !anySet(s.Paths, env):
			p.Untouched = append(p.Untouched, Untouched{s.Name, "off: it exists only when $" + variable + " is set"})
		default:
			p.Overrides = append(p.Overrides, Override{Cache: s.Name, Env: variable, Dir: filepath.Join(tmpRoot, s.Name)})
		}
	}
	return p
}

// holdsMore are variables that move a cache but also hold what a cold
// run must keep: setting them would log the user out or lose settings.
var holdsMore = map[string]string{
	"HF_HOME":        "it also holds the Hugging Face login token",
	"HOME":           "it is the user's home",
	"XDG_CACHE_HOME": "it moves every cache of every program",
}

// Environ is the plan as VAR=value lines. Use Apply to put them in an
// environment: appending is not enough where a variable is already set.
func (p ColdPlan) Environ() []string {
	out := make([]string, 0, len(p.Overrides))
	for _, o := range p.Overrides {
		out = append(out, o.Env+"="+o.Dir)
	}
	return out
}

// Apply returns environ with every planned variable set to its fresh
// directory, replacing any value it had (getenv returns the first of
// duplicates, so appending would not do).
func (p ColdPlan) Apply(environ []string) []string {
	set := map[string]string{}
	for _, o := range p.Overrides {
		set[o.Env] = o.Dir
	}
	out := make([]string, 0, len(environ)+len(set))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	return append(out, p.Environ()...)
}

// Create makes the fresh directories, empty, mode 0700, owned by uid:gid
// (the user the command runs as).
func (p ColdPlan) Create(uid, gid int) error {
	for _, o := range p.Overrides {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return fmt.Errorf("cold cache for %s: %w", o.Cache, err)
		}
		if err := os.Chown(o.Dir, uid, gid); err != nil {
			return fmt.Errorf("cold cache for %s: %w", o.Cache, err)
		}
	}
	return nil
}

// leadingVar returns VAR when tmpl starts with $VAR.
func leadingVar(tmpl string) (string, bool) {
	rest, ok := strings.CutPrefix(tmpl, "$")
	if !ok {
		return "", false
	}
	n := 0
	for n < len(rest) && (rest[n] == '_' || rest[n] >= 'A' && rest[n] <= 'Z' || rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= '0' && rest[n] <= '9') {
		n++
	}
	return rest[:n], n > 0
}

// anySet reports whether some template's leading variable is set.
func anySet(paths []string, env registry.Env) bool {
	for _, tmpl := range paths {
		if v, ok := leadingVar(tmpl); ok && env[v] != "" {
			return true
		}
	}
	return false
}
