// Package outlook predicts what the next run will find, from the page
// cache and the kernel caches as they are now: how much of the files a
// run read is cached, which of the caches its run used, and so whether
// the next run will be warm or cold and how long reading the rest from
// disk will take. It is the model behind `coldtrace status`; the words
// are report/status's.
package outlook

import (
	"path/filepath"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/coldrun"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// WarmShare: a run whose files are cached but for this share is warm.
const WarmShare = 0.01

// The states of a prediction.
const (
	Warm    = "warm"
	Cold    = "cold"
	Unknown = "unknown" // the kernel would not tell this user
)

// Totals sum the files' sizes and what of them is cached.
type Totals struct {
	Files        int   `json:"files"`
	SizeBytes    int64 `json:"size_bytes"`
	CachedBytes  int64 `json:"cached_bytes"`
	UnknownFiles int   `json:"unknown_files"`
	UnknownBytes int64 `json:"unknown_bytes"`
}

// Sum totals files.
func Sum(files []residency.File) Totals {
	var t Totals
	for _, f := range files {
		t.Files++
		t.SizeBytes += f.Size
		t.CachedBytes += f.CachedBytes
		if !f.Known {
			t.UnknownFiles++
			t.UnknownBytes += f.Size
		}
	}
	return t
}

// Prediction is what the next run will find.
type Prediction struct {
	// State is Warm, Cold or Unknown (the kernel would not say).
	State        string  `json:"state"`
	MissingBytes int64   `json:"missing_bytes"`
	DiskRate     float64 `json:"disk_rate_bytes_per_s,omitempty"`
	// ETANS is the time to read MissingBytes at DiskRate.
	ETANS int64 `json:"eta_ns,omitempty"`
	// Sentence says it in words (report/status.Sentence).
	Sentence string `json:"sentence"`
}

// Predict judges totals: warm when all but WarmShare of what this user
// can see is cached, unknown when it can see none of it, else cold, with
// the time to read the rest at rate (bytes per second of disk-read time;
// 0 when not known).
func Predict(t Totals, rate float64) *Prediction {
	p := &Prediction{DiskRate: rate}
	known := t.SizeBytes - t.UnknownBytes
	p.MissingBytes = known - t.CachedBytes
	switch {
	case t.Files == 0:
		p.State = Warm
	case t.UnknownFiles == t.Files:
		p.State = Unknown
	case float64(p.MissingBytes) <= WarmShare*float64(known):
		p.State = Warm
	default:
		p.State = Cold
		if rate > 0 {
			p.ETANS = int64(float64(p.MissingBytes) / rate * 1e9)
		}
	}
	return p
}

// RecordRoots are the roots of the caches rec's run used, to survey
// beside the registry's: in-tree caches (no one root to look at) and a
// cold run's fresh caches (removed, and no run after it uses them) left
// out. byName maps each cache's name to its roots, for RecordCaches.
func RecordRoots(rec *record.Record) (roots []registry.Root, byName map[string][]string) {
	byName = map[string][]string{}
	if rec == nil || rec.JIT == nil {
		return nil, byName
	}
	for _, c := range rec.JIT.Caches {
		if !filepath.IsAbs(c.Root) || coldrun.InFreshCaches(rec.MadeCold, c.Root) {
			continue
		}
		byName[c.Name] = append(byName[c.Name], c.Root)
		spec := registry.UserSpec(c.Name, c.Root)
		roots = append(roots, registry.Root{Spec: &spec, Path: c.Root, Via: "record"})
	}
	return roots, byName
}

// RecordCaches are the surveyed caches the record's run used (byName
// from RecordRoots), each once.
func RecordCaches(caches []kcache.Cache, byName map[string][]string) []kcache.Cache {
	var out []kcache.Cache
	seen := map[string]bool{}
	for _, c := range caches {
		for _, root := range byName[c.Name] {
			if c.Root == root && !seen[c.Name+"\x00"+c.Root] {
				seen[c.Name+"\x00"+c.Root] = true
				out = append(out, c)
			}
		}
	}
	return out
}
