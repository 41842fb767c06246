package jit

import (
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/registry"
)

// MaxKeys bounds the entry names kept per cache and kind in a record: a
// diff of two records needs the names to tell a changed key (B missed
// under names A never wrote) from a cache B never looked in, and a few
// thousand are enough to show which; a cache with 100,000 entries must
// not make the record that much larger.
const MaxKeys = 2000

// keySet is a bounded set of entry keys (paths below the root).
type keySet struct {
	set    map[string]bool
	capped bool
}

func (k *keySet) add(key string) {
	if k.set[key] {
		return
	}
	if len(k.set) >= MaxKeys {
		k.capped = true
		return
	}
	if k.set == nil {
		k.set = map[string]bool{}
	}
	k.set[key] = true
}

// remove takes key out: a hit found stale afterwards. A set that was
// capped stays capped (what was left out is not known).
func (k *keySet) remove(key string) { delete(k.set, key) }

func (k *keySet) sorted() []string {
	if len(k.set) == 0 {
		return nil
	}
	out := make([]string, 0, len(k.set))
	for s := range k.set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// entryKeys are the names of the entries a run missed, wrote, and found
// stale (read, then written again).
type entryKeys struct {
	missed, written, stale, hit keySet
}

func (k *entryKeys) capped() bool {
	return k.missed.capped || k.written.capped || k.stale.capped || k.hit.capped
}

// movedBy is the environment variable of the highest-precedence path of
// s: the one a user sets to put the cache elsewhere.
func movedBy(s registry.Spec) string {
	for _, p := range s.Paths {
		if strings.HasPrefix(p, "$") {
			v := p[1:]
			if i := strings.IndexByte(v, '/'); i >= 0 {
				v = v[:i]
			}
			return v
		}
	}
	return ""
}
