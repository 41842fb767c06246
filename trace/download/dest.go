package download

import (
	"cmp"
	"path"
	"slices"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// A download is a destination fed by one or more connections
// (docs/definitions.md, "Download"): a parallel chunked downloader's eight
// 2 MiB ranges into one file are one 16 MiB download, and the file it
// went to is the one whose written bytes follow the received bytes, by
// whichever traced thread wrote them (a pool of writers, as libuv,
// hf_transfer and aria2 have).
const (
	// minPartBytes is the least a connection shaped like a download
	// receives to count toward one: below it, a closed connection is
	// forgotten (a client that opens one per small request would
	// otherwise fill memory).
	minPartBytes = 64 << 10
	// destSlack is how long after a download's last byte its destination
	// may still be written: a client that keeps the body in memory writes
	// it out right after.
	destSlack = 2_000_000_000
	// minTolerance and toleranceDiv set how far a destination's written
	// bytes may be from the received ones: max(64 KiB, 0.5%) — headers,
	// chunked-encoding framing and partial pages at chunk ends.
	minTolerance = 64 << 10
	toleranceDiv = 200
	// framingDiv bounds how much more than the body its connection may
	// receive: 2.5%. Over HTTPS every TLS record adds 22 bytes (TLS 1.3)
	// or 29 (1.2, AES-GCM), and servers that size records to one TCP
	// segment send 1.4 KB records, 1.6–2.1% more than the body; chunked
	// encoding and HTTP/2 frames add theirs. `go mod download` of an
	// 8.8 MiB zip from proxy.golang.org received 0.76% more than the zip
	// held, past the 0.5% above.
	framingDiv = 40
	// memoryDiv: a body of which less than a tenth reached any file was
	// kept in memory.
	memoryDiv = 10
	// maxCandidates is how many of the files written meanwhile a
	// download whose destination was not seen lists (the largest): an
	// archive unpacked as it arrives writes thousands.
	maxCandidates = 16
)

// tolerance is how far a destination's written bytes may be from r.
func tolerance(r uint64) uint64 { return max(minTolerance, r/toleranceDiv) }

// fits reports whether a file that wrote w bytes holds a body its
// connections received as r bytes: at most tolerance(r) more, and at most
// the framing's share (and a handshake's certificates) less, plus slack
// either way.
func fits(w, r, slack uint64) bool {
	if w >= r {
		return w-r <= tolerance(r)+slack
	}
	return r-w <= max(tolerance(r), minTolerance+r/framingDiv)+slack
}

// groupConns sorts the connections shaped like downloads into the groups
// that may feed one destination: those of one process whose receive
// spans overlap. Within such a group, connections whose receiving thread
// wrote most of their bytes to one file (each chunk's thread writing its
// range) are grouped by that file, so two files fetched at once by one
// process stay two downloads.
func groupConns(conns []Conn, writes []Write) [][]Conn {
	var parts []Conn
	for _, c := range conns {
		if c.Bytes >= minPartBytes && c.downloadShaped() {
			parts = append(parts, c)
		}
	}
	slices.SortStableFunc(parts, func(x, y Conn) int {
		return cmp.Or(cmp.Compare(x.FirstTS, y.FirstTS), cmp.Compare(x.Sk, y.Sk))
	})
	linked := linkedFiles(writes)
	var out [][]Conn
	open := map[int32]int{} // pid → index in out of its latest cluster
	ends := map[int32]uint64{}
	var clusters [][]Conn
	for _, c := range parts {
		if i, ok := open[c.PID]; ok && c.FirstTS <= ends[c.PID] {
			clusters[i] = append(clusters[i], c)
			ends[c.PID] = max(ends[c.PID], c.LastTS)
			continue
		}
		open[c.PID], ends[c.PID] = len(clusters), c.LastTS
		clusters = append(clusters, []Conn{c})
	}
	for _, cl := range clusters {
		out = append(out, splitByLink(cl, linked)...)
	}
	return out
}

// linkedFiles is, per connection, the file its receiving thread wrote
// most to.
func linkedFiles(writes []Write) map[ConnKey]FileKey {
	best := map[ConnKey]Write{}
	for _, w := range writes {
		k := ConnKey{w.Sk, w.ID}
		if b, ok := best[k]; !ok || w.Bytes > b.Bytes {
			best[k] = w
		}
	}
	out := make(map[ConnKey]FileKey, len(best))
	for k, w := range best {
		out[k] = w.key()
	}
	return out
}

// splitByLink splits a cluster by the file each connection's receiving
// thread wrote most to; connections whose receiving threads wrote no
// file (a pool of writers) stay together.
func splitByLink(cl []Conn, linked map[ConnKey]FileKey) [][]Conn {
	if len(cl) < 2 {
		return [][]Conn{cl}
	}
	byFile := map[FileKey][]Conn{}
	var order []FileKey
	var rest []Conn
	for _, c := range cl {
		f, ok := linked[ConnKey{c.Sk, c.ID}]
		if !ok {
			rest = append(rest, c)
			continue
		}
		if _, seen := byFile[f]; !seen {
			order = append(order, f)
		}
		byFile[f] = append(byFile[f], c)
	}
	if len(order) == 0 {
		return [][]Conn{cl}
	}
	var out [][]Conn
	for _, f := range order {
		out = append(out, byFile[f])
	}
	if len(rest) > 0 {
		out = append(out, rest)
	}
	return out
}

// total is the group's connections as one: their sums, and the bounds
// of their receive spans (overlapping: their union).
func total(g []Conn) Conn {
	t := g[0]
	t.Bytes, t.Receives, t.Sent = 0, 0, 0
	for _, c := range g {
		t.Bytes += c.Bytes
		t.Receives += c.Receives
		t.Sent += c.Sent
		t.FirstTS = min(t.FirstTS, c.FirstTS)
		t.LastTS = max(t.LastTS, c.LastTS)
		t.ID = min(t.ID, c.ID)
		if c.Bytes > 0 && c.LastTS >= t.LastTS {
			t.RxTID = c.RxTID
		}
		if t.Host == "" && c.Host != "" {
			// The first connection named: a later one may have been
			// opened after a lookup the first had no need of.
			t.Host, t.HostFrom, t.GaiStart, t.GaiEnd = c.Host, c.HostFrom, c.GaiStart, c.GaiEnd
		}
	}
	return t
}

// point is a file's pages created in the interval ending at End (ns from
// the run's start), in bytes.
type point struct {
	End   int64
	Bytes uint64
}

// written is one file's writes poll by poll, from the page-cache
// sensor's per-interval pages created.
type written struct {
	Key    FileKey
	Points []point
}

// writtenFiles turns the samples' per-file pages created into each
// file's series, in order of first write.
func writtenFiles(samples []record.Sample, files []record.File, pageSize uint64) []written {
	idx := map[int]int{}
	var out []written
	for _, s := range samples {
		for _, fd := range s.Files {
			if fd.PagesCreated == 0 || fd.File < 0 || fd.File >= len(files) {
				continue
			}
			i, ok := idx[fd.File]
			if !ok {
				f := files[fd.File]
				i = len(out)
				idx[fd.File] = i
				out = append(out, written{Key: FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}})
			}
			out[i].Points = append(out[i].Points, point{End: s.EndNS, Bytes: fd.PagesCreated * pageSize})
		}
	}
	return out
}

// received is a download's cumulative bytes at time t, from its samples.
func received(samples []record.DownloadSample, t int64) uint64 {
	var n uint64
	for _, s := range samples {
		if s.EndNS <= t {
			n += s.Bytes
		}
	}
	return n
}

// window is the span a destination's writes fall in: from the first
// byte until destSlack after the last. A sample ending at End covers up
// to interval before it.
type window struct {
	start, end, interval int64
}

func (w window) holds(end int64) bool { return end > w.start && end-w.interval <= w.end+destSlack }

// inWindow is what f wrote inside w, and before it.
func inWindow(f written, w window) (in, before uint64) {
	for _, p := range f.Points {
		switch {
		case w.holds(p.End):
			in += p.Bytes
		case p.End <= w.start:
			before += p.Bytes
		}
	}
	return in, before
}

// follows reports whether f's writes inside w never ran ahead of the
// received bytes scaled by n (1: written as received; N: expanded N
// times), allowing the lag between the two sensors' reads.
func follows(f written, w window, rx []record.DownloadSample, n float64, tol uint64) bool {
	var cum uint64
	for _, p := range f.Points {
		if !w.holds(p.End) {
			continue
		}
		cum += p.Bytes
		limit := n*float64(received(rx, readAfter(rx, p.End, w.interval))) + n*float64(tol)
		if float64(cum) > limit {
			return false
		}
	}
	return true
}

// readAfter is when the received count was next read after a file's
// written bytes were, at t: one poll later, or at the first count dated
// after t when the polls ran late. A tmpfs size is read as often as
// every 5 ms, the received count at the session's polls, which a loaded
// machine delays by several intervals: bytes written by t were received
// by t, so they are in the first count read after it, whenever that was.
// A count is dated before it is read (its poll's clock), so the first
// dated after t was read after t; one dated t itself (the same poll as a
// page-cache file's pages) may have been read before them.
func readAfter(rx []record.DownloadSample, t, interval int64) int64 {
	limit := t + interval
	for _, s := range rx {
		if s.EndNS > t {
			return max(limit, s.EndNS)
		}
	}
	return limit
}

// destination is how a download's body was matched to a file.
type destination struct {
	kind      string // record.Dest*
	key       FileKey
	bytes     uint64 // what the destination had written in the window
	expansion float64
	// candidates are the files written in the window, largest first.
	candidates []candidate
	// unpacked are the files of DestUnpacked, largest first.
	unpacked []candidate
}

type candidate struct {
	key   FileKey
	bytes uint64
}

// match finds the destination of a download that received r bytes,
// samples rx, within w, among the files written (page-cache writes and
// polled tmpfs sizes) and the files its receiving threads wrote (linked
// by their page-cache insertions; late: those they began to write only
// after the last byte arrived).
func match(r uint64, rx []record.DownloadSample, w window, files []written, linked []Write, late map[FileKey]bool) destination {
	tol := tolerance(r)
	var d destination
	var all uint64
	var exact, expanded *candidate
	// A file the receiving threads wrote is preferred among those that
	// fit: a download shorter than a poll has one received count, which
	// every file written meanwhile follows.
	byReceiver := make(map[FileKey]bool, len(linked))
	for _, lw := range linked {
		byReceiver[lw.key()] = true
	}
	closer := func(c candidate, than *candidate) bool {
		if than == nil {
			return true
		}
		// The file written as the body arrived, not one written from
		// it afterwards: pip unpacks a wheel it just received, and a
		// stored member is the wheel's size too.
		if late[c.key] != late[than.key] {
			return !late[c.key]
		}
		if byReceiver[c.key] != byReceiver[than.key] {
			return byReceiver[c.key]
		}
		return max(c.bytes, r)-min(c.bytes, r) < max(than.bytes, r)-min(than.bytes, r)
	}
	for _, f := range files {
		in, before := inWindow(f, w)
		if in == 0 {
			continue
		}
		c := candidate{key: f.Key, bytes: in}
		d.candidates = append(d.candidates, c)
		all += in
		if before > tol {
			continue // written before the body arrived: not its file
		}
		switch {
		case fits(in, r, 0) && follows(f, w, rx, 1, tol):
			if closer(c, exact) {
				exact = &c
			}
		case in > r+tol && follows(f, w, rx, float64(in)/float64(r), tol):
			if expanded == nil || in > expanded.bytes {
				expanded = &c
			}
		}
	}
	slices.SortStableFunc(d.candidates, func(x, y candidate) int { return cmp.Compare(y.bytes, x.bytes) })
	switch {
	case exact != nil:
		d.kind, d.key, d.bytes = record.DestFile, exact.key, exact.bytes
	case expanded != nil:
		d.kind, d.key, d.bytes = record.DestExpanded, expanded.key, expanded.bytes
		d.expansion = float64(expanded.bytes) / float64(r)
	case unpackedFrom(r, rx, w, files, tol, &d):
		// Several new files followed it together: an archive unpacked
		// as it arrived (the directory they share is checked once
		// their names are known).
	default:
		// No file followed it: the largest the receiving threads
		// wrote, if it holds at least half the body.
		if lw, ok := largestLinked(linked, w, r); ok {
			d.kind, d.key, d.bytes = record.DestFile, lw.key(), lw.Bytes
			return d
		}
		for _, lw := range linked {
			all += lw.Bytes
		}
		d.kind = record.DestNotSeen
		if all*memoryDiv < r {
			d.kind = record.DestMemory
		}
	}
	return d
}

// minUnpackedShare is the least part of the body the files of an
// unpacked archive hold together: a tar's headers and padding, a zip's
// directory, are not written out.
const minUnpackedShare = 0.9

// unpackedFrom reports whether files new in w (none written before the
// body arrived), at least two, together follow the received bytes (never
// ahead of them, scaled by their total over the body when that is more:
// a compressed archive) and hold at least minUnpackedShare of them; if
// so d becomes DestUnpacked with those files, largest first, in unpacked.
func unpackedFrom(r uint64, rx []record.DownloadSample, w window, files []written, tol uint64, d *destination) bool {
	var fresh []candidate
	var all written // their writes as one file's, for follows
	var total uint64
	for _, f := range files {
		in, before := inWindow(f, w)
		if in == 0 || before > 0 {
			continue
		}
		fresh = append(fresh, candidate{key: f.Key, bytes: in})
		all.Points = append(all.Points, f.Points...)
		total += in
	}
	if len(fresh) < 2 || float64(total) < minUnpackedShare*float64(r) {
		return false
	}
	n := max(1, float64(total)/float64(r))
	slices.SortStableFunc(all.Points, func(x, y point) int { return cmp.Compare(x.End, y.End) })
	if !follows(all, w, rx, n, tol) {
		return false
	}
	slices.SortStableFunc(fresh, func(x, y candidate) int { return cmp.Compare(y.bytes, x.bytes) })
	d.kind, d.unpacked = record.DestUnpacked, fresh
	d.key, d.bytes = fresh[0].key, total
	if n > 1 {
		d.expansion = n
	}
	return true
}

// largestLinked is the largest file the receiving threads wrote within
// w, when it holds at least half the body.
func largestLinked(linked []Write, w window, r uint64) (Write, bool) {
	var best Write
	for _, lw := range linked {
		if lw.Bytes > best.Bytes {
			best = lw
		}
	}
	return best, best.Bytes > 0 && best.Bytes*2 >= r
}

// movedCopy finds where a destination deleted before the end of the run
// went when it was moved to another filesystem (a copy, then a delete):
// a file whose writes began as the destination's ended (within one
// poll) and no later than destSlack after, and whose total is the
// destination's within tolerance. Of several, the first written. Not a
// copy: a file with the destination's inode number (given to it after
// the destination was deleted, so written from no copy of it), one of
// others (another download's body), nor one on the destination's own
// device that named does not accept: there a move is a rename, which
// keeps the file, so a copy is one only under the destination's name
// (git's dumb-HTTP pack.temp copied to its .pack; a move between two
// mounts of one filesystem), not a file made of it under another (a
// wheel's stored member, which pip unpacks at the wheel's size).
func movedCopy(dest FileKey, files []written, interval int64, others map[FileKey]bool, named func(FileKey) bool) (FileKey, bool) {
	var src *written
	for i := range files {
		if files[i].Key == dest {
			src = &files[i]
		}
	}
	if src == nil || len(src.Points) == 0 {
		return FileKey{}, false
	}
	size, last := sumPoints(src.Points), src.Points[len(src.Points)-1].End
	for _, f := range files {
		if f.Key.number() == dest.number() || others[f.Key] || len(f.Points) == 0 {
			continue
		}
		if f.Key.Dev == dest.Dev && (named == nil || !named(f.Key)) {
			continue
		}
		first, n := f.Points[0].End, sumPoints(f.Points)
		if first >= last-interval && first <= last+destSlack+interval && max(n, size)-min(n, size) <= tolerance(size) {
			return f.Key, true
		}
	}
	return FileKey{}, false
}

// namedAsMoved reports whether copy's name is one a move of a file named
// names could give it: the same last element, or that with a temporary
// suffix taken off ("pack-1.pack.temp" → "pack-1.pack", "<etag>.incomplete"
// → "<etag>").
func namedAsMoved(copy string, names ...string) bool {
	c := path.Base(copy)
	if copy == "" || c == "." || c == "/" {
		return false
	}
	for _, n := range names {
		if n == "" {
			continue
		}
		b := path.Base(n)
		if b == c || strings.HasPrefix(b, c+".") {
			return true
		}
	}
	return false
}

func sumPoints(ps []point) uint64 {
	var n uint64
	for _, p := range ps {
		n += p.Bytes
	}
	return n
}
