package abrun

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// FilesRead are the regular files rec read through the page cache, by
// path: what a cold run must find evicted.
func FilesRead(rec *record.Record) []string {
	var out []string
	for _, f := range rec.Files {
		if f.Path == "" || !filepath.IsAbs(f.Path) || f.PagesAccessed == 0 {
			continue
		}
		if strings.HasPrefix(f.Path, "/proc/") || strings.HasPrefix(f.Path, "/sys/") || strings.HasPrefix(f.Path, "/dev/") {
			continue
		}
		out = append(out, f.Path)
	}
	return out
}

// Cold is one cold run's report and the fresh directories to remove.
type Cold struct {
	abtest.Cold
	dir string
}

// MakeCold evicts files with the actor's rights and plans fresh JIT cache
// directories (residency/kcache, as `run --cold` does) for the command.
// Remove the directories with Cleanup after the run.
func (r *Runner) MakeCold(files []string) (*Cold, error) {
	c := &Cold{}
	if len(files) > 0 {
		ev, probs := residency.Evict(r.opts.Actor, files)
		for _, e := range ev {
			c.EvictedBytes += e.DroppedBytes
			c.KeptPages += e.KeptPages
		}
		c.Files = len(ev)
		for _, p := range probs {
			c.Problems = append(c.Problems, p.Error())
		}
	}
	dir, err := os.MkdirTemp("", "coldtrace-bench-cold-")
	if err != nil {
		return nil, fmt.Errorf("cold cache directories: %w", err)
	}
	c.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		c.Cleanup()
		return nil, fmt.Errorf("cold cache directories: %w", err)
	}
	env := registry.Env{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	plan := kcache.Plan(registry.Registry, env, []kcache.Class{kcache.JIT}, dir)
	u := r.opts.Actor.Command
	if err := plan.Create(int(u.UID), int(u.GID)); err != nil {
		c.Cleanup()
		return nil, err
	}
	c.Env = plan.Environ()
	sort.Strings(c.Env)
	return c, nil
}

// Cleanup removes the fresh cache directories.
func (c *Cold) Cleanup() {
	if c != nil && c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}
