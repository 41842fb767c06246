package advice

import (
	"path"

	"github.com/coldtrace/coldtrace/record"
)

// Reasons a cache missed.
const (
	// KeyChanged: the cache held entries, the run looked them up and none
	// matched (or it found them and wrote them again).
	KeyChanged = "key changed"
	// MovedRoot: the run used another root than the one holding the
	// entries (HOME, XDG or an environment variable moved it), or the
	// same entries were filed under another directory.
	MovedRoot = "moved root"
	// Cold: nothing to find; a first run.
	Cold = "cold"
)

// CacheMiss says why one cache's lookups missed.
type CacheMiss struct {
	Cache     string `json:"cache"`
	Framework string `json:"framework,omitempty"`
	Root      string `json:"root"`
	Reason    string `json:"reason"`
	// Lookups, Misses, Stale: this run's counts; Present is what the
	// root held that this run did not write (bytes).
	Lookups uint64 `json:"lookups"`
	Misses  uint64 `json:"misses"`
	Stale   uint64 `json:"stale,omitempty"`
	Present int64  `json:"present_bytes,omitempty"`
	// Via is what made Root this run's root: a variable of the traced
	// process, or "default" (HOME or XDG_CACHE_HOME).
	Via string `json:"via,omitempty"`
	// EntriesAt are other roots of the same cache that hold entries: the
	// registry's defaults under the user's HOME and XDG directories
	// (readable by the command's user when the run ended), and roots an
	// earlier record (the baseline) wrote entries in.
	EntriesAt []EntriesAt `json:"entries_at,omitempty"`
	// KeyIncludes says what the framework's key includes, for a key
	// that changed (which part changed is not known).
	KeyIncludes string `json:"key_includes,omitempty"`
	// ExportVar and ExportValue point the cache back at EntriesAt[0]
	// (a moved root): the variable and value its framework reads; empty
	// when none is known or safe to print.
	ExportVar   string `json:"-"`
	ExportValue string `json:"-"`
	// Sentence is filled in by report/words.
	Sentence string `json:"sentence"`
	// Action is the next step this supports, when one does.
	Action *Action `json:"-"`
}

// EntriesAt is another root of a cache that holds entries.
type EntriesAt struct {
	Path  string `json:"path"`
	Files int64  `json:"files,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// From says how it is known: "default location" (seen at the end of
	// this run) or "baseline record" (an earlier run wrote there).
	From string `json:"from"`
}

// Misses explains, for each cache whose lookups all missed, whether it
// held entries that no longer matched (a changed key) or was empty.
// Caches with hits are left out: they worked.
func Misses(r *record.Record) []CacheMiss { return MissesWith(r, nil) }

// MissesWith is Misses with an earlier record: a root where it wrote
// entries of the same cache, other than this run's, counts as a root
// that holds them.
func MissesWith(r *record.Record, baseline *record.Record) []CacheMiss {
	if r.JIT == nil {
		return nil
	}
	var out []CacheMiss
	for _, c := range r.JIT.Caches {
		if c.Misses == 0 || c.Hits > 0 || !compiles(c) {
			continue
		}
		m := CacheMiss{Cache: c.Name, Framework: c.Framework, Root: c.Root, Lookups: c.Lookups, Misses: c.Misses, Stale: c.EntriesStale, Via: c.Via}
		if c.SizeBytes > int64(c.BytesWritten) {
			m.Present = c.SizeBytes - int64(c.BytesWritten)
		}
		m.EntriesAt = entriesAt(c, baseline)
		switch {
		case len(m.EntriesAt) > 0 && c.EntriesStale == 0 && m.Present == 0:
			m.Reason = MovedRoot
			if a, ok := keepAt(c, m.EntriesAt[0].Path); ok && c.CompileNS > 0 && ShellName(a.Var) && PlainText(a.Value) {
				m.ExportVar, m.ExportValue = a.Var, a.Value
				m.Action = &Action{SavesNS: c.CompileNS, Finding: m}
			}
		case m.Present > 0 && c.EntriesStale == 0 && c.Lookups == 0:
			// Entries were there and no lookup of this run was seen: its
			// misses are writes (pip refreshes an index page it always
			// revalidates), and its hits may be unseen (a weights
			// cache's small files, without the path syscalls). Nothing
			// says its key changed.
			continue
		case c.EntriesStale > 0 || m.Present > 0:
			m.Reason = KeyChanged
			m.KeyIncludes = keyOf(c)
			if c.CompileNS > 0 {
				m.Action = &Action{SavesNS: c.CompileNS, Finding: m}
			}
		default:
			m.Reason = Cold
		}
		out = append(out, m)
	}
	return out
}

// entriesAt lists the other roots of c that hold entries: the default
// locations the trace found (c.OtherRoots), then the roots where the
// baseline wrote entries of the same cache.
func entriesAt(c record.Cache, baseline *record.Record) []EntriesAt {
	var out []EntriesAt
	seen := map[string]bool{c.Root: true}
	for _, o := range c.OtherRoots {
		if !seen[o.Path] {
			seen[o.Path] = true
			out = append(out, EntriesAt{Path: o.Path, Files: o.Files, Bytes: o.SizeBytes, From: "default location"})
		}
	}
	if baseline == nil || baseline.JIT == nil {
		return out
	}
	for _, b := range baseline.JIT.Caches {
		if b.Name != c.Name || b.EntriesWritten == 0 || seen[b.Root] {
			continue
		}
		seen[b.Root] = true
		out = append(out, EntriesAt{Path: b.Root, Files: int64(b.EntriesWritten), Bytes: int64(b.BytesWritten), From: "baseline record"})
	}
	return out
}

// keyOf is what c's framework puts in its key: the registry's words the
// record carries, else (older records) the built-in hint.
func keyOf(c record.Cache) string {
	if c.KeyIncludes != "" {
		return c.KeyIncludes
	}
	return keyHint(c.Framework)
}

// compiles says whether a cache's misses are compiles (not downloads):
// its compile time is the cost of a miss.
func compiles(c record.Cache) bool { return c.CompileNS > 0 || c.EntriesWritten > 0 }

// CacheChange is what happened to one cache between two runs A and B.
type CacheChange struct {
	Cache  string `json:"cache"`
	Reason string `json:"reason"`
	// RootA and RootB are the roots the two runs used, with what decided
	// them.
	RootA string `json:"root_a"`
	RootB string `json:"root_b"`
	ViaA  string `json:"via_a,omitempty"`
	ViaB  string `json:"via_b,omitempty"`
	// Unused are entries A wrote that B never looked up; Foreign are B's
	// misses under names A never wrote; Stale are A's entries B found and
	// wrote again.
	Unused  int `json:"unused"`
	Foreign int `json:"foreign"`
	Stale   int `json:"stale"`
	// Framework names the cache for people; WrittenA are the entries A
	// wrote and MissesB B's misses; MovedDir are B's misses under names
	// A wrote in another directory; KeyIncludes what the framework's
	// key includes.
	Framework   string `json:"-"`
	WrittenA    uint64 `json:"-"`
	MissesB     uint64 `json:"-"`
	MovedDir    int    `json:"-"`
	KeyIncludes string `json:"-"`
	// Sentence is filled in by report/words.
	Sentence string `json:"sentence"`
}

// Compare explains, for each cache B missed in, whether A's entries were
// there to be used: a root that moved, entries filed under another
// directory (a moved program), or a key that changed.
func Compare(a, b *record.Record) []CacheChange {
	if a.JIT == nil || b.JIT == nil {
		return nil
	}
	var out []CacheChange
	for _, cb := range b.JIT.Caches {
		if cb.Misses == 0 {
			continue
		}
		ca, ok := sameCache(a.JIT.Caches, cb)
		if !ok || ca.EntriesWritten == 0 {
			continue // A wrote nothing there: B's misses are not A's loss
		}
		ch := CacheChange{Cache: cb.Name, RootA: ca.Root, RootB: cb.Root, ViaA: ca.Via, ViaB: cb.Via,
			Framework: cb.Framework, WrittenA: ca.EntriesWritten, MissesB: cb.Misses, KeyIncludes: keyHint(cb.Framework)}
		if ca.Root != cb.Root {
			ch.Reason = MovedRoot
			ch.Unused = len(ca.WrittenKeys)
			ch.Foreign = len(cb.MissedKeys)
			out = append(out, ch)
			continue
		}
		written := set(ca.WrittenKeys)
		looked := set(cb.MissedKeys, cb.StaleKeys, cb.HitKeys)
		for k := range written {
			if !looked[k] {
				ch.Unused++
			}
		}
		stale := set(cb.StaleKeys)
		for k := range written {
			if stale[k] {
				ch.Stale++
			}
		}
		bases := map[string]bool{}
		for k := range written {
			bases[path.Base(k)] = true
		}
		for _, k := range cb.MissedKeys {
			if !written[k] {
				ch.Foreign++
				if bases[path.Base(k)] {
					ch.MovedDir++
				}
			}
		}
		switch {
		case ch.Stale > 0:
			ch.Reason = KeyChanged
		case ch.MovedDir > 0:
			ch.Reason = MovedRoot
		case ch.Foreign > 0 && ch.Unused > 0:
			ch.Reason = KeyChanged
		default:
			continue
		}
		out = append(out, ch)
	}
	return out
}

// sameCache finds the cache of A that is b's: the same name.
func sameCache(cs []record.Cache, b record.Cache) (record.Cache, bool) {
	var best record.Cache
	found := false
	for _, c := range cs {
		if c.Name != b.Name {
			continue
		}
		if c.Root == b.Root {
			return c, true
		}
		if !found || c.EntriesWritten > best.EntriesWritten {
			best, found = c, true
		}
	}
	return best, found
}

func set(lists ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			m[s] = true
		}
	}
	return m
}
