package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
	"github.com/coldtrace/coldtrace/trace"
)

// coldOptions are run's flags for a run made cold on purpose: --cold
// drops the named files from the page cache and gives the command fresh,
// empty caches through its environment, leaving the user's own caches as
// they are (so the run after it is warm again).
type coldOptions struct {
	value   string // --cold's value; "" when --cold was not given
	evict   []string
	from    string
	keep    bool
	classes []kcache.Class
}

// coldDefault is the value of a bare --cold.
const coldDefault = "page-cache,jit"

func (c *coldOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.value, "cold", "", "make the run cold on purpose: `CLASSES` (comma-separated, after '=') of page-cache, jit, pycache, downloads; a bare --cold means "+coldDefault)
	fs.Lookup("cold").NoOptDefVal = coldDefault
	fs.StringArrayVar(&c.evict, "evict", nil, "with --cold: drop `PATH` (a file, or a directory recursively) from the page cache before the command starts (repeatable)")
	fs.StringVar(&c.from, "from", "", "with --cold: drop the files `RECORD` read from disk from the page cache before the command starts")
	fs.BoolVar(&c.keep, "keep-cold-caches", false, "with --cold: keep the fresh cache directories after the run (they are removed otherwise)")
}

// check validates the flags after parsing; command is what follows them.
func (c *coldOptions) check(command []string) error {
	if c.value == "" {
		if len(c.evict) > 0 || c.from != "" || c.keep {
			return errors.New("--evict, --from and --keep-cold-caches go with --cold")
		}
		return nil
	}
	classes, err := kcache.ParseClasses(c.value)
	if err != nil {
		return err
	}
	c.classes = classes
	// pflag cannot take an optional value as a separate word: in
	// "--cold jit -- cmd" the command would be "jit".
	if len(command) > 0 && !strings.HasPrefix(command[0], "-") {
		if _, err := kcache.ParseClasses(command[0]); err == nil && strings.TrimSpace(command[0]) != "" {
			return fmt.Errorf("--cold takes its classes after '=': --cold=%s", command[0])
		}
	}
	if (len(c.evict) > 0 || c.from != "") && !c.has(kcache.PageCache) {
		return fmt.Errorf("--evict and --from drop files from the page cache: add page-cache to --cold=%s", c.value)
	}
	return nil
}

func (c *coldOptions) has(class kcache.Class) bool {
	for _, x := range c.classes {
		if x == class {
			return true
		}
	}
	return false
}

// coldRun is what --cold did before the command started, and the fresh
// cache directories to remove after it.
type coldRun struct {
	made  *record.MadeCold
	env   []string
	root  string
	owner actor.Actor // the command's user: creates and removes root
	keep  bool
}

// prepare makes the run cold: it evicts the files with the invoking
// user's rights, then creates the fresh cache directories with the
// command's user's rights (they are that user's, so nothing of root's is
// left for the command to find) and plans the command's environment.
// Nothing is done when --cold was not given: the result is nil.
func (c *coldOptions) prepare(a actor.Actor, stderr io.Writer) (*coldRun, error) {
	if c.value == "" {
		return nil, nil
	}
	// Nothing is evicted or created for a run that cannot be traced.
	if err := trace.Preflight(); err != nil {
		return nil, err
	}
	r := &coldRun{made: &record.MadeCold{}, owner: a.CommandActor(), keep: c.keep}
	for _, cl := range c.classes {
		r.made.Classes = append(r.made.Classes, string(cl))
	}
	if c.has(kcache.PageCache) {
		if err := c.evictFiles(r.made, stderr); err != nil {
			return nil, err
		}
	}
	if len(c.classes) > 1 || !c.has(kcache.PageCache) {
		if err := r.createCaches(c.classes, os.Environ()); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(stderr, "coldtrace: %s\n", format.Escape(r.describe()))
	return r, nil
}

// evictFiles drops the files of --from and --evict from the page cache.
// A path that cannot be evicted is one line; the others still go.
func (c *coldOptions) evictFiles(made *record.MadeCold, stderr io.Writer) error {
	who, err := invokingUser()
	if err != nil {
		return err
	}
	paths, _, err := targetPaths(who, c.from, c.evict, stderr)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		fmt.Fprintf(stderr, "coldtrace: warning: --cold=%s names no files to evict (--from RECORD or --evict PATH): the page cache is left as it is\n", format.Escape(c.value))
		return nil
	}
	done, probs := residency.Evict(who.actor, paths)
	printProblems(stderr, probs)
	page := int64(os.Getpagesize())
	for _, e := range done {
		made.EvictedFiles++
		made.EvictedBytes += e.DroppedBytes
		made.KeptBytes += min(int64(e.KeptPages)*page, e.Size)
		if !e.Known {
			made.UnverifiedFiles++
		}
	}
	for _, p := range probs {
		made.EvictProblems = append(made.EvictProblems, p.Error())
	}
	return nil
}

// createCaches makes a fresh root under the machine's disk-backed
// temporary directory with one empty directory per cache, and sets the
// command's environment to use them.
func (r *coldRun) createCaches(classes []kcache.Class, environ []string) error {
	env := registry.ParseEnviron([]byte(strings.Join(environ, "\x00")))
	var plan kcache.ColdPlan
	err := r.owner.Do(func() error {
		root, err := os.MkdirTemp(coldBase(), "coldtrace-cold-")
		if err != nil {
			return fmt.Errorf("fresh caches for --cold: %w", err)
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
		r.made.CacheDirs = append(r.made.CacheDirs, record.ColdCacheDir{Cache: o.Cache, Env: o.Env, Dir: o.Dir})
	}
	for _, u := range plan.Untouched {
		r.made.Untouched = append(r.made.Untouched, record.ColdUntouched{Cache: u.Cache, Reason: u.Reason})
	}
	r.env = plan.Apply(environ)
	r.made.KeptDirs = r.keep
	return nil
}

// coldBase is where fresh caches go: /var/tmp, which is on disk on most
// systems (a downloads cache can be gigabytes: /tmp may be memory), else
// the temporary directory.
func coldBase() string {
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
		return "/var/tmp"
	}
	return os.TempDir()
}

func (r *coldRun) describe() string {
	m := r.made
	var parts []string
	if m.EvictedFiles > 0 || len(m.EvictProblems) > 0 {
		s := fmt.Sprintf("%s evicted (%s dropped from the page cache", plural(m.EvictedFiles, "file"), format.Bytes(uint64(m.EvictedBytes)))
		if m.KeptBytes > 0 {
			s += ", " + format.Bytes(uint64(m.KeptBytes)) + " kept: in use"
		}
		parts = append(parts, s+")")
	}
	if len(m.CacheDirs) > 0 {
		parts = append(parts, fmt.Sprintf("%s pointed at empty directories under %s", plural(len(m.CacheDirs), "cache"), r.root))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to make cold")
	}
	return "cold run (" + strings.Join(m.Classes, ",") + "): " + strings.Join(parts, "; ")
}

// environ is the command's environment; nil (coldtrace's own) when the
// run was not made cold.
func (r *coldRun) environ() []string {
	if r == nil {
		return nil
	}
	return r.env
}

// record is the record's part: nil when the run was not made cold.
func (r *coldRun) record() *record.MadeCold {
	if r == nil {
		return nil
	}
	return r.made
}

// cleanup removes the fresh caches, with the command's user's rights,
// unless --keep-cold-caches. It runs once: later calls do nothing.
func (r *coldRun) cleanup(stderr io.Writer) {
	if r == nil || r.root == "" {
		return
	}
	if r.keep {
		fmt.Fprintf(stderr, "coldtrace: the cold run's caches are kept in %s\n", format.Escape(r.root))
		r.root = ""
		return
	}
	r.remove(stderr)
}

// remove deletes the fresh root; where that fails, the record says the
// directories stayed.
func (r *coldRun) remove(stderr io.Writer) {
	if err := r.owner.Do(func() error { return os.RemoveAll(r.root) }); err != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: the cold run's caches stay in %s: %s\n", format.Escape(r.root), errorText(err))
		r.made.KeptDirs = true
	}
	r.root = ""
}

// madeColdDir reports whether root is one of the fresh caches --cold gave
// a recorded run, or a path inside one.
func madeColdDir(m *record.MadeCold, root string) bool {
	if m == nil {
		return false
	}
	for _, d := range m.CacheDirs {
		if root == d.Dir || strings.HasPrefix(root, d.Dir+"/") {
			return true
		}
	}
	return false
}
