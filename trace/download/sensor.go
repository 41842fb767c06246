// Package download is coldtrace's network sensor: it counts, in the
// kernel, the bytes each TCP connection opened by a traced thread
// receives, links the files the receiving thread writes meanwhile, and
// fills the record's downloads with the connections that meet the shared
// definition (docs/definitions.md, "Download").
package download

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/internal/filehandle"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/uprobes"
)

// Options connect the sensor to the run: the core object's maps its
// programs use, so that there is one tracked set, and the other sensors'
// parts it calls.
type Options struct {
	// TaskStates is the core's task storage: present for tracked threads.
	TaskStates *ebpf.Map
	// Tracked is the core's bit per tracked process, tested first.
	Tracked *ebpf.Map
	// Threads is the core's per-thread slot array.
	Threads *ebpf.Map
	// Rights, when set, is whose rights the written files are looked up
	// with (the command's user: internal/actor), so a sudo user's run
	// never names a file that user could not see. Nil: coldtrace's own.
	Rights interface{ Do(func() error) error }
	// BTF, when set, is the kernel BTF cache shared with the other
	// sensors' loads: decoded once per run.
	BTF *btf.Cache
	// OnDownload, when set, is told once, from a poll, that a connection
	// shaped like a download is receiving (process pid's): the JIT sensor
	// traces the path syscalls from then on, so the file it fills is seen
	// renamed into its cache.
	OnDownload func(pid int32)
	// Uprobes installs the getaddrinfo probes in traced processes only;
	// nil: the sensor keeps one of its own, which probes only the
	// processes given to its Track.
	Uprobes *uprobes.Scoper
	// Stacks are the Python stack walker's maps by name
	// (pystack.Sensor.Replacements): a Python thread's connect takes its
	// stack. Nil: no stacks.
	Stacks map[string]*ebpf.Map
	// InternStack and StackPID name a stack id in the record and its
	// process (pystack.Sensor.Intern, PIDOf).
	InternStack func(*record.Record, uint64) int
	StackPID    func(uint64) int32
	// Chained leaves the write program (WriteProgram) unattached: the
	// page-cache object runs it by tail call, so that
	// mm_filemap_add_to_page_cache carries one program.
	Chained bool
}

// Sensor is the loaded network probes and their reader.
type Sensor struct {
	onDownload func(pid int32)
	chained    bool // Options.Chained
	// sendNames: the kernel has TCP's send tracepoint, where a
	// connection no lookup named is named by its first bytes (a TLS
	// server name, an HTTP Host header).
	sendNames bool
	rights    interface{ Do(func() error) error }
	// internStack and stackPID name connections' Python stacks
	// (Options.InternStack, StackPID); nil without stacks.
	internStack func(*record.Record, uint64) int
	stackPID    func(uint64) int32
	objs        bpfdl.DownloadObjects
	links       []link.Link
	// rx is the receive slots, where a connection's latest receiving
	// thread counts before its entry in objs.Conns has them.
	rx        *rxSlots
	scoper    *uprobes.Scoper
	ownScoper bool
	resolver  *uprobes.Set
	// closedRing reads the closed connections in the runtime's
	// network poller (probe.Ring): a reader blocked in epoll_wait(2)
	// holds a thread in a system call, which the runtime's monitor
	// thread keeps taking back.
	closedRing *probe.Ring

	// progress is each open connection's bytes at every poll; only the
	// session's goroutine (Poll, Finish) touches it.
	progress map[ConnKey][]Progress
	// openNames are written files named from their writer's file
	// descriptors while the run went on, and tries counts the polls that
	// looked for a file in vain (a file closed before any poll saw it
	// open is given up after maxNameTries).
	openNames map[FileKey]string
	tries     map[FileKey]int
	// handles are the files the downloading processes had open, by file
	// handle: their final names, wherever they were renamed to.
	handles *filehandle.Store
	// tmpfs are the sizes of files on tmpfs the downloading processes
	// had open, poll by poll (tmpfs.go).
	tmpfs *tmpfsSizes
	// fdMu guards what the watcher (watch.go) shares with Poll: handles,
	// tmpfs, openNames, tries and listed. watchStop ends the watcher,
	// which closes watchDone.
	fdMu      sync.Mutex
	watchStop chan struct{}
	watchDone chan struct{}
	// connWake reads the kernel's note that a tracked connection opened
	// while none was (bpf/download's conn_wake), which wakes the
	// watcher through opened.
	connWake *probe.Ring
	opened   chan struct{}
	// listed are the spans in which the watcher listed each receiving
	// process's open files.
	listed listings
	// downloadSaid is set once OnDownload was told of a download.
	downloadSaid bool
	// tableWrites is the kernel's count of writes to the connection and
	// written-file tables at the last walk of them (walked is false
	// before the first); unnamed counts written files the last walk
	// left to look for again.
	tableWrites uint64
	walked      bool
	unnamed     int

	// startMono is when the command was released (Begin): record times
	// count from it.
	startMono uint64

	mu     sync.Mutex
	closed []Conn // downloads reported at close
	// dropped are connections that closed without being downloads, whose
	// progress the next Poll forgets; kept only once Poll is in use.
	dropped []ConnKey
	polling bool
}

// New loads and attaches the network probes (Prepare, then Start).
func New(opts Options) (*Sensor, error) {
	s, err := Prepare(opts)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Prepare loads the network probes with the core's tracked set. It
// attaches nothing: call Start.
func Prepare(shared Options) (*Sensor, error) {
	if shared.TaskStates == nil || shared.Threads == nil || shared.Tracked == nil {
		return nil, errors.New("load network probes: the core's task_states, threads and tracked_tgids maps are required")
	}
	s := &Sensor{progress: map[ConnKey][]Progress{}, openNames: map[FileKey]string{}, tries: map[FileKey]int{}, rights: shared.Rights, handles: newHandles(),
		listed:     listings{},
		onDownload: shared.OnDownload, internStack: shared.InternStack, stackPID: shared.StackPID, chained: shared.Chained}
	s.tmpfs = newTmpfsSizes(s.sinceStart)
	s.scoper = shared.Uprobes
	if s.scoper == nil {
		s.scoper, s.ownScoper = uprobes.New(uprobes.Options{}), true
	}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		bpfdl.DownloadMapTaskStates:   shared.TaskStates,
		bpfdl.DownloadMapThreads:      shared.Threads,
		bpfdl.DownloadMapTrackedTgids: shared.Tracked,
	}, Cache: shared.BTF}
	for k, v := range shared.Stacks {
		opts.MapReplacements[k] = v
	}
	spec, err := bpfdl.LoadDownload()
	if err != nil {
		return nil, fmt.Errorf("load network probes: %w", err)
	}
	if shared.Stacks == nil {
		shrinkWalker(spec)
	} else if err := spec.Variables[bpfdl.DownloadVarPyStacksOn].Set(uint32(1)); err != nil {
		// Connections of threads without a Python stack take their leaf
		// native frame.
		return nil, fmt.Errorf("load network probes: %w", err)
	}
	if err := s.scoper.Prepare(spec, bpfdl.DownloadProgOnGetaddrinfo, bpfdl.DownloadProgOnGaiReturn); err != nil {
		return nil, fmt.Errorf("load network probes: %w", err)
	}
	if s.sendNames, err = probe.HasTracepoint(shared.BTF, "tcp_sendmsg_locked"); err != nil {
		return nil, fmt.Errorf("load network probes: %w", err)
	}
	if !s.sendNames {
		probe.StubProgram(spec.Programs[bpfdl.DownloadProgOnSend])
	}
	if err := spec.LoadAndAssign(&s.objs, opts); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load network probes (verifier rejected them): %+v", verr)
		}
		return nil, fmt.Errorf("load network probes: %w", err)
	}
	s.rx = &rxSlots{m: s.objs.RxSlots}
	return s, nil
}

// tracepoints are the sensor's BTF tracepoint programs by name; the
// write program only when it is not chained.
func (s *Sensor) tracepoints() map[string]*ebpf.Program {
	p := map[string]*ebpf.Program{
		bpfdl.DownloadProgOnRecv:      s.objs.OnRecv,
		bpfdl.DownloadProgOnSockState: s.objs.OnSockState,
	}
	if !s.chained {
		p[bpfdl.DownloadProgOnDlWrite] = s.objs.OnDlWrite
	}
	if s.sendNames {
		p[bpfdl.DownloadProgOnSend] = s.objs.OnSend
	}
	return p
}

// WriteProgram is the program that links the pages a receiving thread
// inserts to its connection, for the page-cache object's chain
// (Options.Chained).
func (s *Sensor) WriteProgram() *ebpf.Program { return s.objs.OnDlWrite }

// Programs are the sensor's BPF programs by name, for cost accounting
// (bpf_stats).
func (s *Sensor) Programs() map[string]*ebpf.Program {
	p := s.tracepoints()
	p[bpfdl.DownloadProgOnDlWrite] = s.objs.OnDlWrite
	p[bpfdl.DownloadProgOnGetaddrinfo] = s.objs.OnGetaddrinfo
	p[bpfdl.DownloadProgOnGaiReturn] = s.objs.OnGaiReturn
	return p
}

// libcPaths are where the system's C library may be; the first that
// exists is known to the probes from the start.
var libcPaths = []string{
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/lib64/libc.so.6",
	"/usr/lib64/libc.so.6",
}

// Start attaches the probes and starts draining closed connections.
// Connections opened before Start are not seen.
func (s *Sensor) Start() error {
	for name, p := range s.tracepoints() {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach %s: %w", name, err)
		}
		s.links = append(s.links, l)
	}
	if err := s.attachResolver(); err != nil {
		return err
	}
	if err := s.startConnWake(); err != nil {
		return err
	}
	// Closed connections are queued without a wake-up until the ring
	// is half full: they are needed at the end, and a client that opens
	// a connection per request would otherwise wake the reader at each.
	ring, err := probe.StartRing(s.objs.ClosedConns, closedLook, closedLookIdle, s.handleClosed)
	if err != nil {
		return fmt.Errorf("network records: %w", err)
	}
	s.closedRing = ring
	return nil
}

// closedLook and closedLookIdle are how often the closed connections
// are looked at while they come, and at most while none do.
const (
	closedLook     = time.Second
	closedLookIdle = 10 * time.Second
)

// downloadBytes is what a tracked connection shaped like a download
// (Conn.downloadShaped) has received when its process is said to be
// downloading (Shared.OnDownload): a conversation of small messages
// passes 1 MiB within a second too.
const downloadBytes = 1 << 20

// attachResolver probes getaddrinfo in the C library of every traced
// process (the system's is known from the start: the command is probed
// from its first call), so that downloads can carry the host name their
// peer was looked up by. Other processes never trap on it.
func (s *Sensor) attachResolver() error {
	for _, p := range libcPaths {
		// A fixed system path, not one a process named.
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if err := s.scoper.AddFile(f, p); err != nil {
			return fmt.Errorf("the getaddrinfo probes: %w", err)
		}
		break
	}
	s.resolver = &uprobes.Set{Name: "network", Entry: s.objs.OnGetaddrinfo, Return: s.objs.OnGaiReturn,
		Targets: []uprobes.Target{{Name: "libc.so.6:getaddrinfo", Lib: "libc.so.6", Symbol: "getaddrinfo"}},
		Gate:    resolverGate()}
	s.scoper.Add(s.resolver)
	return nil
}

// resolverGate keeps the getaddrinfo probe out of programs that cannot
// look a name up: its breakpoint makes each fork of the process copy the
// page table of libc's text, which a shell loop or a build's driver pays
// at every child. getaddrinfo_a (libc's since 2.34) calls getaddrinfo
// inside libc. The quiet libraries are glibc's own, the compilers'
// runtimes and the compression, terminal, regex and security libraries
// the system's tools need (none of them resolves names): a program that
// needs any other library (libcurl, libcrypto, libpython) is probed from
// its start, as is one that imports getaddrinfo itself (bash, git, node,
// Debian's python3).
func resolverGate() *uprobes.Gate {
	return &uprobes.Gate{Symbols: []string{"getaddrinfo", "getaddrinfo_a"},
		Quiet: []string{"libc", "libm", "libdl", "libpthread", "librt", "libutil", "libcrypt", "libmvec",
			"ld-linux-x86-64", "ld-linux-aarch64", "libgcc_s", "libstdc++", "libatomic",
			"libz", "libzstd", "liblzma", "libbz2", "liblz4", "libtinfo", "libncursesw", "libncurses",
			"libselinux", "libpcre2-8", "libacl", "libattr", "libcap", "libgmp", "libmpfr", "libmpc", "libisl"}}
}

// Track probes getaddrinfo in a process the caller traces (only needed
// when the sensor keeps its own Scoper: the session's is told by the
// scheduler's tracked set).
func (s *Sensor) Track(pid int32) {
	if s.ownScoper {
		s.scoper.Track(pid, false)
	}
}

// handleClosed keeps one closed connection's record.
func (s *Sensor) handleClosed(raw []byte) {
	c, ok := probe.Decode[bpfdl.DownloadConn](raw, unsafe.Sizeof(bpfdl.DownloadConn{}))
	if !ok {
		return
	}
	conn := decodeConn(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only what may be part of a download is kept: a client that opens a
	// connection per small request would otherwise fill memory over a
	// long run. Parts (below a download alone) stop being kept past
	// maxClosedParts: whole downloads always are.
	if conn.IsDownload() || (conn.Bytes >= minPartBytes && conn.downloadShaped() && len(s.closed) < maxClosedParts) ||
		(conn.silentFor(0) >= record.SilentMinNS && len(s.closed) < maxClosedParts) {
		s.closed = append(s.closed, conn)
	} else if s.polling {
		s.dropped = append(s.dropped, ConnKey{conn.Sk, conn.ID})
	}
}

// maxClosedParts bounds the closed connections kept (about 150 bytes
// each, with their progress) that may be parts of a download fed by
// several connections.
const maxClosedParts = 1 << 16

// sinceStart is the time since the command was released (ns).
func (s *Sensor) sinceStart() int64 {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() - int64(s.startMono)
}

// Begin notes when the command was released (CLOCK_MONOTONIC ns): the
// record's download times count from it.
// It starts the watcher of receiving processes' tmpfs files (watch.go)
// once the probes are started.
func (s *Sensor) Begin(startMono uint64) {
	s.startMono = startMono
	if s.closedRing != nil {
		s.startWatch()
	}
}

// Poll notes the bytes each open connection has received so far, for the
// timeline's network counter; the session calls it at each sampling
// tick, with the monotonic time (ns). The thread sample is the
// scheduler's: downloads add nothing to it. A download's samples are
// only as fine as the polls. Only connections that are, or may still
// become, downloads keep their progress, so chatter over a long run
// costs no memory; one that qualifies late gets its earlier bytes in its
// first sample. Poll also tells OnDownload of the first connection
// shaped like a download that received downloadBytes, and names the
// files being written.
func (s *Sensor) Poll(nowMono uint64, sample *record.Sample) error {
	if s.ownScoper {
		if err := s.scoper.Poll(nowMono, sample); err != nil {
			return err
		}
	}
	writes, err := probe.SumPerCPU(s.objs.TableWrites, 0)
	if err != nil {
		return fmt.Errorf("poll network tables: %w", err)
	}
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	// The tmpfs files' sizes every poll: a writer may go on after the
	// last byte received, when the connection table no longer moves.
	s.tmpfs.poll()
	if !s.walked || writes != s.tableWrites || s.unnamed > 0 {
		// Read before the walk: a write during it moves it again.
		s.tableWrites, s.walked = writes, true
		if err := s.walk(nowMono); err != nil {
			return err
		}
	}
	s.mu.Lock()
	dropped := s.dropped
	s.dropped, s.polling = nil, true
	s.mu.Unlock()
	for _, k := range dropped {
		delete(s.progress, k)
	}
	return nil
}

// walk reads the connection table into the progress of each open
// connection, says when a download shows, and names the files downloads
// write while they are open (tmpfs files' sizes included).
func (s *Sensor) walk(nowMono uint64) error {
	seen := false
	var downloader int32
	active := map[int32]bool{} // processes whose downloads moved
	err := s.eachOpenConn(func(raw *bpfdl.DownloadConn) {
		if raw.Bytes == 0 {
			return
		}
		c := decodeConn(raw)
		if c.Bytes >= downloadBytes && c.downloadShaped() {
			seen, downloader = true, c.PID
		}
		k := ConnKey{c.Sk, c.ID}
		if c.Bytes >= MinBytes && !c.IsDownload() {
			delete(s.progress, k)
			return
		}
		p := s.progress[k]
		// Not below the last poll's: a thread's counts that were being
		// folded into the entry as it was read are in neither.
		if len(p) > 0 && p[len(p)-1].Bytes >= c.Bytes {
			return
		}
		if c.Bytes >= minPartBytes && c.downloadShaped() {
			active[c.PID] = true
		}
		s.progress[k] = append(p, Progress{TS: nowMono, Bytes: c.Bytes})
	})
	if err != nil {
		return fmt.Errorf("poll network connections: %w", err)
	}
	for pid := range active {
		s.handles.TakeOpen(pid)
		s.tmpfs.watch(pid, s.openNames)
		s.listed.add(pid, s.sinceStart())
	}
	if seen && s.links != nil && !s.downloadSaid {
		s.downloadSaid = true
		if s.onDownload != nil {
			s.onDownload(downloader)
		}
	}
	return s.nameWrites()
}

// maxNameTries is how many polls look for a written file among its
// writer's file descriptors before giving up on it.
const maxNameTries = 5

// nameWrites names the written files that are open in their writer now:
// a file on tmpfs is in no page-cache table, and once closed, renamed
// into place and the writer gone, nothing else would name it.
func (s *Sensor) nameWrites() error {
	var wk bpfdl.DownloadWriteKey
	var ws bpfdl.DownloadWriteStats
	s.unnamed = 0
	it := s.objs.Writes.Iterate()
	for it.Next(&wk, &ws) {
		k := FileKey{Dev: wk.Dev, Ino: wk.Ino, Gen: wk.Gen}
		if _, named := s.openNames[k]; named || s.tries[k] >= maxNameTries {
			continue
		}
		if p := openPath(ws.Tgid, k); p != "" {
			s.openNames[k] = p
			delete(s.tries, k)
		} else if s.tries[k]++; s.tries[k] < maxNameTries {
			s.unnamed++
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("poll files written by downloads: %w", err)
	}
	return nil
}

// Finish detaches the probes, gathers every connection and written file,
// and fills rec.Downloads. It runs after the command exited, once the core
// filled rec.Files (the paths of written files) and rec.Samples, and the
// JIT sensor rec.JIT (the caches destinations are matched with).
func (s *Sensor) Finish(rec *record.Record) error {
	s.stopWatch()
	conns, writes, err := s.collect()
	if err != nil {
		return err
	}
	// The tmpfs files' last writes, after the last poll.
	s.tmpfs.poll()
	s.tmpfs.close()
	final := finalNames(s.handles)
	build := func() error {
		rec.Downloads = Build(conns, writes, Env{
			StartMono:  s.startMono,
			Locate:     fileLocator(rec.Files, s.openNames, final),
			Samples:    rec.Samples,
			IntervalNS: rec.IntervalNS,
			Files:      rec.Files,
			PageSize:   uint64(cmp.Or(rec.Host.PageSize, os.Getpagesize())),
			Progress:   s.progress,
			Polled:     s.tmpfs.written(),
			Listed:     s.listed.during,
		})
		return nil
	}
	if s.rights != nil {
		err = s.rights.Do(build)
	} else {
		err = build()
	}
	if err != nil {
		return fmt.Errorf("locate downloaded files: %w", err)
	}
	s.downloadStacks(rec, conns)
	for i := range rec.Downloads {
		d := &rec.Downloads[i]
		if d.Path == "" {
			continue
		}
		d.Name = hubName(d.Path)
		if d.Name == "" {
			d.Name = filepath.Base(d.Path)
		}
		if d.Destination == record.DestUnpacked {
			d.Name += "/" // a directory of files
		}
		if rec.JIT != nil {
			d.Cache = cacheOf(d.Path, rec.JIT.Caches)
			if d.Cache == "" {
				if k := keptCopy(*d, rec.JIT.Caches); k != nil {
					d.KeptIn, d.Cache = k, cacheOf(k.Path, rec.JIT.Caches)
				}
			}
		}
	}
	s.tmpfs.fileRows(rec, uint64(cmp.Or(rec.Host.PageSize, os.Getpagesize())))
	rec.Silent = Silent(conns, Env{StartMono: s.startMono, Samples: rec.Samples, IntervalNS: rec.IntervalNS},
		s.startMono+uint64(max(rec.WallNS, 0)))
	if err := s.lost(rec); err != nil {
		return err
	}
	if st := s.scoper.States(s.resolver); len(rec.Downloads) > 0 && st[0].Processes == 0 {
		why := "no traced process mapped a C library"
		switch {
		case st[0].Error != "":
			why = st[0].Error
		case st[0].Unprobed > 0:
			why = fmt.Sprintf("none of the %d traced processes imports it", st[0].Unprobed)
		}
		rec.Warnings = append(rec.Warnings, "network: getaddrinfo was not probed ("+why+"): downloads carry no host names")
	}
	return nil
}

// peerAddr reads a 16-byte address as the probes store them: IPv4 in the
// first 4 bytes; an IPv4-mapped IPv6 address reads as IPv4.
func peerAddr(family uint16, b [16]byte) netip.Addr {
	if family == unix.AF_INET {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b).Unmap()
}

// collect stops the probes and returns every connection (closed ones from
// the ring buffer, open ones from the map) and every written file.
func (s *Sensor) collect() ([]Conn, []Write, error) {
	if err := s.detach(); err != nil {
		return nil, nil, err
	}
	if s.closedRing != nil {
		if err := s.closedRing.Drain(5 * time.Second); err != nil {
			return nil, nil, fmt.Errorf("read the closed connections: %w", err)
		}
	}
	s.mu.Lock()
	conns := append([]Conn(nil), s.closed...)
	s.mu.Unlock()

	if err := s.eachOpenConn(func(c *bpfdl.DownloadConn) { conns = append(conns, decodeConn(c)) }); err != nil {
		return nil, nil, fmt.Errorf("read network connections: %w", err)
	}

	var writes []Write
	var wk bpfdl.DownloadWriteKey
	var ws bpfdl.DownloadWriteStats
	page := uint64(os.Getpagesize())
	wit := s.objs.Writes.Iterate()
	for wit.Next(&wk, &ws) {
		writes = append(writes, Write{Sk: wk.Sk, ID: wk.Id, Dev: wk.Dev, Ino: wk.Ino, Gen: wk.Gen,
			Bytes: ws.Pages * page, FirstTS: ws.FirstTs, LastTS: ws.LastTs})
	}
	if err := wit.Err(); err != nil {
		return nil, nil, fmt.Errorf("read files written by downloads: %w", err)
	}
	return conns, writes, nil
}

// detach closes the probes' links all at once: removing a uprobe from
// libc walks every process that maps it (about 180 ms each here), and
// one at a time the two getaddrinfo probes doubled coldtrace's wait at
// the end of every run.
func (s *Sensor) detach() error {
	errs := make([]error, len(s.links))
	var wg sync.WaitGroup
	for i, l := range s.links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	s.links = nil
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("detach network probes: %w", err)
		}
	}
	return nil
}

// lost adds what the kernel side could not record to rec: its count to
// rec.Lost.Network, and a warning that says what was lost.
func (s *Sensor) lost(rec *record.Record) error {
	n, err := probe.Lost(s.objs.NetLost, bpfdl.DownloadDlLostDL_RINGBUF, bpfdl.DownloadDlLostDL_CONNS, bpfdl.DownloadDlLostDL_WRITES)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	ring, conns, writes := n[bpfdl.DownloadDlLostDL_RINGBUF], n[bpfdl.DownloadDlLostDL_CONNS], n[bpfdl.DownloadDlLostDL_WRITES]
	if ring+conns+writes == 0 {
		return nil
	}
	rec.Lost.Network += ring + conns + writes
	rec.Warnings = append(rec.Warnings, fmt.Sprintf(
		"network: %d closed connections unreported, %d connections untracked (table full), %d written files unlinked: downloads are lower bounds",
		ring, conns, writes))
	return nil
}

// Close detaches the probes, closes the reader and then the objects,
// keeping the first error.
func (s *Sensor) Close() error {
	s.stopWatch()
	first := s.detach()
	if s.ownScoper {
		if err := s.scoper.Close(); err != nil && first == nil {
			first = fmt.Errorf("detach getaddrinfo probes: %w", err)
		}
		s.ownScoper = false
	}
	s.handles.Close()
	s.tmpfs.close()
	if s.connWake != nil {
		if err := s.connWake.Close(); err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = fmt.Errorf("close connection wake-up ring buffer: %w", err)
		}
		s.connWake = nil
	}
	if s.closedRing != nil {
		if err := s.closedRing.Close(); err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = fmt.Errorf("close network ring buffer: %w", err)
		}
		s.closedRing = nil
	}
	if err := s.objs.Close(); err != nil && first == nil {
		first = fmt.Errorf("close network probes: %w", err)
	}
	return first
}

func decodeConn(c *bpfdl.DownloadConn) Conn {
	addr := peerAddr(c.Family, c.Daddr)
	host := probe.CString(c.Host[:])
	return Conn{
		Host: host, HostFrom: hostFrom(c.HostFrom, len(host)),
		Sk: c.Sk, ID: c.Id, Stack: c.Stack,
		PID: int32(c.Tgid), TID: int32(c.Tid), RxTID: int32(c.RxTid),
		Peer:    netip.AddrPortFrom(addr, c.Dport),
		FirstTS: c.FirstTs, LastTS: c.LastTs,
		Bytes: c.Bytes, Receives: c.Recvs, Sent: c.Sent,
		EstablishedTS: c.EstablishedTs, EndTS: c.EndTs,
		GaiStart: c.GaiStart, GaiEnd: c.GaiEnd,
	}
}

// hostFrom names where a connection's host name came from
// (record.HostFrom*), "" when it has none.
func hostFrom(from uint32, hostLen int) string {
	if hostLen == 0 {
		return ""
	}
	switch bpfdl.DownloadHostFrom(from) {
	case bpfdl.DownloadHostFromHOST_LOOKUP:
		return record.HostFromLookup
	case bpfdl.DownloadHostFromHOST_TLS_SNI:
		return record.HostFromTLS
	case bpfdl.DownloadHostFromHOST_HTTP:
		return record.HostFromHTTP
	}
	return ""
}
