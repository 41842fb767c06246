package download

import (
	"cmp"
	"net/netip"
	"path"
	"slices"
	"strings"

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
	// Host is Peer's name: the one the process looked it up by just
	// before it connected, else the one its first bytes asked for (a TLS
	// server name, an HTTP Host header); "" for none. HostFrom says
	// which (record.HostFrom*).
	Host, HostFrom string
	// Stack is the connecting thread's Python stack id (bpf/include/
	// pywalk.h), 0 for none.
	Stack    uint64
	FirstTS  uint64 // first byte received
	LastTS   uint64 // latest byte received
	Bytes    uint64
	Receives uint64
	Sent     uint64 // bytes sent
	// EstablishedTS is when the handshake completed (0: never seen),
	// EndTS when it closed (0: still open at the end).
	EstablishedTS, EndTS uint64
	// GaiStart and GaiEnd bound the getaddrinfo call that named Host
	// (0: none seen).
	GaiStart, GaiEnd uint64
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
	Gen     uint32 // the inode's generation
	Bytes   uint64 // pages added to the page cache, in bytes
	FirstTS uint64
	LastTS  uint64
}

// key is the file w wrote.
func (w Write) key() FileKey { return FileKey{Dev: w.Dev, Ino: w.Ino, Gen: w.Gen} }

// fileKeyOf is the file a download wrote.
func fileKeyOf(f record.DownloadFile) FileKey { return FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen} }

// Located is a written file's names at the end of the run.
type Located struct {
	// Path is its name at the end of the run, in any directory, or its
	// first name when that could not be found.
	Path string
	// WrittenPath is the name it was first seen under, when that differs.
	WrittenPath string
	// Gone: it no longer existed. NameUnknown: it was renamed and its
	// final name could not be found.
	Gone, NameUnknown bool
}

// Env is what building the downloads needs from the rest of the run.
type Env struct {
	// StartMono is the monotonic time (ns) the command was released:
	// record times are relative to it.
	StartMono uint64
	// Locate names a written file. A nil Locate leaves paths empty.
	Locate func(FileKey) Located
	// Samples and IntervalNS are the record's samples: the receiving
	// threads' time within each download, and each file's pages created
	// per poll, by which the destination is matched.
	Samples    []record.Sample
	IntervalNS int64
	// Files are the record's files (Samples name them by ID) and
	// PageSize the size of their pages.
	Files    []record.File
	PageSize uint64
	// Progress is each connection's cumulative bytes as polled, in time
	// order, by connection.
	Progress map[ConnKey][]Progress
	// Polled are the tmpfs files' writes measured by their sizes
	// (tmpfs.go), matched as the page-cache files' are.
	Polled []written
	// Listed reports whether a process's open files were listed between
	// two times (ns from the start): when none of a download's
	// processes' were while it received, a tmpfs file it wrote and closed
	// meanwhile went unseen, and a body no file shows is "not seen", not
	// "kept in memory". Nil: every process counts as listed.
	Listed func(pid int32, from, to int64) bool
}

// ConnKey identifies a connection: its socket's kernel address and its
// connect time (the address may be reused by a later socket).
type ConnKey struct{ Sk, ID uint64 }

// Progress is a connection's cumulative bytes received at a poll.
type Progress struct {
	TS    uint64
	Bytes uint64
}

// Build turns the connections into the record's downloads, one per
// destination, in the order they started: the connections that fed it,
// the file its body went to, and the files its receiving threads wrote.
func Build(conns []Conn, writes []Write, env Env) []record.Download {
	byConn := map[ConnKey][]Write{}
	for _, w := range writes {
		k := ConnKey{w.Sk, w.ID}
		byConn[k] = append(byConn[k], w)
	}
	files := append(writtenFiles(env.Samples, env.Files, cmp.Or(env.PageSize, 4096)), env.Polled...)
	var out []record.Download
	for _, g := range groupConns(conns, writes) {
		out = append(out, buildGroup(g, byConn, files, env)...)
	}
	slices.SortStableFunc(out, func(x, y record.Download) int {
		return cmp.Or(cmp.Compare(x.StartNS, y.StartNS), cmp.Compare(x.Peer, y.Peer))
	})
	return out
}

// buildGroup is the download group g fed, if it is one. Connections
// whose sum fed no one file are tried apart: each that is a download
// alone on its own (two bodies fetched at once), the parts below that
// together. A small fetch that overlapped a download (a config file) then
// leaves it; parts that are no download together are chatter.
func buildGroup(g []Conn, byConn map[ConnKey][]Write, files []written, env Env) []record.Download {
	t := total(g)
	if !t.IsDownload() {
		return nil
	}
	d, dest := buildOne(g, t, byConn, files, env)
	if len(g) < 2 || found(dest) {
		return []record.Download{d}
	}
	var each []record.Download
	var parts []Conn
	anyFound := false
	for _, c := range g {
		if !c.IsDownload() {
			parts = append(parts, c)
			continue
		}
		e, ed := buildOne([]Conn{c}, c, byConn, files, env)
		each = append(each, e)
		anyFound = anyFound || found(ed)
	}
	if len(each) == 0 || (len(parts) > 0 && !anyFound) {
		return []record.Download{d}
	}
	if len(parts) > 0 {
		if pt := total(parts); pt.IsDownload() {
			p, _ := buildOne(parts, pt, byConn, files, env)
			each = append(each, p)
		}
	}
	return each
}

// found reports whether dest names a file.
func found(dest destination) bool {
	return dest.kind == record.DestFile || dest.kind == record.DestExpanded
}

// buildOne is the download the connections g (summed in t) fed.
func buildOne(g []Conn, t Conn, byConn map[ConnKey][]Write, files []written, env Env) (record.Download, destination) {
	d := record.Download{
		Bytes:     t.Bytes,
		StartNS:   rel(t.FirstTS, env.StartMono),
		EndNS:     rel(t.LastTS, env.StartMono),
		PID:       t.PID,
		TID:       t.RxTID,
		Peer:      t.Peer.String(),
		Host:      t.Host,
		HostFrom:  t.HostFrom,
		ConnectNS: rel(t.ID, env.StartMono),
		Receives:  t.Receives,
		BytesSent: t.Sent,
		Lookup:    lookupOf(t, env.StartMono),
	}
	var linked []Write
	tids := map[int32]bool{}
	for _, c := range g {
		cs := samples(c, env.Progress[ConnKey{c.Sk, c.ID}], env.StartMono)
		dc := record.DownloadConnection{Peer: c.Peer.String(), Host: c.Host, HostFrom: c.HostFrom, PID: c.PID, TID: c.RxTID,
			ConnectNS: rel(c.ID, env.StartMono), StartNS: rel(c.FirstTS, env.StartMono), EndNS: rel(c.LastTS, env.StartMono),
			Bytes: c.Bytes, Receives: c.Receives, BytesSent: c.Sent}
		if len(g) > 1 {
			// One connection among several can stall while the others
			// carry on: keep its own progress.
			dc.Samples = record.CoarsenSamples(slices.Clone(cs), record.MaxConnectionSamples)
		}
		d.Connections = append(d.Connections, dc)
		d.Samples = mergeSamples(d.Samples, cs)
		for _, w := range byConn[ConnKey{c.Sk, c.ID}] {
			if w.FirstTS <= c.LastTS+writeSlack && w.LastTS >= c.FirstTS {
				linked = append(linked, w)
			}
		}
		if !tids[c.RxTID] {
			tids[c.RxTID] = true
			cpu, wait := threadTime(env.Samples, env.IntervalNS, c.RxTID, d.StartNS, d.EndNS)
			d.OnCPUNS += cpu
			d.WaitNS += wait
		}
	}
	late := writtenAfter(linked, t.LastTS)
	dest := match(t.Bytes, d.Samples, window{d.StartNS, d.EndNS, env.IntervalNS}, files, linked, late)
	if dest.kind == record.DestMemory && !listedWhile(g, env) {
		dest.kind = record.DestNotSeen
		d.Unlisted = true
	}
	var tree []record.DownloadFile
	var dir string
	if dest.kind == record.DestUnpacked {
		if dir, tree = unpackedTree(dest.unpacked, t.Bytes, env.Locate); tree == nil {
			dest.kind, dest.expansion = record.DestNotSeen, 0
		}
	}
	d.Destination, d.Expansion = dest.kind, dest.expansion
	if dest.kind == record.DestUnpacked {
		d.Path, d.Files = dir, tree
		return d, dest
	}
	d.Files = destFiles(dest, linked, env.Locate)
	if dest.kind == record.DestFile {
		dest.key = namedBody(d.Files, t.Bytes, late)
	}
	if len(d.Files) > 0 && d.Files[0].Gone && (dest.kind == record.DestFile || dest.kind == record.DestExpanded) {
		d.Files = followMove(d.Files, dest.key, files, env, othersBodies(g, byConn))
	}
	if dest.kind == record.DestFile || dest.kind == record.DestExpanded {
		d.Path = d.Files[0].Path
	}
	if dest.kind == record.DestNotSeen {
		for _, c := range dest.candidates[:min(len(dest.candidates), maxCandidates)] {
			d.Candidates = append(d.Candidates, locatedFile(c.key, c.bytes, env.Locate))
		}
	}
	return d, dest
}

// namedBody puts first, where the destination fs[0] has an anonymous
// temporary name (Python's tempfile: "tmpk3x9_q2a") and another file the
// receiving threads wrote as the body arrived holds it too under a name
// of its own, that file, and returns the key of the file first. pip's
// HTTP cache buffers each response it may keep in such a file while pip
// writes the same bytes to the wheel: both are the body, and the wheel's
// name says what was downloaded.
func namedBody(fs []record.DownloadFile, body uint64, late map[FileKey]bool) FileKey {
	if len(fs) == 0 {
		return FileKey{}
	}
	if !anonymousTemp(fs[0].Path) {
		return fileKeyOf(fs[0])
	}
	for i := 1; i < len(fs); i++ {
		f := fs[i]
		if _, ok := holdsBody(f.BytesWritten, body); !ok || f.Path == "" || anonymousTemp(f.Path) || late[fileKeyOf(f)] {
			continue
		}
		fs[0], fs[i] = fs[i], fs[0]
		break
	}
	return fileKeyOf(fs[0])
}

// anonymousTemp reports whether p's last element is a name Python's
// tempfile makes up: "tmp" and 8 of its random characters.
func anonymousTemp(p string) bool {
	b := path.Base(p)
	if len(b) != 11 || !strings.HasPrefix(b, "tmp") {
		return false
	}
	for _, c := range b[3:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// unpackedTree names the files of an unpacked destination, largest
// first, and the directory they share below the root. A file that cannot
// be named, or that lies outside the directory the larger ones share (a
// log, bytecode, a lock file the same process wrote meanwhile), is left
// out, as long as those kept hold minUnpackedShare of the r bytes
// received; else there is no tree.
func unpackedTree(cs []candidate, r uint64, locate func(FileKey) Located) (string, []record.DownloadFile) {
	if locate == nil {
		return "", nil
	}
	var out []record.DownloadFile
	var dir string
	var kept uint64
	for _, c := range cs {
		f := locatedFile(c.key, c.bytes, locate)
		if f.Path == "" || !strings.HasPrefix(f.Path, "/") {
			continue
		}
		d := path.Dir(f.Path)
		if dir != "" {
			d = dir
			for d != "/" && !strings.HasPrefix(f.Path, d+"/") {
				d = path.Dir(d)
			}
		}
		if d == "/" {
			continue
		}
		dir = d
		kept += c.bytes
		out = append(out, f)
	}
	if len(out) < 2 || float64(kept) < minUnpackedShare*float64(r) {
		return "", nil
	}
	return dir, out[:min(len(out), maxCandidates)]
}

// writtenAfter are the files of linked whose every write began after
// last, the time of the download's last byte.
func writtenAfter(linked []Write, last uint64) map[FileKey]bool {
	out := map[FileKey]bool{}
	for _, w := range linked {
		k := w.key()
		if v, seen := out[k]; !seen || v {
			out[k] = w.FirstTS > last
		}
	}
	return out
}

// listedWhile reports whether the open files of a process that received
// on g were listed while g received (from its first byte until one
// watcher tick after its last): only then can a body written to a tmpfs file and closed
// between polls not have gone unseen.
func listedWhile(g []Conn, env Env) bool {
	if env.Listed == nil {
		return true
	}
	for _, c := range g {
		if env.Listed(c.PID, rel(c.FirstTS, env.StartMono), rel(c.LastTS, env.StartMono)+int64(fastInterval)) {
			return true
		}
	}
	return false
}

// followMove puts first, when the destination fs[0] (key) was deleted
// and a copy of it survives (a move to another filesystem), the copy,
// under its name with the destination's first name beside it.
func followMove(fs []record.DownloadFile, key FileKey, files []written, env Env, others map[FileKey]bool) []record.DownloadFile {
	named := func(k FileKey) bool {
		if env.Locate == nil {
			return false
		}
		l := env.Locate(k)
		return !l.Gone && namedAsMoved(l.Path, fs[0].Path, fs[0].WrittenPath)
	}
	to, ok := movedCopy(key, files, env.IntervalNS, others, named)
	if !ok {
		return fs
	}
	moved := locatedFile(to, fs[0].BytesWritten, env.Locate)
	if moved.Gone || moved.Path == "" {
		return fs
	}
	moved.WrittenPath = cmp.Or(fs[0].WrittenPath, fs[0].Path)
	// Listed once: the receiving thread may have written the copy too.
	rest := slices.DeleteFunc(slices.Clone(fs), func(f record.DownloadFile) bool {
		return fileKeyOf(f) == to
	})
	return append([]record.DownloadFile{moved}, rest...)
}

// othersBodies are the files the receiving threads of connections other
// than g's wrote: another download's body (a retry's new temporary file,
// written as the first attempt's was deleted), not a copy of g's.
func othersBodies(g []Conn, byConn map[ConnKey][]Write) map[FileKey]bool {
	own := make(map[ConnKey]bool, len(g))
	for _, c := range g {
		own[ConnKey{c.Sk, c.ID}] = true
	}
	out := map[FileKey]bool{}
	for k, ws := range byConn {
		if own[k] {
			continue
		}
		for _, w := range ws {
			out[w.key()] = true
		}
	}
	return out
}

// destFiles are the destination (when there is one), then the other
// files the receiving threads wrote, largest first.
func destFiles(dest destination, linked []Write, locate func(FileKey) Located) []record.DownloadFile {
	var out []record.DownloadFile
	seen := map[FileKey]bool{}
	if dest.kind == record.DestFile || dest.kind == record.DestExpanded {
		out = append(out, locatedFile(dest.key, dest.bytes, locate))
		seen[dest.key] = true
	}
	var rest []record.DownloadFile
	for _, w := range linked {
		k := w.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		rest = append(rest, locatedFile(k, w.Bytes, locate))
	}
	slices.SortStableFunc(rest, func(x, y record.DownloadFile) int {
		return cmp.Or(cmp.Compare(y.BytesWritten, x.BytesWritten), cmp.Compare(x.Path, y.Path))
	})
	return append(out, rest...)
}

// locatedFile is file k, written bytes, under its names.
func locatedFile(k FileKey, bytes uint64, locate func(FileKey) Located) record.DownloadFile {
	f := record.DownloadFile{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen, BytesWritten: bytes}
	if locate != nil {
		l := locate(k)
		f.Path, f.WrittenPath, f.Gone, f.NameUnknown = l.Path, l.WrittenPath, l.Gone, l.NameUnknown
	}
	return f
}

// mergeSamples adds b's bytes into a by end time, in time order.
func mergeSamples(a, b []record.DownloadSample) []record.DownloadSample {
	if len(a) == 0 {
		return b
	}
	byEnd := map[int64]uint64{}
	for _, s := range a {
		byEnd[s.EndNS] += s.Bytes
	}
	for _, s := range b {
		byEnd[s.EndNS] += s.Bytes
	}
	out := make([]record.DownloadSample, 0, len(byEnd))
	for end, n := range byEnd {
		out = append(out, record.DownloadSample{EndNS: end, Bytes: n})
	}
	slices.SortFunc(out, func(x, y record.DownloadSample) int { return cmp.Compare(x.EndNS, y.EndNS) })
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
	return threadSum(samples, interval, tid, start, end, func(t record.ThreadDelta) int64 { return t.CPUNS }),
		threadSum(samples, interval, tid, start, end, func(t record.ThreadDelta) int64 { return t.OtherWaitNS })
}

// threadSum sums f of tid's samples within (start, end], as threadTime.
func threadSum(samples []record.Sample, interval int64, tid int32, start, end int64, f func(record.ThreadDelta) int64) int64 {
	if interval <= 0 || end <= start {
		return 0
	}
	var sum float64
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
				sum += frac * float64(f(t))
			}
		}
	}
	return int64(sum)
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
