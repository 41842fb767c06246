package invariants

import (
	"fmt"
	"path"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

// RuleOneStory: the sections of one report tell one story. A download
// names a cache the caches table lists, lies under its root, and is
// "kept" exactly when that cache survives; the file it was written to
// has its row in the files table under the same name (on tmpfs too,
// where no page-cache event sees it); a body no file was found for
// was not written whole into a surviving cache's file; each export line
// brings its cache back to the root the table shows.
const RuleOneStory = "sections-tell-one-story"

// story checks that downloads, caches and persist advice agree.
func (c *checker) story() {
	r := c.r
	caches := map[string]*record.Cache{}
	if r.JIT != nil {
		for i := range r.JIT.Caches {
			k := &r.JIT.Caches[i]
			if _, dup := caches[k.Name]; !dup {
				caches[k.Name] = k
			}
		}
	}
	rows := make(map[fileID]*record.File, len(r.Files))
	for i := range r.Files {
		f := &r.Files[i]
		rows[fileID{f.Dev, f.Ino, f.Gen}] = f
	}
	for i, d := range r.Downloads {
		subject := fmt.Sprintf("download %d (%s from %s)", i, d.Path, d.Peer)
		c.downloadCache(subject, d, caches)
		c.downloadBody(subject, d, caches)
		c.downloadFileRow(subject, d, rows)
	}
	for _, p := range advice.PersistList(r) {
		c.exportFindsRoot(p)
	}
}

// downloadCache: the cache a download names is one of the record's, its
// destination is inside it, and its fate follows the cache's survival.
func (c *checker) downloadCache(subject string, d record.Download, caches map[string]*record.Cache) {
	if d.Cache == "" || d.Path == "" {
		return
	}
	k, ok := caches[d.Cache]
	if !ok {
		c.add(RuleOneStory, subject, "names the %s cache, which the caches table does not list", d.Cache)
		return
	}
	p := d.Path
	if d.KeptIn != nil {
		p = d.KeptIn.Path
	}
	if !inside(p, k.Root) {
		c.add(RuleOneStory, subject, "is said to be in the %s cache, but %s is outside its root %s", d.Cache, p, k.Root)
	}
	fate, _ := attribution.FateOf(c.r, d)
	if fate == attribution.FateDeleted {
		return
	}
	if survives(k) != fate.Kept() {
		c.add(RuleOneStory, subject, "the caches table says the %s cache is %q, but the download says %q", d.Cache, survivalWords(k.Survival), fate)
	}
}

// fileID is a file as files[] and downloads[] name it: a file given a
// deleted one's inode number has its own row, told by its generation.
type fileID struct {
	dev uint32
	ino uint64
	gen uint32
}

// downloadFileRow: a download written to a file (its destination is the
// first of its files) has that file's row in files[], named as the
// download names it (its final name, or the one it was written under).
// A full file table (Lost.FileTable) excuses a missing row.
func (c *checker) downloadFileRow(subject string, d record.Download, rows map[fileID]*record.File) {
	if d.Path == "" || len(d.Files) == 0 || (d.Destination != record.DestFile && d.Destination != record.DestExpanded) {
		return
	}
	df := d.Files[0]
	f, ok := rows[fileID{df.Dev, df.Ino, df.Gen}]
	if !ok {
		if c.r.Lost.FileTable == 0 {
			c.add(RuleOneStory, subject, "was written to %s, which the files table does not list",
				record.File{Dev: df.Dev, Ino: df.Ino}.Name())
		}
		return
	}
	for _, name := range []string{d.Path, df.WrittenPath} {
		if name != "" && (name == f.Path || name == f.FirstPath || name == f.HostPath) {
			return
		}
	}
	c.add(RuleOneStory, subject, "the files table names its file %s", f.Name())
}

// downloadBody: a download said to be fetched again (kept in memory, or
// into a file deleted) while a file of a surviving cache was written
// with its body, to the page, is a download linked to the wrong file.
func (c *checker) downloadBody(subject string, d record.Download, caches map[string]*record.Cache) {
	fate, _ := attribution.FateOf(c.r, d)
	if fate != attribution.FateMemory && fate != attribution.FateDeleted {
		return
	}
	ps := uint64(max(c.r.Host.PageSize, 4096))
	slack := max(64<<10, d.Bytes/200)
	for _, f := range c.r.Files {
		written := f.PagesCreated * ps
		if written+ps < d.Bytes || written > d.Bytes+slack+ps {
			continue
		}
		for _, k := range caches {
			if inside(f.Path, k.Root) && survives(k) {
				c.add(RuleOneStory, subject, "is said to be fetched again (%s), but %s in the surviving %s cache was written with %d bytes, its body to the page",
					fate, f.Path, k.Name, written)
				return
			}
		}
	}
}

// exportFindsRoot: an export line of persist brings its cache's
// framework back to the root the caches table shows (for a surviving
// cache; one that does not survive is moved on purpose).
func (c *checker) exportFindsRoot(p advice.Persist) {
	if p.Export == "" || !p.Survives() {
		return
	}
	s, ok := registry.Lookup(p.Cache)
	if !ok {
		return
	}
	v, ok := strings.CutPrefix(p.Export, "export "+p.Env+"=")
	if !ok {
		c.add(RuleOneStory, "cache "+p.Cache, "export line %q does not set %s", p.Export, p.Env)
		return
	}
	v, ok = shellWord(v)
	if !ok {
		return // a quoting this check does not read
	}
	for _, root := range registry.Resolve([]registry.Spec{s}, registry.Env{p.Env: v}, registry.Identity{}) {
		if root.Path == path.Clean(p.Root) {
			return
		}
	}
	c.add(RuleOneStory, "cache "+p.Cache, "export line %q does not bring the cache back to %s", p.Export, p.Root)
}

func inside(p, root string) bool {
	if root == "" || strings.Contains(root, "*") {
		return true
	}
	root = path.Clean(root)
	return p == root || strings.HasPrefix(p, root+"/") || root == "/"
}

func survivalWords(s string) string {
	if s == "" {
		return "survival unknown"
	}
	return s
}

func survives(k *record.Cache) bool { return advice.Persist{Survival: k.Survival}.Survives() }

// shellWord reads a bare word or a single-quoted one (each quote inside
// closed, escaped and reopened), as sh would; false for any other
// quoting.
func shellWord(s string) (string, bool) {
	if !strings.ContainsAny(s, "'\"\\$` \t\n") {
		return s, true
	}
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	parts := strings.Split(s[1:len(s)-1], `'\''`)
	for _, p := range parts {
		if strings.Contains(p, "'") {
			return "", false
		}
	}
	return strings.Join(parts, "'"), true
}
