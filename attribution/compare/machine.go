package compare

import (
	"slices"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// The kinds of MachineChange.
const (
	// MachineReread: one run read File from disk again after its pages
	// were evicted during it (Cause says who: its memory limit, memory
	// pressure, another process); the other did not, or much less.
	MachineReread = "reread"
	// MachineEvictedBy: a process outside the run, or DAMON (Evictor),
	// evicted Bytes of File during one run only.
	MachineEvictedBy = "evicted_by"
	// MachineSharedRead: in one run only, Bytes of File came from disk
	// through a process outside it (Inserter) while the run waited.
	MachineSharedRead = "shared_read"
	// MachineContention: one run waited for CPUs that other processes or
	// other guests held; the other did not.
	MachineContention = "contention"
)

// MachineChange is a cause of the machine (memory, other processes, the
// hypervisor) present in one run and not in the other: a difference of
// wall time that no cache explains. Side is the run it happened in ("A"
// or "B"); the A/B fields give both runs' values.
type MachineChange struct {
	Kind string `json:"kind"`
	Side string `json:"side"`
	File string `json:"file,omitempty"`

	// MachineReread: each run's bytes of File from disk and the times
	// its size they make (0 when the size is unknown), and the cause in
	// the run that read it again.
	ABytesFromDisk uint64                   `json:"a_bytes_from_disk,omitempty"`
	BBytesFromDisk uint64                   `json:"b_bytes_from_disk,omitempty"`
	AFactor        float64                  `json:"a_factor,omitempty"`
	BFactor        float64                  `json:"b_factor,omitempty"`
	Cause          *attribution.MemoryCause `json:"cause,omitempty"`

	// MachineEvictedBy and MachineSharedRead.
	Bytes    uint64           `json:"bytes,omitempty"`
	Evictor  *record.Evictor  `json:"evictor,omitempty"`
	Inserter *record.Inserter `json:"inserter,omitempty"`

	// MachineContention: each run's run-queue wait, and what the
	// contended run's machine did meanwhile.
	ARunQueueNS int64                   `json:"a_runqueue_ns,omitempty"`
	BRunQueueNS int64                   `json:"b_runqueue_ns,omitempty"`
	Contention  *attribution.Contention `json:"contention,omitempty"`
}

// A re-read is a difference when the other run read the file again at
// most this share as much.
const rereadOtherShare = 0.5

// machineChanges finds the machine causes one run had and the other did
// not: files read again after eviction, evictions by others, reads
// shared with other processes, and waits for CPUs.
func machineChanges(a, b *record.Record, ra, rb *attribution.Result) []MachineChange {
	var out []MachineChange
	out = append(out, rereads(a, b, ra, rb)...)
	out = append(out, noteChanges(ra, rb)...)
	if c := contentionChange(a, b, ra, rb); c != nil {
		out = append(out, *c)
	}
	return out
}

func pageSize(r *record.Record) uint64 {
	if r.Host.PageSize <= 0 {
		return 4096
	}
	return uint64(r.Host.PageSize)
}

// rereads compares each run's memory cause (the file it read again the
// most) with the same file in the other run.
func rereads(a, b *record.Record, ra, rb *attribution.Result) []MachineChange {
	var out []MachineChange
	for _, s := range []struct {
		side       string
		this, that *record.Record
		res        *attribution.Result
	}{{"A", a, b, ra}, {"B", b, a, rb}} {
		m := s.res.Verdict.Memory
		if m == nil {
			continue
		}
		other := fileByName(s.that, m.File)
		var otherReread, otherMissed uint64
		if other != nil {
			otherReread, otherMissed = other.PagesReread*pageSize(s.that), other.PagesMissed*pageSize(s.that)
		}
		if float64(otherReread) > rereadOtherShare*float64(m.RereadBytes) {
			continue // both runs read it again: not a difference
		}
		cause := *m
		c := MachineChange{Kind: MachineReread, Side: s.side, File: m.File, Cause: &cause}
		thisBytes, thisFactor := m.FromDiskBytes, m.Factor
		otherFactor := factor(other, otherMissed)
		if s.side == "A" {
			c.ABytesFromDisk, c.BBytesFromDisk, c.AFactor, c.BFactor = thisBytes, otherMissed, thisFactor, otherFactor
		} else {
			c.ABytesFromDisk, c.BBytesFromDisk, c.AFactor, c.BFactor = otherMissed, thisBytes, otherFactor, thisFactor
		}
		out = append(out, c)
	}
	return out
}

// factor is bytes from disk over the file's size, or over the pages it
// read once when the size is unknown.
func factor(f *record.File, fromDisk uint64) float64 {
	switch {
	case f == nil:
		return 0
	case f.SizeBytes > 0:
		return float64(fromDisk) / float64(f.SizeBytes)
	case f.PagesMissed > f.PagesReread:
		return float64(f.PagesMissed) / float64(f.PagesMissed-f.PagesReread)
	}
	return 0
}

func fileByName(r *record.Record, name string) *record.File {
	for i := range r.Files {
		if r.Files[i].Name() == name {
			return &r.Files[i]
		}
	}
	return nil
}

// noteChanges turns the runs' shared-read and evicted-by notes into
// changes when the other run has no note of that kind for the file.
func noteChanges(ra, rb *attribution.Result) []MachineChange {
	type key struct {
		kind attribution.NoteKind
		path string
	}
	has := func(res *attribution.Result) map[key]bool {
		m := map[key]bool{}
		for _, n := range res.Notes {
			m[key{n.Kind, n.Path}] = true
		}
		return m
	}
	inA, inB := has(ra), has(rb)
	var out []MachineChange
	for _, s := range []struct {
		side  string
		res   *attribution.Result
		other map[key]bool
	}{{"A", ra, inB}, {"B", rb, inA}} {
		for _, n := range s.res.Notes {
			if s.other[key{n.Kind, n.Path}] {
				continue
			}
			switch {
			case n.Kind == attribution.NoteSharedRead && n.Inserter != nil:
				in := *n.Inserter
				out = append(out, MachineChange{Kind: MachineSharedRead, Side: s.side, File: n.Path, Bytes: n.Bytes, Inserter: &in})
			case n.Kind == attribution.NoteEvictedBy && n.Evictor != nil:
				e := *n.Evictor
				out = append(out, MachineChange{Kind: MachineEvictedBy, Side: s.side, File: n.Path, Bytes: n.Bytes, Evictor: &e})
			}
		}
	}
	return out
}

// contentionChange is set when one run's verdict names contention and
// the other's does not.
func contentionChange(a, b *record.Record, ra, rb *attribution.Result) *MachineChange {
	ca, cb := ra.Verdict.Contention, rb.Verdict.Contention
	if (ca == nil) == (cb == nil) {
		return nil
	}
	c := &MachineChange{Kind: MachineContention, Side: "A", ARunQueueNS: runQueueNS(a), BRunQueueNS: runQueueNS(b)}
	named := ca
	if cb != nil {
		c.Side, named = "B", cb
	}
	cc := *named
	cc.Others = slices.Clone(named.Others)
	c.Contention = &cc
	return c
}

// runQueueNS is the traced threads' run-queue wait.
func runQueueNS(r *record.Record) int64 {
	var n int64
	for _, p := range r.Processes {
		n += p.RunQueueNS
	}
	return n
}
