package advice

import (
	"cmp"
	"path"
	"slices"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// CandidateMinBytes is how much a run must create in one directory for
// the directory to be named as a cache the registry does not know.
const CandidateMinBytes = 1 << 20

// CacheCandidate is a directory under the user's home or cache home that
// a run filled with data: a cache the registry does not know, when a
// later run read that data back without writing it again.
type CacheCandidate struct {
	Dir string `json:"dir"`
	// CreatedBytes is what the (first) run wrote into new pages of
	// Files files in Dir.
	CreatedBytes int64 `json:"created_bytes"`
	Files        int   `json:"files"`
	// Reused is set when a second run read those files without
	// rewriting any of them: the directory is a cache. Unset, it only
	// may be one.
	Reused bool `json:"reused"`
	// Sentence is filled in by report/words.
	Sentence string `json:"sentence"`
}

// MayBeCaches are the directories under the user's home (its cache home
// first) in which this run created at least CandidateMinBytes, outside
// the caches the registry knows and outside the volatile trees.
func MayBeCaches(r *record.Record) []CacheCandidate {
	created := createdFiles(r)
	return candidateDirs(r, created, false)
}

// CacheCandidates are the directories in which run a created at least
// CandidateMinBytes that run b read without rewriting.
func CacheCandidates(a, b *record.Record) []CacheCandidate {
	if a == nil || b == nil {
		return nil
	}
	inB := map[string]record.File{}
	for _, f := range b.Files {
		if !f.NameCut {
			g := inB[f.Path]
			g.PagesAccessed += f.PagesAccessed
			g.PagesCreated += f.PagesCreated
			inB[f.Path] = g
		}
	}
	var reused []createdFile
	for _, c := range createdFiles(a) {
		g, ok := inB[c.path]
		if ok && g.PagesAccessed > 0 && g.PagesCreated == 0 {
			reused = append(reused, c)
		}
	}
	return candidateDirs(a, reused, true)
}

// createdFile is one file a run wrote new pages into.
type createdFile struct {
	path  string
	bytes int64
}

// createdFiles are the files r created pages in, with their bytes.
func createdFiles(r *record.Record) []createdFile {
	page := int64(4096)
	if r.Host.PageSize > 0 {
		page = int64(r.Host.PageSize)
	}
	var out []createdFile
	for _, f := range r.Files {
		if f.PagesCreated == 0 || f.NameCut || !strings.HasPrefix(f.Path, "/") {
			continue
		}
		out = append(out, createdFile{path: path.Clean(f.Path), bytes: int64(f.PagesCreated) * page})
	}
	return out
}

// volatileRoots are trees whose contents do not outlive a reboot: a
// directory there is no cache worth keeping, whatever it holds.
var volatileRoots = []string{"/tmp", "/dev/shm", "/run"}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || (dir != "" && strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/"))
}

// groupKey is the directory that groups p's candidates: the first
// directory below the cache home, else below the home. Empty when p is
// outside both, in a volatile tree, or directly in one of them.
func groupKey(p, home string) string {
	for _, v := range volatileRoots {
		if under(p, v) {
			return ""
		}
	}
	if home == "" || home == "/" {
		return ""
	}
	for _, root := range []string{path.Join(home, ".cache"), home} {
		if !under(p, root) || p == root {
			continue
		}
		first, rest, ok := strings.Cut(strings.TrimPrefix(p, root+"/"), "/")
		if !ok || rest == "" {
			return "" // a file directly in the root names no directory
		}
		return path.Join(root, first)
	}
	return ""
}

// knownRoot reports whether p is in a cache the record's registry knew.
func knownRoot(r *record.Record, p string) bool {
	if r.JIT == nil {
		return false
	}
	for _, c := range r.JIT.Caches {
		if c.Root != "" && !strings.Contains(c.Root, "*") && under(p, path.Clean(c.Root)) {
			return true
		}
	}
	return false
}

// candidateDirs groups files by directory and keeps each group of at
// least CandidateMinBytes, named by the deepest directory holding all
// its files.
func candidateDirs(r *record.Record, files []createdFile, reused bool) []CacheCandidate {
	groups := map[string][]createdFile{}
	for _, f := range files {
		if knownRoot(r, f.path) {
			continue
		}
		if k := groupKey(f.path, path.Clean(r.User.Home)); k != "" {
			groups[k] = append(groups[k], f)
		}
	}
	var out []CacheCandidate
	for _, g := range groups {
		c := CacheCandidate{Dir: commonDir(g), Files: len(g), Reused: reused}
		for _, f := range g {
			c.CreatedBytes += f.bytes
		}
		if c.CreatedBytes < CandidateMinBytes {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y CacheCandidate) int {
		return cmp.Or(cmp.Compare(y.CreatedBytes, x.CreatedBytes), strings.Compare(x.Dir, y.Dir))
	})
	return out
}

// commonDir is the deepest directory holding every file of g.
func commonDir(g []createdFile) string {
	dir := path.Dir(g[0].path)
	for _, f := range g[1:] {
		for !under(f.path, dir) {
			dir = path.Dir(dir)
		}
	}
	return dir
}

// Action is the candidate as a next step: no saving is claimed, since
// the record cannot tell what a run without the directory would pay.
func (c CacheCandidate) Action() Action {
	return Action{Kind: KindCandidate, Finding: c}
}
