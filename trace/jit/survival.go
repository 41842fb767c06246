package jit

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/residency"
)

// survival says of each cache root whether it outlives a reboot or its
// container, by the rule residency applies to every cache (docs/definitions.md,
// "Does a cache survive?"): its filesystem, then systemd-tmpfiles ageing. The
// root's filesystem is looked up with the command's rights.
func (e *Sensor) survival(caches []record.Cache) {
	rules, err := residency.LoadTmpfiles(residency.DefaultTmpfilesDirs)
	if err != nil {
		e.warnings = append(e.warnings, fmt.Sprintf("jit: %v (cache survival ignores tmpfiles ageing)", err))
	}
	for i := range caches {
		c := &caches[i]
		if !filepath.IsAbs(c.Root) || strings.Contains(c.Root, "*") || c.Unreadable {
			continue // an in-tree cache has no one filesystem
		}
		var f residency.FSFacts
		var ferr error
		if err := e.opts.Actor.Do(func() error { f, ferr = residency.RootFacts(c.Root, rules); return nil }); err != nil {
			ferr = err
		}
		if ferr != nil {
			continue // the filesystem was not learnt: say nothing rather than guess
		}
		c.Survival = string(f.Survival)
		if f.Age != nil {
			c.SurvivalAge = fmt.Sprintf("%s (%s)", f.Age.Age, f.Age.Source)
		}
	}
}

// otherRoots looks, for each cache whose lookups all missed and which
// held nothing of its own, at the default locations of the same cache
// (the templates that need no variable, with the user's home): one that
// holds files is where earlier runs kept their entries before HOME,
// XDG_CACHE_HOME or a variable moved the cache.
func otherRoots(caches []record.Cache, specs []registry.Spec, u record.User, fs FS) {
	id := registry.Identity{UID: u.UID, User: u.Name, Home: u.Home}
	for i := range caches {
		c := &caches[i]
		if c.Misses == 0 || c.Hits > 0 || c.EntriesStale > 0 || c.SizeBytes > int64(c.BytesWritten) {
			continue
		}
		var s *registry.Spec
		for k := range specs {
			if specs[k].Name == c.Name {
				s = &specs[k]
			}
		}
		if s == nil {
			continue
		}
		seen := map[string]bool{c.Root: true}
		for _, tmpl := range append(append([]string{}, s.Paths...), s.Also...) {
			if strings.Contains(tmpl, "$") || strings.HasPrefix(tmpl, "**/") {
				continue
			}
			p, _, ok := registry.Expand(tmpl, registry.Env{}, id)
			if !ok || seen[p] {
				continue
			}
			seen[p] = true
			if h := fs.Health(p); !h.Missing && !h.Unreadable && h.Files > 0 {
				c.OtherRoots = append(c.OtherRoots, record.OtherRoot{Path: p, Files: h.Files, SizeBytes: h.Size})
			}
		}
	}
}
