package attribution

import (
	"math"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// The thresholds of the cold rule (docs/definitions.md, "Cold").
const (
	// coldReadMinBytes is the least a run must read from disk, of data a
	// rerun finds in the page cache, to be cold by its reads.
	coldReadMinBytes = 1 << 20
	// coldReadMinShare is the least share those bytes must be of what
	// the run accessed in files of at least coldLargeFile bytes: a run
	// that maps a warm 10 GiB model and reads 2 MiB of it cold is warm.
	coldReadMinShare = 0.10
	coldLargeFile    = 1 << 20
	// coldDownloadMinBytes is the least a run must download into files
	// that survive it to be cold by its downloads.
	coldDownloadMinBytes = 4 << 20
	// coldTimeShare decides by time what the record has no bytes for
	// (no page-cache file data, no JIT section).
	coldTimeShare = 0.10
)

// ColdBy is what happened in a run that a rerun would not repeat, by the
// cold rule: bytes read from disk that a rerun finds cached, bytes
// downloaded into files that survive, cache entries compiled. It decides
// the verdict's kind, whatever share of the wall time those took: a fast
// disk that read a whole model in 30 ms still made the run cold.
type ColdBy struct {
	// ReadBytes were read from disk into the page cache and not read
	// again after an eviction during the run (a rerun reads those
	// again); ReadNS is the disk_read time less the re-reads'.
	ReadBytes uint64 `json:"read_bytes"`
	ReadNS    int64  `json:"read_ns"`
	// AccessedBytes is what the run accessed in files of 1 MiB or more.
	AccessedBytes uint64 `json:"accessed_bytes"`
	// DownloadBytes went into files still there at the end of the run;
	// DownloadNS is those downloads' time in the breakdown.
	DownloadBytes uint64 `json:"download_bytes"`
	DownloadNS    int64  `json:"download_ns"`
	// Entries were written into caches a rerun looks in; CompileNS is
	// those caches' compile time.
	Entries   uint64 `json:"entries"`
	CompileNS int64  `json:"compile_ns"`
	// Read, Downloaded and Compiled say which part of the rule holds.
	Read       bool `json:"read"`
	Downloaded bool `json:"downloaded"`
	Compiled   bool `json:"compiled"`
	// ByTime is set when a part was decided by its share of the wall
	// time because the record has no bytes or entries for it.
	ByTime bool `json:"by_time,omitempty"`
}

// Cold reports whether any part of the rule holds.
func (c ColdBy) Cold() bool { return c.Read || c.Downloaded || c.Compiled }

// coldBy applies the cold rule to r and its result so far.
func coldBy(r *record.Record, res *Result) ColdBy {
	var c ColdBy
	coldReads(r, res, &c)
	coldDownloads(res, &c)
	coldCompiles(r, res, &c)
	return c
}

func coldReads(r *record.Record, res *Result, c *ColdBy) {
	ps := uint64(max(r.Host.PageSize, 1))
	if r.Host.PageSize <= 0 {
		ps = 4096
	}
	for _, f := range r.Files {
		if f.SizeBytes >= coldLargeFile {
			c.AccessedBytes += f.PagesAccessed * ps
		}
		if f.BytesFromDisk == 0 || f.PagesMissed == 0 || Recurring(f) {
			continue
		}
		again := min(f.PagesReread, f.PagesMissed)
		c.ReadBytes += f.BytesFromDisk - f.BytesFromDisk*again/f.PagesMissed
	}
	if row := res.Row(DiskRead); row != nil {
		c.ReadNS = max(row.NS-res.RereadNS-res.RecurringNS, 0)
	}
	switch {
	case len(r.Files) == 0:
		// No page-cache data: the disk time is all there is.
		c.Read = share(c.ReadNS, res.WallNS) >= coldTimeShare
		c.ByTime = c.ByTime || c.Read
	default:
		c.Read = c.ReadBytes >= coldReadMinBytes && float64(c.ReadBytes) >= coldReadMinShare*float64(c.AccessedBytes)
	}
}

func coldDownloads(res *Result, c *ColdBy) {
	row := res.Row(Download)
	if row == nil {
		return
	}
	for _, d := range row.Downloads {
		if d.Fate == FateMemory || d.Fate == FateDeleted {
			continue
		}
		c.DownloadBytes += d.Bytes
		c.DownloadNS += d.NS
	}
	c.Downloaded = c.DownloadBytes >= coldDownloadMinBytes
}

func coldCompiles(r *record.Record, res *Result, c *ColdBy) {
	if r.JIT == nil {
		// No JIT section: whether the compiles were kept is unknown.
		if row := res.Row(JITCompile); row != nil {
			c.CompileNS = row.NS
			c.Compiled = share(row.NS, res.WallNS) >= coldTimeShare
			c.ByTime = c.ByTime || c.Compiled
		}
		return
	}
	for _, k := range r.JIT.Caches {
		if k.EntriesWritten == 0 || weights(k) {
			continue
		}
		c.Entries += k.EntriesWritten
		c.CompileNS += k.CompileNS
	}
	c.Compiled = c.Entries > 0
	if row := res.Row(JITCompile); row != nil && c.Compiled && c.CompileNS == 0 {
		c.CompileNS = row.NS
	}
}

// Recurring reports whether f's reads come back on every run whatever
// the page cache holds: FUSE drops a file's cached pages when it is
// opened unless the filesystem keeps them (kernel_cache), which the
// mount table does not show, so every FUSE file counts as recurring —
// a rerun is never promised faster reads from it.
func Recurring(f record.File) bool {
	fs := f.FS
	if fs == "" && f.Order != nil {
		fs = f.Order.FS
	}
	return fs == "fuse" || fs == "fuseblk" || strings.HasPrefix(fs, "fuse.")
}

// fuseRecurringNS is the disk_read time of the Recurring files (less what
// rereadNS counts of them already).
func fuseRecurringNS(r *record.Record, disk *Row) int64 {
	if disk == nil {
		return 0
	}
	var ns float64
	for _, fe := range disk.Files {
		f := r.FileByID(fe.ID)
		if fe.ID < 0 || f == nil || !Recurring(*f) {
			continue
		}
		once := 1.0
		if fe.PagesMissed > 0 {
			once -= min(1, float64(fe.PagesReread)/float64(fe.PagesMissed))
		}
		ns += float64(fe.NS) * once
	}
	return int64(math.Round(ns))
}

// weights reports whether k holds downloaded files rather than compiled
// ones: the registry names such caches "… (weights)" (a test in
// trace/jit holds it to that), and their entries are downloads.
func weights(k record.Cache) bool {
	return strings.HasSuffix(k.Framework, "(weights)")
}

// label is the verdict's kind with what made the run cold and the time
// that took: the one wording text, JSON and diff print.
func label(v Verdict) string {
	if v.Kind != VerdictCold || v.ColdBy == nil {
		return string(v.Kind)
	}
	c := v.ColdBy
	var parts []string
	if c.Read {
		what := "read " + format.Bytes(c.ReadBytes) + " from disk"
		if c.ReadBytes == 0 {
			what = "read from disk"
		}
		parts = append(parts, what+" in "+format.Duration(c.ReadNS))
	}
	if c.Downloaded {
		parts = append(parts, "downloaded "+format.Bytes(c.DownloadBytes)+" in "+format.Duration(c.DownloadNS))
	}
	if c.Compiled {
		what := "compiled"
		switch c.Entries {
		case 0:
		case 1:
			what += " 1 cache entry"
		default:
			what += " " + strconv.FormatUint(c.Entries, 10) + " cache entries"
		}
		parts = append(parts, what+" in "+format.Duration(c.CompileNS))
	}
	return "cold (" + strings.Join(parts, "; ") + ")"
}
