package compare

import (
	"cmp"
	"slices"

	"github.com/coldtrace/coldtrace/attribution"
)

// VerdictKind says how B's wall time compares with A's.
type VerdictKind string

// The comparison's verdict kinds.
const (
	// Same: within 2% (or 1 ms) of each other.
	Same VerdictKind = "same"
	// Faster: B took less time than A.
	Faster VerdictKind = "faster"
	// Slower: B took more time than A.
	Slower VerdictKind = "slower"
)

// Verdict says how much faster or slower B was and which categories made
// the difference, as data. With are the categories that moved the wall
// time the way it went (up to three, each at least 5% of the change);
// Against, the ones that went the other way (up to two, each at least
// 10%).
type Verdict struct {
	Kind    VerdictKind `json:"kind"`
	AWallNS int64       `json:"a_wall_ns"`
	BWallNS int64       `json:"b_wall_ns"`
	DeltaNS int64       `json:"delta_ns"`
	With    []Change    `json:"with,omitempty"`
	Against []Change    `json:"against,omitempty"`
	// Machine are causes of the machine one run had and the other did
	// not (re-reads after eviction, evictions by others, shared reads,
	// waits for CPUs): differences no cache explains.
	Machine []MachineChange `json:"machine,omitempty"`
}

// Change is one category's change with the evidence behind it: for
// disk_read, the files that became cached (less) or uncached (more), else
// both sides' bytes from disk and direct bytes; for jit_compile, the caches whose misses
// became hits (less) or grew (more), else compilers run a different number
// of times; for download, paths downloaded in only one run; for
// gpu_compute, the one GPU's mean utilisation on both sides.
type Change struct {
	Category attribution.Category `json:"category"`
	DeltaNS  int64                `json:"delta_ns"`

	Files          []string `json:"files,omitempty"`
	ABytesFromDisk uint64   `json:"a_bytes_from_disk,omitempty"`
	BBytesFromDisk uint64   `json:"b_bytes_from_disk,omitempty"`
	// A/BDirectBytes are both sides' direct reads, beside their bytes
	// from disk through the page cache: disk time a rerun pays again.
	ADirectBytes uint64 `json:"a_direct_bytes,omitempty"`
	BDirectBytes uint64 `json:"b_direct_bytes,omitempty"`

	Caches    []CacheChange    `json:"caches,omitempty"`
	Compilers []RunsChange     `json:"compilers,omitempty"`
	Downloads []DownloadChange `json:"downloads,omitempty"`
	GPU       *UtilChange      `json:"gpu,omitempty"`
}

// DownloadChange is a destination downloaded in only one of the runs:
// what it is known by, its bytes and download time in the run that
// fetched it, and the cache it landed in.
type DownloadChange struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
	NS    int64  `json:"ns"`
	Cache string `json:"cache,omitempty"`
}

// Less reports whether B spent less time in the category.
func (c Change) Less() bool { return c.DeltaNS < 0 }

// CacheChange is one cache behind a jit_compile change: Count of A's
// misses that were hits in B (less), or of B's extra misses (more).
type CacheChange struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// RunsChange is a compiler run a different number of times.
type RunsChange struct {
	Name  string `json:"name"`
	ARuns int    `json:"a_runs"`
	BRuns int    `json:"b_runs"`
}

// UtilChange is a GPU's mean utilisation in A and in B.
type UtilChange struct {
	AUtilMeanPct float64 `json:"a_util_mean_pct"`
	BUtilMeanPct float64 `json:"b_util_mean_pct"`
}

func (d *Diff) verdict() Verdict {
	delta := d.DeltaNS
	aw, bw := d.A.WallNS, d.B.WallNS
	v := Verdict{AWallNS: aw, BWallNS: bw, DeltaNS: delta}
	if absI(delta) <= max(max(aw, bw)/50, 1_000_000) {
		v.Kind = Same
		return v
	}
	dir := int64(1)
	v.Kind = Slower
	if delta < 0 {
		dir, v.Kind = -1, Faster
	}
	rows := slices.Clone(d.Breakdown)
	slices.SortStableFunc(rows, func(x, y Row) int { return cmp.Compare(absI(y.DeltaNS), absI(x.DeltaNS)) })
	for _, c := range rows {
		if c.DeltaNS == 0 {
			continue
		}
		if c.DeltaNS*dir > 0 && absI(c.DeltaNS)*20 >= absI(delta) && len(v.With) < 3 {
			v.With = append(v.With, d.change(c))
		} else if c.DeltaNS*dir < 0 && absI(c.DeltaNS)*10 >= absI(delta) && len(v.Against) < 2 {
			v.Against = append(v.Against, d.change(c))
		}
	}
	return v
}

// change gathers the evidence behind a category's change.
func (d *Diff) change(c Row) Change {
	ch := Change{Category: c.Category, DeltaNS: c.DeltaNS}
	less := c.DeltaNS < 0
	switch c.Category {
	case attribution.DiskRead:
		want := FileUncached
		if less {
			want = FileCached
		}
		for _, f := range d.Files {
			if f.Change == want {
				ch.Files = append(ch.Files, f.Path)
			}
		}
		if len(ch.Files) == 0 {
			for _, f := range d.Files {
				ch.ABytesFromDisk += f.ABytesFromDisk
				ch.BBytesFromDisk += f.BBytesFromDisk
				ch.ADirectBytes += f.ADirectBytes
				ch.BDirectBytes += f.BDirectBytes
			}
		}
	case attribution.JITCompile:
		for _, k := range d.Caches {
			switch {
			case less && k.BecameHits > 0:
				ch.Caches = append(ch.Caches, CacheChange{Name: k.Name, Count: k.BecameHits})
			case !less && k.BMisses > k.AMisses:
				ch.Caches = append(ch.Caches, CacheChange{Name: k.Name, Count: k.BMisses - k.AMisses})
			}
		}
		if len(ch.Caches) == 0 {
			for _, x := range d.Compilers {
				if x.Kind == "compiler" && x.ARuns != x.BRuns {
					ch.Compilers = append(ch.Compilers, RunsChange{Name: x.Name, ARuns: x.ARuns, BRuns: x.BRuns})
				}
				if len(ch.Compilers) == 2 {
					break
				}
			}
		}
	case attribution.Download:
		for _, x := range d.Downloads {
			switch {
			case less && x.ANS > 0 && x.BNS == 0:
				ch.Downloads = append(ch.Downloads, DownloadChange{Name: cmp.Or(x.Name, x.Path), Bytes: x.ABytes, NS: x.ANS, Cache: x.Cache})
			case !less && x.BNS > 0 && x.ANS == 0:
				ch.Downloads = append(ch.Downloads, DownloadChange{Name: cmp.Or(x.Name, x.Path), Bytes: x.BBytes, NS: x.BNS, Cache: x.Cache})
			}
		}
	case attribution.GPUCompute:
		if len(d.GPUs) == 1 {
			g := d.GPUs[0]
			ch.GPU = &UtilChange{AUtilMeanPct: g.AUtilMeanPct, BUtilMeanPct: g.BUtilMeanPct}
		}
	}
	return ch
}
