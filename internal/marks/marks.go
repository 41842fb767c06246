// Package marks is the state directory of running traces: each listens on
// a unix datagram socket (one datagram is one mark's label) and lists the
// processes it traces, so `coldtrace mark` can find it and a second
// attach to the same process is refused.
//
// An entry is PID.sock (the socket, owned by the user the trace acts
// for), PID.pids (the processes traced) and PID.start (the tracer's start
// time). A tracer killed with SIGKILL leaves its entry behind, and its pid
// is reused in time: an entry whose pid is dead, whose pid started at
// another time than the one recorded, or whose socket refuses connections
// is stale, left out of every listing, and removed (by root, who owns the
// directory).
package marks

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Dir is the state directory (docs/definitions.md, "State directory").
const Dir = "/run/coldtrace"

// Env is the variable that hands a traced program its trace's socket.
const Env = "COLDTRACE_MARK"

// MaxLabel is the longest label kept, in bytes.
const MaxLabel = 200

// ErrNoTrace is returned by Find when no trace is running.
var ErrNoTrace = errors.New("no coldtrace trace is running")

// ErrNotYours is returned by Find for a trace run for another user.
var ErrNotYours = errors.New("not yours to mark")

// Listener is one trace's socket and process list.
type Listener struct {
	dir  string
	pid  int
	conn *net.UnixConn
	// C receives each mark as it arrives.
	C <-chan Mark
}

// Mark is one mark: its label, and when its datagram was read
// (CLOCK_MONOTONIC, ns). The reading goroutine does nothing else, so a
// tracer busy polling its sensors when the mark comes still places it
// where it was sent.
type Mark struct {
	Label  string
	MonoNS uint64
}

// monotonicNS is CLOCK_MONOTONIC now, the tracer's clock.
func monotonicNS() uint64 {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux: the clock id is valid and
	// the pointer is ours.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// Listen creates dir (root-owned 0755) and this trace's socket in it,
// named by the tracer's pid, writable by uid only (and root).
func Listen(dir string, uid, gid int) (*Listener, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	pid := os.Getpid()
	path := SocketPath(dir, pid)
	removeEntry(dir, pid) // a stale entry of a dead trace with this pid
	// The start time is in place before the socket: a listed socket
	// always has one.
	if err := writeStart(dir, pid); err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("mark socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		conn.Close()
		return nil, fmt.Errorf("mark socket: %w", err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		conn.Close()
		return nil, fmt.Errorf("mark socket: %w", err)
	}
	c := make(chan Mark, 64)
	l := &Listener{dir: dir, pid: pid, conn: conn, C: c}
	go func() {
		buf := make([]byte, 4096)
		defer close(c)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // closed
			}
			at := monotonicNS()
			c <- Mark{Label: CleanLabel(string(buf[:n])), MonoNS: at}
		}
	}()
	return l, nil
}

// SocketPath is the socket of the trace run by tracer pid.
func SocketPath(dir string, pid int) string {
	return filepath.Join(dir, strconv.Itoa(pid)+".sock")
}

func pidsPath(dir string, pid int) string {
	return filepath.Join(dir, strconv.Itoa(pid)+".pids")
}

func startPath(dir string, pid int) string {
	return filepath.Join(dir, strconv.Itoa(pid)+".start")
}

// StartTime is when process pid started, in clock ticks after boot
// (/proc/PID/stat, field 22): with the pid it names one process, not
// whichever holds that pid later.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after its last ')' start at field 3.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("start time of pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("start time of pid %d: malformed stat", pid)
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d: %w", pid, err)
	}
	return v, nil
}

func writeStart(dir string, pid int) error {
	start, err := StartTime(pid)
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	tmp := startPath(dir, pid) + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(start, 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	if err := os.Rename(tmp, startPath(dir, pid)); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// removeEntry removes what trace pid left in dir. Only root may (the
// directory is root's); others leave it for root.
func removeEntry(dir string, pid int) {
	for _, p := range []string{SocketPath(dir, pid), pidsPath(dir, pid), startPath(dir, pid)} {
		_ = os.Remove(p)
	}
}

// Path is this trace's socket.
func (l *Listener) Path() string { return SocketPath(l.dir, l.pid) }

// Tracing writes the processes the trace follows (world-readable: the
// pids are no secret, and mark --pid looks them up).
func (l *Listener) Tracing(pids []int) error {
	var b strings.Builder
	for _, p := range pids {
		fmt.Fprintf(&b, "%d\n", p)
	}
	tmp := pidsPath(l.dir, l.pid) + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	if err := os.Rename(tmp, pidsPath(l.dir, l.pid)); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// Close removes the socket and the process list.
func (l *Listener) Close() error {
	err := l.conn.Close()
	for _, p := range []string{l.Path(), pidsPath(l.dir, l.pid), startPath(l.dir, l.pid)} {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// CleanLabel keeps a label printable: one line, valid UTF-8, at most
// MaxLabel bytes.
func CleanLabel(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	for len(s) > MaxLabel {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// Trace is one running trace as the state directory lists it.
type Trace struct {
	// Tracer is coldtrace's pid; Socket its mark socket.
	Tracer int
	Socket string
	// Owner is the socket's owner: the user the trace acts for.
	Owner uint32
	// PIDs are the processes it traces (as first listed).
	PIDs []int
}

// Running lists the traces whose tracer is alive, leaving out (and, as
// root, removing) stale entries.
func Running(dir string) ([]Trace, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	var out []Trace
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".sock")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		sock := filepath.Join(dir, e.Name())
		if stale(dir, pid, sock) {
			removeEntry(dir, pid)
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(sock, &st); err != nil {
			continue // removed meanwhile
		}
		t := Trace{Tracer: pid, Socket: sock, Owner: st.Uid}
		if b, err := os.ReadFile(pidsPath(dir, pid)); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if p, err := strconv.Atoi(f); err == nil {
					t.PIDs = append(t.PIDs, p)
				}
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tracer < out[j].Tracer })
	return out, nil
}

// stale reports an entry no live trace answers for: its pid is dead,
// started at another time than recorded (the pid was reused), or its
// socket refuses connections (no one listens). A socket the caller may
// not connect to is judged by the other two.
func stale(dir string, pid int, sock string) bool {
	if !alive(pid) {
		return true
	}
	if b, err := os.ReadFile(startPath(dir, pid)); err == nil {
		recorded, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		now, serr := StartTime(pid)
		if perr == nil && serr == nil && now != recorded {
			return true
		}
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist)
	}
	conn.Close()
	return false
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Find picks the trace to mark for a user: the one tracing pid when
// pid > 0 (or whose tracer is pid), else the only one running that
// mayMark allows. A trace found by pid that mayMark refuses fails with
// ErrNotYours; traces mayMark refuses are never listed in an error.
func Find(dir string, pid int, mayMark func(Trace) bool) (Trace, error) {
	ts, err := Running(dir)
	if err != nil {
		return Trace{}, err
	}
	var mine []Trace
	for _, t := range ts {
		if mayMark(t) {
			mine = append(mine, t)
		}
	}
	if pid > 0 {
		for _, t := range ts {
			if !follows(t, pid) {
				continue
			}
			if !mayMark(t) {
				return Trace{}, fmt.Errorf("pid %d is traced by coldtrace (pid %d) for another user (uid %d): %w", pid, t.Tracer, t.Owner, ErrNotYours)
			}
			return t, nil
		}
		if len(ts) == 0 {
			return Trace{}, ErrNoTrace
		}
		if len(mine) == 0 {
			return Trace{}, fmt.Errorf("no running trace of yours follows pid %d", pid)
		}
		return Trace{}, fmt.Errorf("no running trace of yours follows pid %d (%s)", pid, describe(mine))
	}
	switch {
	case len(mine) == 1:
		return mine[0], nil
	case len(mine) > 1:
		return Trace{}, fmt.Errorf("%d traces are running (%s): choose one with --pid", len(mine), describe(mine))
	case len(ts) > 0:
		return Trace{}, fmt.Errorf("%w for you (%d for other users)", ErrNoTrace, len(ts))
	}
	return Trace{}, ErrNoTrace
}

func follows(t Trace, pid int) bool {
	if t.Tracer == pid {
		return true
	}
	for _, p := range t.PIDs {
		if p == pid {
			return true
		}
	}
	return false
}

// TracedBy returns the tracer already following pid, or 0.
func TracedBy(dir string, pid int) (int, error) {
	ts, err := Running(dir)
	if err != nil {
		return 0, err
	}
	for _, t := range ts {
		if t.Tracer == os.Getpid() {
			continue
		}
		for _, p := range t.PIDs {
			if p == pid {
				return t.Tracer, nil
			}
		}
	}
	return 0, nil
}

func describe(ts []Trace) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		ps := make([]string, 0, len(t.PIDs))
		for _, p := range t.PIDs {
			ps = append(ps, strconv.Itoa(p))
		}
		parts = append(parts, fmt.Sprintf("trace %d follows pid %s", t.Tracer, strings.Join(ps, ",")))
	}
	return strings.Join(parts, "; ")
}

// Send sends one mark to the socket at path. It never blocks: with no
// trace listening it fails at once.
func Send(path, label string) error {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("mark: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(CleanLabel(label))); err != nil {
		return fmt.Errorf("mark: %w", err)
	}
	return nil
}
