package advice

import (
	"cmp"
	"path/filepath"
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// DownloadStall is a stretch of a download in which nothing arrived, or
// in which it arrived at under stallSlowShare of its median rate: the
// long tail of "99% and then KB/s". Its times are the run's, from the
// download's polls: a silence runs from half an interval before the
// last poll that saw data to half an interval before the next poll that
// did, each bound within half a polling interval of the true one; a
// trickle runs from the last poll at full rate to its last slow poll.
type DownloadStall struct {
	// Download is what the download is known by: its destination's name,
	// else its path, else "" (the body stayed in memory).
	Download string `json:"download,omitempty"`
	// Connection is the stalled connection's place in the download's
	// connections, from 1, when it stalled while the others went on; 0
	// when the whole download stalled.
	Connection int    `json:"connection,omitempty"`
	Host       string `json:"host"`
	StartNS    int64  `json:"start_ns"`
	LengthNS   int64  `json:"length_ns"`
	// Slow is set when data still trickled in (under stallSlowShare of
	// the median rate) rather than none at all; BytesDuring is what did.
	Slow        bool   `json:"slow,omitempty"`
	BytesBefore uint64 `json:"bytes_before"`
	BytesDuring uint64 `json:"bytes_during,omitempty"`
	BytesAfter  uint64 `json:"bytes_after"`
	// AfterShare is BytesAfter over the download's bytes (the
	// connection's, for a connection's stall).
	AfterShare float64 `json:"after_share"`
	// Connections is how many connections the download had.
	Connections int `json:"-"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// The stall rule (docs/attribution.md): nothing received for
// max(stallMinNS, stallGapFactor × the median gap between polls with
// data), or a rate under stallSlowShare of the median (the rate its
// median byte arrived at) for stallMinNS.
const (
	stallMinNS     = 5e9
	stallGapFactor = 20
	stallSlowShare = 0.05
	maxStalls      = 10
	// stallConnBytes is the least one connection of several receives
	// for its own stalls to be looked for.
	stallConnBytes = 1 << 20
)

// overlaps says whether s overlaps one of the download's own stalls:
// those say it already.
func overlaps(s Stall, whole []Stall) bool {
	for _, w := range whole {
		if s.StartNS < w.StartNS+w.LengthNS && w.StartNS < s.StartNS+s.LengthNS {
			return true
		}
	}
	return false
}

// Stalls finds the stalls of r's downloads, longest first, ten at most.
func Stalls(r *record.Record) []DownloadStall {
	var out []DownloadStall
	for _, d := range r.Downloads {
		whole := StallsOf(d.Samples, d.StartNS, r.IntervalNS)
		for _, s := range whole {
			out = append(out, describeStall(d, s, 0))
		}
		for i, c := range d.Connections {
			if c.Bytes < stallConnBytes {
				continue
			}
			for _, s := range StallsOf(c.Samples, c.StartNS, r.IntervalNS) {
				if !overlaps(s, whole) {
					out = append(out, describeStall(d, s, i+1))
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b DownloadStall) int { return cmp.Compare(b.LengthNS, a.LengthNS) })
	if len(out) > maxStalls {
		out = out[:maxStalls]
	}
	return out
}

// Stall is one stretch a progress series stalled in: [StartNS,
// StartNS+LengthNS), the bytes polled before, during and after it.
type Stall struct {
	StartNS, LengthNS     int64
	Before, During, After uint64
	Slow                  bool
}

// StallsOf applies the stall rule to a download's bytes per poll with
// data (record.Download.Samples), in time order; startNS is its first
// byte and intervalNS the polling period (0: unknown).
func StallsOf(samples []record.DownloadSample, startNS, intervalNS int64) []Stall {
	if len(samples) < 2 {
		return nil
	}
	gaps := make([]int64, len(samples))
	rates := make([]weighted, 0, len(samples))
	prev := startNS
	for i, s := range samples {
		gaps[i] = s.EndNS - prev
		prev = s.EndNS
		if gaps[i] > 0 {
			rates = append(rates, weighted{float64(s.Bytes) / float64(gaps[i]), s.Bytes})
		}
	}
	limit := max(int64(stallMinNS), stallGapFactor*medianInt(gaps[1:]))
	slowRate := stallSlowShare * byteMedian(rates)
	var total uint64
	for _, s := range samples {
		total += s.Bytes
	}
	var out []Stall
	var before uint64
	for i := 0; i < len(samples); i++ {
		if i > 0 && gaps[i] >= limit {
			// Its last byte before came within the interval before the
			// poll that saw it, its first byte after within the interval
			// before this poll: both bounds are taken at the middle.
			start := samples[i-1].EndNS - max(intervalNS, 0)/2
			if i > 1 {
				start = max(start, samples[i-2].EndNS)
			}
			out = append(out, Stall{StartNS: start, LengthNS: samples[i].EndNS - max(intervalNS, 0)/2 - start, Before: before, After: total - before})
			before += samples[i].Bytes
			continue
		}
		j, during := i, uint64(0)
		for j < len(samples) && gaps[j] > 0 && float64(samples[j].Bytes)/float64(gaps[j]) < slowRate && (j == i || gaps[j] < limit) {
			during += samples[j].Bytes
			j++
		}
		if j > i && i > 0 && samples[j-1].EndNS-samples[i-1].EndNS >= stallMinNS {
			start := samples[i-1].EndNS
			out = append(out, Stall{StartNS: start, LengthNS: samples[j-1].EndNS - start, Before: before, During: during,
				After: total - before - during, Slow: true})
			before += during
			i = j - 1
			continue
		}
		before += samples[i].Bytes
	}
	return out
}

// describeStall says what s cost download d.
func describeStall(d record.Download, s Stall, conn int) DownloadStall {
	host, total := d.Host, d.Bytes
	if host == "" {
		host = d.Peer
	}
	if conn > 0 {
		c := d.Connections[conn-1]
		host, total = cmp.Or(c.Host, c.Peer), c.Bytes
	}
	name := d.Name
	if name == "" && d.Path != "" {
		name = filepath.Base(d.Path)
	}
	ds := DownloadStall{Download: name, Connection: conn, Host: host, StartNS: s.StartNS, LengthNS: s.LengthNS, Slow: s.Slow,
		BytesBefore: s.Before, BytesDuring: s.During, BytesAfter: s.After}
	if total > 0 {
		ds.AfterShare = float64(s.After) / float64(total)
	}
	ds.Connections = len(d.Connections)
	ds.Action = &Action{SavesNS: s.LengthNS, Finding: ds}
	return ds
}

func medianInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// weighted is a poll's rate and the bytes it saw.
type weighted struct {
	rate  float64
	bytes uint64
}

// byteMedian is the rate at which the median byte arrived: a trickle
// of many polls with little data does not pull it down.
func byteMedian(v []weighted) float64 {
	s := slices.Clone(v)
	slices.SortFunc(s, func(a, b weighted) int { return cmp.Compare(a.rate, b.rate) })
	var total, seen uint64
	for _, w := range s {
		total += w.bytes
	}
	for _, w := range s {
		seen += w.bytes
		if 2*seen >= total {
			return w.rate
		}
	}
	return 0
}
