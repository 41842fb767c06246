// Package coldrun makes a run cold on purpose, the one way `run --cold`
// and `bench --cold-warm` both do it: the files a run read from disk are
// dropped from the page cache with the invoking user's rights, and the
// registry's caches of the chosen classes are pointed, through the
// command's environment, at fresh empty directories that the command's
// user creates under the machine's disk-backed temporary directory. The
// user's own caches are never touched, so the run after a cold one is
// warm again.
package coldrun

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// Options say what to make cold, and for whom.
type Options struct {
	// Classes are the kinds of cache made cold (kcache.ParseClasses).
	Classes []kcache.Class
	// Files are dropped from the page cache when Classes has
	// kcache.PageCache, with Evictor's rights (the invoking user's).
	Files   []string
	Evictor actor.Actor
	// Owner is the command's user: the fresh cache directories are
	// created and removed with its rights, so nothing of root's is left
	// for the command to find.
	Owner actor.Actor
	// Environ is the command's environment, which the fresh caches are
	// planned from and applied to.
	Environ []string
	// Keep leaves the fresh directories in place after the run.
	Keep bool
}

// Run is what was made cold before the command started, and the fresh
// cache directories to remove after it.
type Run struct {
	// Made is the record's part.
	Made *record.MadeCold
	// Problems are the files that could not be evicted.
	Problems []residency.Problem
	// KeptPages counts pages that stayed cached (dirty, under writeback,
	// mapped by a running process).
	KeptPages uint64
	env       []string
	root      string
	owner     actor.Actor
}

// Make evicts o.Files (page-cache class) and creates the fresh caches of
// the other classes. A file that cannot be evicted is a Problem; the
// others still go.
func Make(o Options) (*Run, error) {
	r := &Run{Made: &record.MadeCold{}, owner: o.Owner, env: o.Environ}
	for _, cl := range o.Classes {
		r.Made.Classes = append(r.Made.Classes, string(cl))
	}
	if slices.Contains(o.Classes, kcache.PageCache) && len(o.Files) > 0 {
		r.evict(o.Evictor, o.Files)
	}
	if len(o.Classes) > 1 || !slices.Contains(o.Classes, kcache.PageCache) {
		if err := r.createCaches(o.Classes, o.Environ); err != nil {
			return nil, err
		}
	}
	r.Made.KeptDirs = o.Keep && r.root != ""
	return r, nil
}

func (r *Run) evict(who actor.Actor, files []string) {
	done, probs := residency.Evict(who, files)
	page := int64(os.Getpagesize())
	for _, e := range done {
		r.Made.EvictedFiles++
		r.Made.EvictedBytes += e.DroppedBytes
		r.Made.KeptBytes += min(int64(e.KeptPages)*page, e.Size)
		r.KeptPages += e.KeptPages
		if !e.Known {
			r.Made.UnverifiedFiles++
		}
	}
	for _, p := range probs {
		r.Made.EvictProblems = append(r.Made.EvictProblems, p.Error())
	}
	r.Problems = probs
}

// createCaches makes a fresh root under Base with one empty directory
// per cache, as the command's user, and plans the command's environment.
func (r *Run) createCaches(classes []kcache.Class, environ []string) error {
	env := registry.ParseEnvList(environ)
	var plan kcache.ColdPlan
	err := r.owner.Do(func() error {
		root, err := os.MkdirTemp(Base(), "coldtrace-cold-")
		if err != nil {
			return fmt.Errorf("fresh caches for a cold run: %w", err)
		}
		r.root = root
		plan = kcache.Plan(registry.Registry, env, classes, root)
		return plan.Create(int(r.owner.UID), int(r.owner.GID))
	})
	if err != nil {
		if r.root != "" {
			r.remove(io.Discard)
		}
		return err
	}
	for _, o := range plan.Overrides {
		r.Made.CacheDirs = append(r.Made.CacheDirs, record.ColdCacheDir{Cache: o.Cache, Env: o.Env, Dir: o.Dir})
	}
	for _, u := range plan.Untouched {
		r.Made.Untouched = append(r.Made.Untouched, record.ColdUntouched{Cache: u.Cache, Reason: u.Reason})
	}
	r.env = plan.Apply(environ)
	return nil
}

// Base is where fresh caches go: /var/tmp, which is on disk on most
// systems (a downloads cache can be gigabytes: /tmp may be memory), else
// the temporary directory.
func Base() string {
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
		return "/var/tmp"
	}
	return os.TempDir()
}

// Root is the fresh caches' directory; "" when none was made or after
// Cleanup.
func (r *Run) Root() string { return r.root }

// Environ is the command's environment; nil (the caller's own) when r is
// nil.
func (r *Run) Environ() []string {
	if r == nil {
		return nil
	}
	return r.env
}

// Overrides are the variables the cold run set, as sorted VAR=dir lines.
func (r *Run) Overrides() []string {
	var out []string
	for _, d := range r.Made.CacheDirs {
		out = append(out, d.Env+"="+d.Dir)
	}
	sort.Strings(out)
	return out
}

// Record is the record's part: nil when r is nil.
func (r *Run) Record() *record.MadeCold {
	if r == nil {
		return nil
	}
	return r.Made
}

// Describe says in one line what was made cold.
func (r *Run) Describe() string {
	m := r.Made
	var parts []string
	if m.EvictedFiles > 0 || len(m.EvictProblems) > 0 {
		s := fmt.Sprintf("%s evicted (%s dropped from the page cache", format.Counted(uint64(m.EvictedFiles), "file", "files"), format.Bytes(uint64(m.EvictedBytes)))
		if m.KeptBytes > 0 {
			s += ", " + format.Bytes(uint64(m.KeptBytes)) + " kept: in use"
		}
		parts = append(parts, s+")")
	}
	if len(m.CacheDirs) > 0 {
		parts = append(parts, fmt.Sprintf("%s pointed at empty directories under %s", format.Counted(uint64(len(m.CacheDirs)), "cache", "caches"), r.root))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to make cold")
	}
	return "cold run (" + strings.Join(m.Classes, ",") + "): " + strings.Join(parts, "; ")
}

// Cleanup removes the fresh caches with the command's user's rights,
// unless they are kept (then it says where they are). It runs once:
// later calls, and calls on nil, do nothing.
func (r *Run) Cleanup(stderr io.Writer) {
	if r == nil || r.root == "" {
		return
	}
	if r.Made.KeptDirs {
		fmt.Fprintf(stderr, "coldtrace: the cold run's caches are kept in %s\n", format.Escape(r.root))
		r.root = ""
		return
	}
	r.remove(stderr)
}

// remove deletes the fresh root; where that fails, the record says the
// directories stayed.
func (r *Run) remove(stderr io.Writer) {
	if err := r.owner.Do(func() error { return os.RemoveAll(r.root) }); err != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: the cold run's caches stay in %s: %s\n", format.Escape(r.root), format.Escape(err.Error()))
		r.Made.KeptDirs = true
	}
	r.root = ""
}

// InFreshCaches reports whether path is one of the fresh caches a cold
// run gave a recorded run, or a path inside one.
func InFreshCaches(m *record.MadeCold, path string) bool {
	if m == nil {
		return false
	}
	for _, d := range m.CacheDirs {
		if path == d.Dir || strings.HasPrefix(path, d.Dir+"/") {
			return true
		}
	}
	return false
}

// FilesFromDisk are the files a run read from disk (pages missed, or
// bytes from disk), in the order the run first touched them (the first
// sample that shows them; files no sample shows come last, by id): what
// a cold run evicts, and what status, evict and prefetch work on.
func FilesFromDisk(r *record.Record) []record.File {
	first := map[int]int64{}
	for _, s := range r.Samples {
		for _, d := range s.Files {
			if _, ok := first[d.File]; !ok && (d.PagesAccessed > 0 || d.PagesMissed > 0) {
				first[d.File] = s.EndNS
			}
		}
	}
	var out []record.File
	for _, f := range r.Files {
		// Rows that are no file ("[filesystem metadata of 254:0 …]",
		// small files together) have nothing to evict or read, and files
		// in a cold run's fresh caches went with them.
		// A cut name stays in, for paths to say it cannot be used.
		if (f.PagesMissed > 0 || f.BytesFromDisk > 0) && (f.NameCut || !strings.HasPrefix(f.Path, "[")) && !InFreshCaches(r.MadeCold, f.Path) {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, oki := first[out[i].ID]
		tj, okj := first[out[j].ID]
		if oki != okj {
			return oki
		}
		return ti < tj
	})
	return out
}
