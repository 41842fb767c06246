package registry

import (
	"path"
	"strings"
)

// Assignment is one environment variable setting.
type Assignment struct {
	Var   string
	Value string
}

// leadVar names the variable that leads tmpl and the rest of the
// template after it: "$TORCH_HOME/hub" is TORCH_HOME and "/hub"; "~" is
// HOME, "{tmp}" TMPDIR (the first of the variables tempfile reads). A
// template that starts with a fixed path or is in-tree has none.
func leadVar(tmpl string) (name, rest string, ok bool) {
	switch {
	case strings.HasPrefix(tmpl, "$"):
		n := 1
		for n < len(tmpl) && isVarChar(tmpl[n]) {
			n++
		}
		if n == 1 {
			return "", "", false
		}
		return tmpl[1:n], tmpl[n:], true
	case tmpl == "~" || strings.HasPrefix(tmpl, "~/"):
		return "HOME", tmpl[1:], true
	case strings.HasPrefix(tmpl, "{tmp}"):
		return "TMPDIR", tmpl[len("{tmp}"):], true
	}
	return "", "", false
}

// Invert is Expand's inverse for the variable that leads tmpl: the value
// of that variable that makes tmpl expand to root, the template's other
// parts expanded from env and id. It reports false when tmpl has no
// leading variable or no value of it gives root (a torch.hub root not
// ending in /hub cannot come from $TORCH_HOME/hub). The result is
// checked by expanding tmpl with it.
func Invert(tmpl, root string, env Env, id Identity) (Assignment, bool) {
	name, rest, ok := leadVar(tmpl)
	if !ok || !path.IsAbs(root) {
		return Assignment{}, false
	}
	root = path.Clean(root)
	value := root
	if rest != "" {
		if rest[0] != '/' {
			return Assignment{}, false
		}
		suffix, _, ok := Expand(rest, env, Identity{UID: id.UID, User: id.User, Home: id.Home, Cwd: "/"})
		if !ok {
			return Assignment{}, false
		}
		if suffix != "/" {
			v, cut := strings.CutSuffix(root, suffix)
			if !cut || v == "" {
				return Assignment{}, false
			}
			value = v
		}
	}
	a := Assignment{Var: name, Value: value}
	if got, _, ok := Expand(tmpl, with(env, a), id); !ok || got != root {
		return Assignment{}, false
	}
	return a, true
}

// with returns a copy of env with a set.
func with(env Env, a Assignment) Env {
	out := make(Env, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	out[a.Var] = a.Value
	return out
}

// ExportFor returns the assignment a user exports so that s's cache is
// root: the first of s's own variables (a template led by $VAR, Paths
// before Also, so the highest precedence wins) whose value gives root.
// HOME and TMPDIR are never proposed: they move far more than one cache.
// It reports false when no variable of s can make root its root (an
// in-tree cache, a fixed path, a root of the wrong shape). Resolution
// from that one variable alone is checked to give root.
func (s *Spec) ExportFor(root string) (Assignment, bool) {
	if root == "" || strings.Contains(root, "*") {
		return Assignment{}, false
	}
	for _, tmpl := range append(append([]string(nil), s.Paths...), s.Also...) {
		if !strings.HasPrefix(tmpl, "$") {
			continue
		}
		a, ok := Invert(tmpl, root, Env{}, Identity{})
		if !ok {
			continue
		}
		for _, r := range Resolve([]Spec{*s}, Env{a.Var: a.Value}, Identity{}) {
			if r.Anywhere == "" && r.Path == path.Clean(root) {
				return a, true
			}
		}
	}
	return Assignment{}, false
}
