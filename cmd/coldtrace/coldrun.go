package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency/coldrun"
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

// prepare makes the run cold (residency/coldrun): it evicts the files
// with the invoking user's rights, then creates the fresh cache
// directories with the command's user's rights and plans the command's
// environment. Nothing is done when --cold was not given: the result is
// nil.
func (c *coldOptions) prepare(a actor.Actor, stderr io.Writer) (*coldrun.Run, error) {
	if c.value == "" {
		return nil, nil
	}
	// Nothing is evicted or created for a run that cannot be traced.
	if err := trace.Preflight(); err != nil {
		return nil, err
	}
	o := coldrun.Options{Classes: c.classes, Owner: a.CommandActor(), Environ: os.Environ(), Keep: c.keep}
	if c.has(kcache.PageCache) {
		who, err := invokingUser()
		if err != nil {
			return nil, err
		}
		paths, _, err := targetPaths(who, c.from, c.evict, stderr)
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			fmt.Fprintf(stderr, "coldtrace: warning: --cold=%s names no files to evict (--from RECORD or --evict PATH): the page cache is left as it is\n", format.Escape(c.value))
		}
		o.Files, o.Evictor = paths, who.actor
	}
	r, err := coldrun.Make(o)
	if err != nil {
		return nil, err
	}
	printProblems(stderr, r.Problems)
	fmt.Fprintf(stderr, "coldtrace: %s\n", format.Escape(r.Describe()))
	return r, nil
}
