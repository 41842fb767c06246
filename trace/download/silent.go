package download

import (
	"cmp"
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// silentFor is how long the connection went with nothing received after
// it was established: to its first byte, else to its close, else to
// endMono (the end of the run; 0: not yet known, counts as none).
func (c Conn) silentFor(endMono uint64) int64 {
	if c.EstablishedTS == 0 {
		return 0
	}
	end := c.FirstTS
	if end == 0 {
		end = cmp.Or(c.EndTS, endMono)
	}
	if end <= c.EstablishedTS {
		return 0
	}
	return int64(end - c.EstablishedTS)
}

// silentWaitShare is the least share of a silence its connecting thread
// spent in a plain wait (off CPU, neither in I/O nor the run queue) for
// the connection to count: a pooled connection
// opened ahead while the thread went on working is no wait.
const silentWaitShare = 0.5

// Silent are the connections that received nothing for
// record.SilentMinNS after they were established while the thread that
// opened them waited (silentWaitShare of the silence off CPU, neither in
// I/O nor the run queue), longest first. endMono is the run's end.
func Silent(conns []Conn, env Env, endMono uint64) []record.SilentConnection {
	var out []record.SilentConnection
	for _, c := range conns {
		d := c.silentFor(endMono)
		if d < record.SilentMinNS {
			continue
		}
		start := rel(c.EstablishedTS, env.StartMono)
		// A sample lists a thread only when it ran or waited on I/O or the
		// run queue: the rest of the silence it spent in a plain wait.
		busy := threadSum(env.Samples, env.IntervalNS, c.TID, start, start+d, func(t record.ThreadDelta) int64 {
			return t.CPUNS + t.IOWaitNS + t.RunQueueNS
		})
		wait := max(d-busy, 0)
		if float64(wait) < silentWaitShare*float64(d) {
			continue
		}
		out = append(out, record.SilentConnection{Peer: c.Peer.String(), Host: c.Host, HostFrom: c.HostFrom, PID: c.PID, TID: c.TID,
			StartNS: start, LengthNS: d, Received: c.FirstTS != 0, Bytes: c.Bytes, Closed: c.EndTS != 0,
			WaitNS: wait, Lookup: lookupOf(c, env.StartMono)})
	}
	slices.SortStableFunc(out, func(x, y record.SilentConnection) int { return cmp.Compare(y.LengthNS, x.LengthNS) })
	return out
}

// lookupOf is the getaddrinfo call that named c's peer, if one was seen.
func lookupOf(c Conn, startMono uint64) *record.Lookup {
	if c.Host == "" || c.GaiStart == 0 || c.GaiEnd < c.GaiStart {
		return nil
	}
	return &record.Lookup{Host: c.Host, StartNS: rel(c.GaiStart, startMono), LengthNS: int64(c.GaiEnd - c.GaiStart)}
}
