package download

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// The shared definition of a download (docs/definitions.md, "Download"):
// enough bytes on one connection, in large enough receives that RPC and
// keep-alive chatter stay out.
//
// The mean receive alone misses the commonest downloads: OpenSSL reads a
// TLS record's 5-byte header apart from its body (Python over HTTPS: 8.2
// KiB per receive) and wget reads 8 KiB at a time. A connection that
// received MinAsymmetry times what it sent is a download too: requests
// are small next to a file, while chatter and ping-pong answer in kind
// (HTTP keep-alive with 1 KB answers: 14 times).
//
// The mean receive alone would let a ping-pong of large messages through
// (64 KiB echoed back and forth has a 64 KiB mean receive): that clause
// also asks for MinMeanAsymmetry times more received than sent, which a
// conversation that answers in kind never reaches.
const (
	MinBytes         = record.DownloadMinBytes
	MinMeanReceive   = 16 << 10
	MinAsymmetry     = 64
	MinMeanAsymmetry = 4
)

// writeSlack is how long after a download's last byte a file written by
// its receiving thread still belongs to it: a client that buffers the
// body in memory writes it out right after. (The probe does not link
// writes later than this after the thread's latest receive:
// WRITE_SLACK_NS.)
const writeSlack = 1_000_000_000

// Conn is one TCP connection the traced process opened, as the kernel
// counted it. Times are CLOCK_MONOTONIC nanoseconds.
type Conn struct {
	// Sk and ID identify the connection: the socket's kernel address and
	// its connect time (the address may be reused by a later socket).
	Sk, ID   uint64
	PID, TID int32 // the connecting thread
	RxTID    int32 // the thread of the latest receive
	Peer     netip.AddrPort
	// Host is the name the process looked Peer up by just before it
	// connected, or "".
	Host     string
	FirstTS  uint64 // first byte received
	LastTS   uint64 // latest byte received
	Bytes    uint64
	Receives uint64
	Sent     uint64 // bytes sent
}

// IsDownload applies the shared definition.
func (c Conn) IsDownload() bool { return c.Bytes >= MinBytes && c.downloadShaped() }

// downloadShaped is the shared definition less its size: the traffic so
// far is a download's (large receives, or far more received than sent).
func (c Conn) downloadShaped() bool {
	if c.Receives == 0 {
		return false
	}
	large := c.Bytes/c.Receives >= MinMeanReceive && c.Bytes/MinMeanAsymmetry >= c.Sent
	return large || c.Bytes/MinAsymmetry >= c.Sent
}

// Write is one file written by a thread whose latest receive was on the
// connection (Sk, ID).
type Write struct {
	Sk, ID  uint64
	Dev     uint32 // kernel encoding: major<<20 | minor
	Ino     uint64
	Bytes   uint64 // pages added to the page cache, in bytes
	FirstTS uint64
	LastTS  uint64
}

// Env is what building the downloads needs from the rest of the run.
type Env struct {
	// StartMono is the monotonic time (ns) the command was released:
	// record times are relative to it.
	StartMono uint64
	// Locate names a written file: its path at the end of the run (after
	// a rename into place), the path it was written under when that
	// differs, and whether it is gone. A nil Locate leaves paths empty.
	Locate func(dev uint32, ino uint64) (path, writtenPath string, gone bool)
	// Samples and IntervalNS are the record's thread samples, from which
	// the receiving thread's time within each download is taken.
	Samples    []record.Sample
	IntervalNS int64
	// Progress is each connection's cumulative bytes as polled, in time
	// order, by connection.
	Progress map[ConnKey][]Progress
}

// ConnKey identifies a connection: its socket's kernel address and its
// connect time (the address may be reused by a later socket).
type ConnKey struct{ Sk, ID uint64 }

// Progress is a connection's cumulative bytes received at a poll.
type Progress struct {
	TS    uint64
	Bytes uint64
}

// Build turns the connections that qualify into the record's downloads,
// in the order they started, each with the files its receiving thread
// wrote.
func Build(conns []Conn, writes []Write, env Env) []record.Download {
	byConn := map[ConnKey][]Write{}
	for _, w := range writes {
		k := ConnKey{w.Sk, w.ID}
		byConn[k] = append(byConn[k], w)
	}
	var out []record.Download
	for _, c := range conns {
		if !c.IsDownload() {
			continue
		}
		d := record.Download{
			Bytes:     c.Bytes,
			StartNS:   rel(c.FirstTS, env.StartMono),
			EndNS:     rel(c.LastTS, env.StartMono),
			PID:       c.PID,
			TID:       c.RxTID,
			Peer:      c.Peer.String(),
			Host:      c.Host,
			ConnectNS: rel(c.ID, env.StartMono),
			Receives:  c.Receives,
			BytesSent: c.Sent,
		}
		for _, w := range byConn[ConnKey{c.Sk, c.ID}] {
			if w.FirstTS > c.LastTS+writeSlack || w.LastTS < c.FirstTS {
				continue
			}
			f := record.DownloadFile{Dev: w.Dev, Ino: w.Ino, BytesWritten: w.Bytes}
			if env.Locate != nil {
				f.Path, f.WrittenPath, f.Gone = env.Locate(w.Dev, w.Ino)
			}
			d.Files = append(d.Files, f)
		}
		slices.SortStableFunc(d.Files, func(x, y record.DownloadFile) int {
			return cmp.Or(cmp.Compare(y.BytesWritten, x.BytesWritten), cmp.Compare(x.Path, y.Path))
		})
		if len(d.Files) > 0 {
			d.Path = d.Files[0].Path
		}
		d.OnCPUNS, d.WaitNS = threadTime(env.Samples, env.IntervalNS, d.TID, d.StartNS, d.EndNS)
		d.Samples = samples(c, env.Progress[ConnKey{c.Sk, c.ID}], env.StartMono)
		out = append(out, d)
	}
	slices.SortStableFunc(out, func(x, y record.Download) int {
		return cmp.Or(cmp.Compare(x.StartNS, y.StartNS), cmp.Compare(x.Peer, y.Peer))
	})
	return out
}

// rel is a monotonic time relative to the run's start.
func rel(ts, start uint64) int64 {
	return int64(ts) - int64(start)
}

// threadTime sums tid's on-CPU time and its plain waits (off CPU, neither
// I/O wait nor run queue) within (start, end], each sample's share
// prorated by how much of its span lies inside. Samples are in time
// order; the first spans interval.
func threadTime(samples []record.Sample, interval int64, tid int32, start, end int64) (onCPU, wait int64) {
	if interval <= 0 || end <= start {
		return 0, 0
	}
	var cpu, other float64
	for i, s := range samples {
		// A sample spans from the one before it: one interval, or several
		// polls in a long run's coarsened timeline.
		from := s.EndNS - interval
		if i > 0 {
			from = samples[i-1].EndNS
		}
		lo, hi := max(from, start), min(s.EndNS, end)
		if hi <= lo || s.EndNS <= from {
			continue
		}
		frac := float64(hi-lo) / float64(s.EndNS-from)
		for _, t := range s.Threads {
			if t.TID == tid {
				cpu += frac * float64(t.CPUNS)
				other += frac * float64(t.OtherWaitNS)
			}
		}
	}
	return int64(cpu), int64(other)
}

// samples turns a connection's polled progress into bytes per interval,
// ending with what arrived after the last poll, at its last byte.
func samples(c Conn, progress []Progress, start uint64) []record.DownloadSample {
	var out []record.DownloadSample
	var seen uint64
	for _, p := range progress {
		if p.Bytes > seen && p.Bytes <= c.Bytes {
			// A poll's clock is read before the map: clamp to the span.
			ts := max(min(p.TS, c.LastTS), c.FirstTS)
			out = append(out, record.DownloadSample{EndNS: rel(ts, start), Bytes: p.Bytes - seen})
			seen = p.Bytes
		}
	}
	if c.Bytes > seen {
		out = append(out, record.DownloadSample{EndNS: rel(c.LastTS, start), Bytes: c.Bytes - seen})
	}
	return out
}
