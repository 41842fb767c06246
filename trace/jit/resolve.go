package jit

import (
	"bytes"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Env is a process's environment.
type Env map[string]string

// ParseEnviron reads a NUL-separated environment block (as in
// /proc/PID/environ). A variable set twice keeps its first value, as
// getenv does.
func ParseEnviron(b []byte) Env {
	env := Env{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := env[k]; !dup {
			env[k] = v
		}
	}
	return env
}

// ParseEnvList reads an environment as os.Environ gives it ("K=V"), the
// first value of a variable set twice kept.
func ParseEnvList(kvs []string) Env {
	return ParseEnviron([]byte(strings.Join(kvs, "\x00")))
}

// Identity is what decides a traced process's paths besides its
// environment: its cwd, for relative values, and its uid's passwd entry,
// for ~ and {user} when HOME or USER are unset.
type Identity struct {
	UID  uint32
	User string // passwd name of UID
	Home string // passwd home of UID
	Cwd  string
}

// Root is one resolved cache location.
type Root struct {
	Spec *Spec
	// Path is the absolute, clean root directory, or for an in-tree
	// cache the pattern itself ("**/__pycache__").
	Path string
	// Anywhere is the directory name of an in-tree cache
	// ("__pycache__"); empty for a fixed root.
	Anywhere string
	// Via is what decided Path: the first environment variable the
	// winning template used, "default", "in-tree" or "--cache-dir".
	Via string
}

// Resolve returns the roots of specs for a process with env and id: for
// each spec the first of its Paths that resolves, and each of its Also
// paths that resolves.
func Resolve(specs []Spec, env Env, id Identity) []Root {
	var out []Root
	for i := range specs {
		s := &specs[i]
		for _, tmpl := range s.Paths {
			if r, ok := resolveOne(s, tmpl, env, id); ok {
				out = append(out, r)
				break
			}
		}
		for _, tmpl := range s.Also {
			if r, ok := resolveOne(s, tmpl, env, id); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

func resolveOne(s *Spec, tmpl string, env Env, id Identity) (Root, bool) {
	if d, ok := strings.CutPrefix(tmpl, "**/"); ok {
		return Root{Spec: s, Path: tmpl, Anywhere: strings.Trim(d, "/"), Via: "in-tree"}, true
	}
	p, via, ok := Expand(tmpl, env, id)
	if !ok {
		return Root{}, false
	}
	return Root{Spec: s, Path: p, Via: via}, true
}

// Expand resolves one path template (see Spec.Paths) for a process. It
// reports false when a variable the template needs is unset or empty.
func Expand(tmpl string, env Env, id Identity) (p, via string, ok bool) {
	var b strings.Builder
	via = "default"
	rest := tmpl
	if r, cut := strings.CutPrefix(rest, "~"); cut && (r == "" || r[0] == '/') {
		home := env["HOME"]
		if home == "" {
			home = id.Home
		}
		if home == "" {
			return "", "", false
		}
		b.WriteString(home)
		rest = r
	}
	for rest != "" {
		switch {
		case rest[0] == '$':
			n := 1
			for n < len(rest) && isVarChar(rest[n]) {
				n++
			}
			name := rest[1:n]
			v := env[name]
			if v == "" {
				return "", "", false
			}
			if via == "default" {
				via = name
			}
			b.WriteString(v)
			rest = rest[n:]
		case strings.HasPrefix(rest, "{tmp}"):
			b.WriteString(tempDir(env))
			rest = rest[len("{tmp}"):]
		case strings.HasPrefix(rest, "{user}"):
			u := userName(env, id)
			if u == "" {
				return "", "", false
			}
			b.WriteString(u)
			rest = rest[len("{user}"):]
		default:
			i := strings.IndexAny(rest[1:], "${")
			if i < 0 {
				b.WriteString(rest)
				rest = ""
			} else {
				b.WriteString(rest[:i+1])
				rest = rest[i+1:]
			}
		}
	}
	p = b.String()
	if !path.IsAbs(p) {
		if id.Cwd == "" {
			return "", "", false
		}
		p = path.Join(id.Cwd, p)
	}
	return path.Clean(p), via, true
}

func isVarChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// tempDir is Python's tempfile.gettempdir() without its writability
// probe.
func tempDir(env Env) string {
	for _, k := range []string{"TMPDIR", "TEMP", "TMP"} {
		if v := env[k]; v != "" {
			return v
		}
	}
	return "/tmp"
}

// userName is Python's getpass.getuser().
func userName(env Env, id Identity) string {
	for _, k := range []string{"LOGNAME", "USER", "LNAME", "USERNAME"} {
		if v := env[k]; v != "" {
			return v
		}
	}
	return id.User
}

// switchesSet returns the switches of s that env turns on, as "VAR=value".
func switchesSet(s *Spec, env Env) []Switch {
	var out []Switch
	for _, sw := range s.Switches {
		v, ok := env[sw.Env]
		if !ok || v == "" {
			continue
		}
		if len(sw.Values) == 0 || containsStr(sw.Values, v) {
			out = append(out, Switch{Env: sw.Env + "=" + v, Effect: sw.Effect, Offline: sw.Offline})
		}
	}
	return out
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// limitOf reads s's size-limit variable from env, in bytes.
func limitOf(s *Spec, env Env) int64 {
	if s.Limit == "" {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(env[s.Limit]), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// ParseCacheDir splits a --cache-dir NAME=PATH value; a relative PATH is
// taken relative to cwd.
func ParseCacheDir(v, cwd string) (name, dir string, ok bool) {
	name, dir, ok = strings.Cut(v, "=")
	name, dir = strings.TrimSpace(name), strings.TrimSpace(dir)
	if !ok || name == "" || dir == "" {
		return "", "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cwd, dir)
	}
	return name, filepath.Clean(dir), true
}

// rootSet finds the cache a path belongs to: the longest matching root;
// among roots of equal length, the one whose entry or temp patterns fit
// the file.
type rootSet struct {
	fixed    []*rootState // by Path length, longest first
	anywhere []*rootState
	byKey    map[string]*rootState
}

func newRootSet() *rootSet { return &rootSet{byKey: map[string]*rootState{}} }

// add registers r and returns its state; a root already known (same
// cache, same path) is returned as is.
func (rs *rootSet) add(r Root) (*rootState, bool) {
	key := r.Spec.Name + "\x00" + r.Path
	if st, ok := rs.byKey[key]; ok {
		return st, false
	}
	st := newRootState(r)
	rs.byKey[key] = st
	if r.Anywhere != "" {
		rs.anywhere = append(rs.anywhere, st)
	} else {
		rs.fixed = append(rs.fixed, st)
		sort.SliceStable(rs.fixed, func(i, j int) bool { return len(rs.fixed[i].root.Path) > len(rs.fixed[j].root.Path) })
	}
	return st, true
}

// match returns the cache p belongs to and p relative to its root; p
// must be absolute and clean. Of the roots p is under, the longest wins,
// unless p is nothing to it (not an entry, temp file or bookkeeping
// file): then the next longest that knows p does (a .pyc under
// PYTHONPYCACHEPREFIX is Python's even below a Numba __pycache__).
func (rs *rootSet) match(p string) (*rootState, string) {
	type cand struct {
		st  *rootState
		n   int
		rel string
	}
	var buf [8]cand
	cands := buf[:0]
	for _, st := range rs.fixed {
		if rel, ok := under(p, st.root.Path); ok && rel != "" {
			cands = append(cands, cand{st, len(st.root.Path), rel})
		}
	}
	for _, st := range rs.anywhere {
		d := "/" + st.root.Anywhere + "/"
		i := strings.LastIndex(p, d)
		if i < 0 || i+len(d) >= len(p) {
			continue
		}
		cands = append(cands, cand{st, i + len(d) - 1, p[i+len(d):]})
	}
	switch len(cands) {
	case 0:
		return nil, ""
	case 1:
		return cands[0].st, cands[0].rel
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].n > cands[j].n })
	for _, c := range cands {
		if c.st.root.Spec.classify(c.rel).kind != kindNone {
			return c.st, c.rel
		}
	}
	return cands[0].st, cands[0].rel
}

// any reports whether p is below some root; it allocates nothing.
func (rs *rootSet) any(p string) bool {
	for _, st := range rs.fixed {
		if _, ok := under(p, st.root.Path); ok {
			return true
		}
	}
	for _, st := range rs.anywhere {
		d := st.root.Anywhere
		for i := strings.Index(p, d); i >= 0; {
			j := i + len(d)
			if i > 0 && p[i-1] == '/' && j < len(p) && p[j] == '/' {
				return true
			}
			k := strings.Index(p[j:], d)
			if k < 0 {
				break
			}
			i = j + k
		}
	}
	return false
}

// under reports whether p is strictly below dir, with the rest.
func under(p, dir string) (string, bool) {
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	if len(p) > len(dir) && strings.HasPrefix(p, dir) && p[len(dir)] == '/' {
		return p[len(dir)+1:], true
	}
	return "", false
}
