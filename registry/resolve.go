package registry

import (
	"bytes"
	"path"
	"path/filepath"
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

// SwitchesOn returns the switches of s that env turns on, as "VAR=value".
func (s *Spec) SwitchesOn(env Env) []Switch {
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

// LimitIn reads s's size-limit variable from env, in bytes.
func (s *Spec) LimitIn(env Env) int64 {
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
