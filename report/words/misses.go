package words

import (
	"cmp"
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// missSentence says why a cache's lookups all missed: its root moved,
// its key changed, or it was empty.
func missSentence(m advice.CacheMiss) string {
	name := cmp.Or(m.Framework, m.Cache)
	switch m.Reason {
	case advice.MovedRoot:
		o := m.EntriesAt[0]
		return fmt.Sprintf("%s cache: a different root: this run looked in %s (%s made it) and its %d lookups missed, while %s holds %s (%s): "+
			"HOME, XDG_CACHE_HOME or a variable moved the cache — not a cold cache", name, m.Root, viaWords(m.Via), m.Lookups,
			o.Path, holds(o), o.From)
	case advice.KeyChanged:
		held := fmt.Sprintf("held %s this run found and could not use", entries(m.Stale))
		if m.Stale == 0 {
			held = fmt.Sprintf("holds %s this run did not write", format.Bytes(uint64(max(m.Present, 0))))
		}
		return fmt.Sprintf("%s cache: the same root, every lookup missed: %s %s; the %d lookups of this run matched none: its key changed — "+
			"%s's key includes %s; one of them differs from the run that wrote the entries",
			name, m.Root, held, m.Lookups, name, m.KeyIncludes)
	}
	return fmt.Sprintf("%s cache %s was empty: a first run", name, m.Root)
}

// missAction points a moved cache back at its entries, or asks for a
// stable key.
func missAction(m advice.CacheMiss) string {
	name := cmp.Or(m.Framework, m.Cache)
	if m.Reason == advice.MovedRoot {
		return fmt.Sprintf("point the %s cache back at its entries: export %s=%s", name, m.ExportVar, advice.ShellQuote(m.ExportValue))
	}
	return fmt.Sprintf("keep the %s cache key stable between runs (it includes %s)", name, m.KeyIncludes)
}

// entries is "an entry" or "12 entries".
func entries(n uint64) string {
	if n == 1 {
		return "an entry"
	}
	return format.Counted(n, "entry", "entries")
}

// holds says what another root holds: files at the end of this run, or
// entries the baseline wrote.
func holds(o advice.EntriesAt) string {
	unit := "files"
	if o.From == "baseline record" {
		unit = "entries written"
	}
	return fmt.Sprintf("%d %s, %s", o.Files, unit, format.Bytes(uint64(max(o.Bytes, 0))))
}

// viaWords says what made a root: a variable, or the default.
func viaWords(v string) string {
	if v == "" || v == "default" {
		return "the default (HOME)"
	}
	return v
}

// changeSentence says what happened to a cache between runs A and B.
func changeSentence(ch advice.CacheChange) string {
	name := cmp.Or(ch.Framework, ch.Cache)
	switch {
	case ch.RootA != ch.RootB:
		var by string
		switch {
		case ch.ViaB != ch.ViaA:
			by = fmt.Sprintf("A's root came from %s, B's from %s", viaWords(ch.ViaA), viaWords(ch.ViaB))
		case ch.ViaB != "" && ch.ViaB != "default":
			by = ch.ViaB + " changed"
		default:
			by = "HOME or XDG_CACHE_HOME changed"
		}
		return fmt.Sprintf("%s: the root moved (%s): A wrote %d entries in %s, B looked in %s and missed %d — not a cold cache",
			name, by, ch.WrittenA, ch.RootA, ch.RootB, ch.MissesB)
	case ch.Stale > 0:
		return fmt.Sprintf("%s: B found %d of the entries A wrote and they did not match: the key changed — %s",
			name, ch.Stale, ch.KeyIncludes)
	case ch.MovedDir > 0:
		return fmt.Sprintf("%s: B missed %d entries under names A wrote in another directory (%d of A's entries unused): "+
			"the program or its sources moved, and the cache files entries by their location — not a cold cache",
			name, ch.MovedDir, ch.Unused)
	}
	return fmt.Sprintf("%s: A wrote %d entries B never looked up, and B missed under %d names A never wrote: the key changed — %s",
		name, ch.Unused, ch.Foreign, ch.KeyIncludes)
}
