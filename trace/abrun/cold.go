package abrun

import (
	"os"
	"strings"

	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency/coldrun"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// filesFromDisk are the paths of the files rec read from disk: what a
// later cold run evicts (coldrun.FilesFromDisk, the rule of `run --cold
// --from`). Files without a usable path are left out.
func filesFromDisk(rec *record.Record) []string {
	var out []string
	for _, f := range coldrun.FilesFromDisk(rec) {
		if f.Path != "" && !f.NameCut {
			out = append(out, f.Path)
		}
	}
	return out
}

// makeCold makes one run cold the way `run --cold` does
// (residency/coldrun): files evicted with the actor's rights, the JIT
// caches pointed at fresh directories that the command's user creates
// under /var/tmp. The caller removes them with cleanup after the run.
func (r *Runner) makeCold(files []string) (*coldrun.Run, *abtest.Cold, error) {
	c, err := coldrun.Make(coldrun.Options{
		Classes: kcache.DefaultClasses,
		Files:   files,
		Evictor: r.opts.Actor,
		Owner:   r.opts.Actor.CommandActor(),
		Environ: os.Environ(),
	})
	if err != nil {
		return nil, nil, err
	}
	return c, &abtest.Cold{
		EvictedBytes: c.Made.EvictedBytes, Files: c.Made.EvictedFiles, KeptPages: c.KeptPages,
		Problems: c.Made.EvictProblems, Env: c.Overrides(),
	}, nil
}

// cleanup removes a cold run's fresh caches; a failure to is said.
func (r *Runner) cleanup(c *coldrun.Run) {
	var b strings.Builder
	c.Cleanup(&b)
	if msg := strings.TrimSpace(strings.TrimPrefix(b.String(), "coldtrace: ")); msg != "" {
		r.opts.Notify(msg)
	}
}
