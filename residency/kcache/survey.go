// Package kcache looks at the kernel, JIT and model caches of the
// registry (package registry) as they are on disk now, for one user's
// environment: where each is, whether it survives, how many entries it
// holds, which switches turn it off; and it plans fresh, empty
// replacements for them, for a run made cold on purpose.
package kcache

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/residency"
)

// Cache is one registry cache as it is now.
type Cache struct {
	Name      string `json:"name"`
	Framework string `json:"framework"`
	// Compiles is false for caches of downloaded weights.
	Compiles bool   `json:"compiles"`
	Root     string `json:"root"`
	// Via is what decided Root: an environment variable, "default",
	// "in-tree" (next to the sources: not surveyed) or "record".
	Via    string `json:"via"`
	InTree bool   `json:"in_tree,omitempty"`
	Exists bool   `json:"exists"`
	// FS is the root's filesystem and whether a cache there survives;
	// nil for an in-tree cache.
	FS *residency.FSFacts `json:"fs,omitempty"`
	// Entries counts cache entries (the unit a key names: a Triton key
	// directory, a .pyc); Files and SizeBytes all regular files. Capped:
	// the walk stopped early, so the numbers are lower bounds.
	Entries   int64 `json:"entries"`
	Files     int64 `json:"files"`
	SizeBytes int64 `json:"size_bytes"`
	Capped    bool  `json:"capped,omitempty"`
	// Unreadable counts directories below the root this user cannot read.
	Unreadable int `json:"unreadable,omitempty"`
	// NotReadable: this user may not reach or list the root itself, so
	// whether it exists and what it holds are unknown (not "missing").
	NotReadable bool `json:"not_readable,omitempty"`
	// Disabled are the switches set in the environment ("VAR=value: what
	// it does"); Switches every switch that would disable it.
	Disabled []string `json:"disabled,omitempty"`
	Switches []string `json:"switches,omitempty"`
	// Offline are the network switches set ("HF_HUB_OFFLINE=1: what it
	// does"): the cache is read, but a file it lacks is not downloaded.
	Offline []string `json:"offline,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Options bound a survey: a walk stops after MaxFiles files or MaxTime
// per root (a model cache can hold millions).
type Options struct {
	MaxFiles int
	MaxTime  time.Duration
	Tmpfiles residency.TmpfilesRules
}

// Survey describes roots (from registry.Resolve, plus any a record names) with
// a's rights; a root listed twice is surveyed once.
func Survey(a residency.Actor, roots []registry.Root, env registry.Env, opt Options) []Cache {
	if opt.MaxFiles <= 0 {
		opt.MaxFiles = 200000
	}
	if opt.MaxTime <= 0 {
		opt.MaxTime = 2 * time.Second
	}
	var out []Cache
	seen := map[string]bool{}
	for _, r := range roots {
		key := r.Spec.Name + "\x00" + r.Path
		if seen[key] {
			continue
		}
		seen[key] = true
		c := Cache{Name: r.Spec.Name, Framework: r.Spec.Framework, Compiles: r.Spec.Compiles,
			Root: r.Path, Via: r.Via, InTree: r.Anywhere != ""}
		for _, sw := range r.Spec.Switches {
			v := env[sw.Env]
			set := v != "" && (len(sw.Values) == 0 || slices.Contains(sw.Values, v))
			switch {
			case sw.Offline && set:
				c.Offline = append(c.Offline, sw.Env+"="+v+": "+sw.Effect)
			case sw.Offline:
			case set:
				c.Switches = append(c.Switches, sw.Env)
				c.Disabled = append(c.Disabled, sw.Env+"="+v+": "+sw.Effect)
			default:
				c.Switches = append(c.Switches, sw.Env)
			}
		}
		if !c.InTree {
			err := a.Do(func() error {
				facts, err := residency.RootFacts(r.Path, opt.Tmpfiles)
				if err != nil {
					return err
				}
				c.FS = &facts
				c.Exists = !facts.Missing
				if c.Exists {
					walkCache(&c, r.Spec, opt)
				}
				return nil
			})
			if err != nil {
				c.Error = err.Error()
				c.NotReadable = errors.Is(err, fs.ErrPermission)
			}
		}
		out = append(out, c)
	}
	return out
}

var errStop = errors.New("stop")

// walkCache counts c's entries, files and bytes. It runs inside the
// Actor.
func walkCache(c *Cache, s *registry.Spec, opt Options) {
	deadline := time.Now().Add(opt.MaxTime)
	root := filepath.Clean(c.Root)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				c.NotReadable = true // the root itself: nothing below it was seen
				return nil
			}
			c.Unreadable++
			return nil
		}
		if p == root {
			return nil
		}
		rel := strings.TrimPrefix(p, root+"/")
		if skipped(s, path.Base(rel)) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		depth := strings.Count(rel, "/") + 1
		if s.EntryDepth > 0 && depth == s.EntryDepth {
			c.Entries++
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				c.SizeBytes += info.Size()
			}
			c.Files++
			if s.EntryDepth == 0 && (len(s.Entries) == 0 || matchAny(s.Entries, d.Name())) {
				c.Entries++
			}
			if c.Files >= int64(opt.MaxFiles) || (c.Files%1024 == 0 && time.Now().After(deadline)) {
				c.Capped = true
				return errStop
			}
		}
		return nil
	})
}

// skipped reports a temp file (a miss being filled) or a bookkeeping
// file: neither is an entry.
func skipped(s *registry.Spec, name string) bool {
	return matchAny(s.Temp, name) || matchAny(s.Ignore, name)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
