package record

// DownloadMinBytes is the least a connection receives to be a download
// (docs/definitions.md, "Download").
const DownloadMinBytes = 4 << 20

// Download is a network fetch into one destination: at least
// DownloadMinBytes received on the TCP connections that fed it, which the
// traced process opened (not accepted), in large
// receives (a mean of at least 16 KiB, with 4 times more received than
// sent) or far more received than sent (64 times). Its time runs from
// its first to its last byte received. Only the peer is recorded: never
// headers, tokens or query strings (a host name taken from a request's
// Host header or a TLS server name is checked to be one).
type Download struct {
	// Path is the destination: the file whose written bytes followed
	// the received bytes (written by any traced thread or process), under
	// its name at the end of the run when it was renamed, in any
	// directory (a Hugging Face blob's ".incomplete" temp name, torch.hub's
	// temporary file). Empty when the data stayed in memory or no
	// destination was seen. Its exact bytes, which need not be UTF-8, are
	// in path_b64 then (Download.MarshalJSON), as a file's.
	Path string `json:"path"`
	// Name is what the destination is known by: for a Hugging Face hub
	// blob, the snapshot entry that links to it ("model.safetensors");
	// otherwise Path's last element. Empty when Path is.
	Name string `json:"name,omitempty"`
	// Cache is the record's JIT.Caches entry (its Name) whose root holds
	// Path (or KeptIn), where one does ("huggingface"): its health says
	// whether the data survives for a rerun.
	Cache string `json:"cache,omitempty"`
	// KeptIn is a file of a known cache the client stored the body in
	// beside its destination, when the destination is outside any cache
	// (pip receives a wheel into a temporary file it deletes, and keeps
	// the response in its HTTP cache): what a rerun reads instead of
	// downloading. Cache is then its cache.
	KeptIn  *DownloadFile `json:"kept_in,omitempty"`
	Bytes   uint64        `json:"bytes"`
	StartNS int64         `json:"start_ns"`
	EndNS   int64         `json:"end_ns"`
	PID     int32         `json:"pid"`
	// TID is the thread that received the last byte.
	TID int32 `json:"tid"`
	// Peer is the remote address and port, "127.0.0.1:8765" or
	// "[::1]:443".
	Peer string `json:"peer"`
	// Host is the peer's name, or "": the name the process looked it up
	// by (libc's getaddrinfo, its latest lookup before connecting), else
	// the one the connection's first bytes asked for (HostFrom).
	Host string `json:"host,omitempty"`
	// HostFrom says where Host came from: HostFromLookup, HostFromTLS or
	// HostFromHTTP; empty with no Host, and in records made before it
	// was recorded.
	HostFrom string `json:"host_from,omitempty"`
	// ConnectNS is when the connection was opened (connect(2)); it may
	// precede the run's start for a connection opened by an attached
	// process, and is then negative.
	ConnectNS int64 `json:"connect_ns"`
	// Receives counts the receive calls (recvmsg, read) that returned data.
	Receives uint64 `json:"receives"`
	// BytesSent is what the process sent on the connection (requests, a
	// TLS handshake).
	BytesSent uint64 `json:"bytes_sent"`
	// Files are the destination first, then every other file the
	// receiving threads wrote from the start of the download until
	// shortly after its end, largest first.
	Files []DownloadFile `json:"files,omitempty"`
	// OnCPUNS and WaitNS are the receiving thread's time within the
	// download: on CPU (TLS, hashing, decompression, copying) and off CPU
	// waiting for data (neither I/O wait nor the run queue).
	OnCPUNS int64 `json:"on_cpu_ns"`
	WaitNS  int64 `json:"wait_ns"`
	// Samples are the bytes received per polling interval, for the
	// timeline's network counter; they sum to Bytes.
	Samples []DownloadSample `json:"samples,omitempty"`
	// Destination says where the body went: DestFile (Path, written
	// byte for byte), DestExpanded (Path, written Expansion times larger:
	// a compressed or reassembled transfer), DestUnpacked (new files under
	// the directory Path that together follow the received bytes: an
	// archive unpacked as it arrives, `curl | tar -x`, or several bodies
	// received one after another over one connection; Files lists them,
	// largest first, Expansion their total over the body), DestMemory (never written)
	// or DestNotSeen (written, but to no one file that follows the
	// received bytes: Candidates lists the files written meanwhile; or
	// written to no file seen while its process's open files, which is
	// how tmpfs writes are seen, went unlisted during the download).
	// Empty in records made before destinations were matched.
	Destination string  `json:"destination,omitempty"`
	Expansion   float64 `json:"expansion,omitempty"`
	// Connections are the connections that fed the destination, in the
	// order they started; Bytes, Receives and BytesSent are their sums,
	// StartNS and EndNS the bounds of the union of their receive spans.
	Connections []DownloadConnection `json:"connections,omitempty"`
	// Stacks are the Python stacks that opened its connections, with
	// their connections' receive time (NS, summed over connections) and
	// bytes, most time first.
	Stacks []StackCharge `json:"stacks,omitempty"`
	// Candidates are the files written while the download ran, when none
	// of them was its destination (DestNotSeen), largest first.
	Candidates []DownloadFile `json:"candidates,omitempty"`
	// Unlisted: DestNotSeen because no file was written that the page
	// cache shows and the receiving processes' open files, which is how
	// writes to tmpfs are seen, were never listed while they received
	// (a body written to tmpfs and closed within a few ms of its last
	// byte, or while coldtrace waited for a CPU, is not seen).
	Unlisted bool `json:"unlisted,omitempty"`
	// Lookup is the getaddrinfo call that named Host, when the probes
	// saw it: how long the name took to resolve before the connect.
	Lookup *Lookup `json:"lookup,omitempty"`
}

// Lookup is one getaddrinfo call by a traced thread, in run time (its
// start may be negative for an attached process).
type Lookup struct {
	Host     string `json:"host"`
	StartNS  int64  `json:"start_ns"`
	LengthNS int64  `json:"length_ns"`
}

// Where a connection's host name came from (HostFrom).
const (
	// HostFromLookup: the process's getaddrinfo(3) call that returned
	// the peer's address.
	HostFromLookup = "lookup"
	// HostFromTLS: the server name (SNI) of the connection's TLS
	// ClientHello, which clients send in clear to reach a virtual host.
	HostFromTLS = "tls_sni"
	// HostFromHTTP: the Host header of the connection's first plain-HTTP
	// request.
	HostFromHTTP = "http_host"
)

// SilentMinNS is how long a connection waits with nothing received to
// be a SilentConnection: twice the 5 s floor of a download's stall, and
// past the 5 s a resolver or TLS handshake retry takes.
const SilentMinNS = 10e9

// SilentConnection is a TCP connection the traced process opened that
// received nothing for at least SilentMinNS after it was established,
// while the thread that opened it spent most of that time in a plain
// wait (off CPU, neither in I/O nor the run queue).
type SilentConnection struct {
	Peer     string `json:"peer"`
	Host     string `json:"host,omitempty"`
	HostFrom string `json:"host_from,omitempty"`
	PID      int32  `json:"pid"`
	TID      int32  `json:"tid"`
	// StartNS is when the connection was established (the silence's
	// start) and LengthNS how long until its first byte, its close, or
	// the end of the run.
	StartNS  int64 `json:"start_ns"`
	LengthNS int64 `json:"length_ns"`
	// Received says something arrived after the silence (Bytes in all);
	// Closed that the connection was closed by the end of the run.
	Received bool   `json:"received,omitempty"`
	Bytes    uint64 `json:"bytes,omitempty"`
	Closed   bool   `json:"closed,omitempty"`
	// WaitNS is the opening thread's off-CPU wait (neither I/O nor run
	// queue) within the silence.
	WaitNS int64   `json:"wait_ns"`
	Lookup *Lookup `json:"lookup,omitempty"`
}

// The destinations of a download (Download.Destination).
const (
	DestFile     = "file"
	DestExpanded = "expanded"
	DestUnpacked = "unpacked"
	DestMemory   = "memory"
	DestNotSeen  = "not_seen"
)

// DownloadConnection is one TCP connection that fed a download.
type DownloadConnection struct {
	Peer      string `json:"peer"`
	Host      string `json:"host,omitempty"`
	HostFrom  string `json:"host_from,omitempty"`
	PID       int32  `json:"pid"`
	TID       int32  `json:"tid"` // the thread that received its last byte
	ConnectNS int64  `json:"connect_ns"`
	StartNS   int64  `json:"start_ns"`
	EndNS     int64  `json:"end_ns"`
	Bytes     uint64 `json:"bytes"`
	Receives  uint64 `json:"receives"`
	BytesSent uint64 `json:"bytes_sent"`
	// Samples are the connection's bytes per poll with data, as
	// Download.Samples, kept only when the download had more than one
	// connection (with one they are the download's); at most
	// MaxConnectionSamples, adjacent polls summed when there were more.
	Samples []DownloadSample `json:"samples,omitempty"`
	// Stack is 1 + the index in Record.Stacks of the connecting thread's
	// Python stack, 0 for none.
	Stack int `json:"stack,omitempty"`
}

// MaxConnectionSamples bounds DownloadConnection.Samples.
const MaxConnectionSamples = 2048

// CoarsenSamples sums adjacent pairs of s until at most max remain, each
// pair under its later end; s is reused.
func CoarsenSamples(s []DownloadSample, max int) []DownloadSample {
	for max > 0 && len(s) > max {
		n := 0
		for i := 0; i < len(s); i += 2 {
			if i+1 < len(s) {
				s[n] = DownloadSample{EndNS: s[i+1].EndNS, Bytes: s[i].Bytes + s[i+1].Bytes}
			} else {
				s[n] = s[i]
			}
			n++
		}
		s = s[:n]
	}
	return s
}

// DownloadSample is what a download received in (previous EndNS, EndNS];
// the last one ends at the download's last byte.
type DownloadSample struct {
	EndNS int64  `json:"t"`
	Bytes uint64 `json:"bytes"`
}

// DownloadFile is one file a download wrote.
type DownloadFile struct {
	Dev uint32 `json:"dev"` // kernel encoding: major<<20 | minor
	Ino uint64 `json:"ino"`
	// Gen is the inode's generation, as File.Gen: with Dev and Ino, the
	// files[] row of the file (a retried download's new temporary file
	// may be given the deleted one's number).
	Gen uint32 `json:"gen,omitempty"`
	// Path is the file's name at the end of the run when it could be
	// found (after a rename into place), else the name it was first seen
	// under.
	Path string `json:"path"`
	// WrittenPath is the name it was written under, when that differs
	// from Path (a temporary name).
	WrittenPath string `json:"written_path,omitempty"`
	// BytesWritten counts the pages the writes added to the page cache,
	// in bytes; on tmpfs (no page-cache insertions to see), the growth
	// of the pages it holds, polled while its writer downloads. Either
	// way the file has its row in Record.Files.
	BytesWritten uint64 `json:"bytes_written"`
	// Gone is set when the file no longer existed at the end of the run
	// (a temporary file deleted before exit).
	Gone bool `json:"gone,omitempty"`
	// NameUnknown is set when the file was renamed and its final name
	// could not be found (no handle was taken while it was open, and it
	// left the directory it was written in): Path is its first name, and
	// whether it still exists is unknown.
	NameUnknown bool `json:"name_unknown,omitempty"`
}

// MBPerSecond is the download's achieved rate in MB/s (10^6 bytes per
// second), 0 when its span is empty.
func (d Download) MBPerSecond() float64 {
	if d.EndNS <= d.StartNS {
		return 0
	}
	return float64(d.Bytes) / 1e6 / (float64(d.EndNS-d.StartNS) / 1e9)
}
