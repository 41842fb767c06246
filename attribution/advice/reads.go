package advice

import (
	"sort"

	"github.com/coldtrace/coldtrace/record"
)

// FileRead is how one file was read from disk.
type FileRead struct {
	Path string `json:"path"`
	// ReadBytes and FaultBytes are the missed bytes that came in read
	// syscalls and in page faults (mmap).
	ReadBytes  uint64 `json:"read_bytes"`
	FaultBytes uint64 `json:"fault_bytes"`
	Order      string `json:"order,omitempty"`
	Misses     uint64 `json:"misses"`
	// MissNS is the mean time per miss; MBps the achieved rate
	// (bytes from disk over the time spent filling); BaselineMBps the
	// best sustained sequential rate on the same device (this run, else
	// the baseline record), 0 when none was seen.
	MissNS       int64   `json:"miss_ns"`
	MBps         float64 `json:"mb_per_s"`
	BaselineMBps float64 `json:"baseline_mb_per_s,omitempty"`
	FS           string  `json:"fs,omitempty"`
	Network      bool    `json:"network_fs,omitempty"`
	// Unordered is set when the file was read in an order that is not
	// sequential at a quarter of the device's sequential rate or less:
	// reading it in order would save the rest (Action).
	Unordered bool `json:"-"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// minReadNS is the least fill time a file needs to be listed: below it
// the way it was read does not matter to the run.
const minReadNS = 50e6

// minBaselineBytes is the least a sequential read must bring from disk
// to count as the device's sustained rate.
const minBaselineBytes = 8 << 20

// maxReads bounds the files listed.
const maxReads = 10

// Reads describes the files whose misses took time, largest first.
func Reads(r *record.Record, baseline *record.Record) []FileRead {
	best := bestSequential(r)
	if baseline != nil {
		for dev, v := range bestSequential(baseline) {
			if best[dev] == 0 {
				best[dev] = v
			}
		}
	}
	files := make([]record.File, 0, len(r.Files))
	for _, f := range r.Files {
		if f.Order != nil && fillNS(f) >= minReadNS {
			files = append(files, f)
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return fillNS(files[i]) > fillNS(files[j]) })
	if len(files) > maxReads {
		files = files[:maxReads]
	}
	var out []FileRead
	for _, f := range files {
		out = append(out, describe(f, best[f.Dev]))
	}
	return out
}

func fillNS(f record.File) int64 { return f.IOWaitNS + f.MissCPUNS }

func rateMBps(f record.File) float64 {
	ns := fillNS(f)
	if ns <= 0 {
		return 0
	}
	return float64(f.BytesFromDisk) / 1e6 / (float64(ns) / 1e9)
}

// bestSequential is, per device, the best rate of a file read
// sequentially with at least minBaselineBytes from disk.
func bestSequential(r *record.Record) map[uint32]float64 {
	best := map[uint32]float64{}
	for _, f := range r.Files {
		if f.Order.Order() != "sequential" || f.BytesFromDisk < minBaselineBytes {
			continue
		}
		if v := rateMBps(f); v > best[f.Dev] {
			best[f.Dev] = v
		}
	}
	return best
}

func describe(f record.File, baseline float64) FileRead {
	o := f.Order
	const page = 4096
	fr := FileRead{Path: f.Path, ReadBytes: o.ReadPages * page, FaultBytes: o.FaultPages * page, Order: o.Order(),
		Misses: o.Misses, MBps: rateMBps(f), BaselineMBps: baseline, FS: o.FS, Network: networkFS(o.FS)}
	if o.Misses > 0 {
		fr.MissNS = fillNS(f) / int64(o.Misses)
	}
	// A pattern that is not sequential at a quarter of the device's
	// sequential rate or less: reading it in order would save the rest.
	if fr.Order != "" && fr.Order != "sequential" && baseline > 0 && fr.MBps*4 <= baseline {
		seqNS := int64(float64(f.BytesFromDisk) / 1e6 / baseline * 1e9)
		fr.Unordered = true
		fr.Action = &Action{SavesNS: fillNS(f) - seqNS, Finding: fr}
	}
	return fr
}

// networkFS names the filesystems whose pages come over a network.
func networkFS(fs string) bool {
	switch fs {
	case "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "fuse.sshfs", "9p", "afs", "lustre", "glusterfs",
		"fuse.glusterfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "fuse.mountpoint-s3", "beegfs", "gpfs", "fuse":
		return true
	}
	return false
}
