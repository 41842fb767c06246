// Package marks is the state directory of running traces: each listens on
// a unix datagram socket (one datagram is one mark's label) and lists the
// processes it traces, so `coldtrace mark` can find it and a second
// attach to the same process is refused.
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
)

// Dir is the state directory (docs/definitions.md, "State directory").
const Dir = "/run/coldtrace"

// Env is the variable that hands a traced program its trace's socket.
const Env = "COLDTRACE_MARK"

// MaxLabel is the longest label kept, in bytes.
const MaxLabel = 200

// ErrNoTrace is returned by Find when no trace is running.
var ErrNoTrace = errors.New("no coldtrace trace is running")

// Listener is one trace's socket and process list.
type Listener struct {
	dir  string
	pid  int
	conn *net.UnixConn
	// C receives each mark's label as it arrives.
	C <-chan string
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
	_ = os.Remove(path) // a stale socket of a dead trace with this pid
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
	c := make(chan string, 64)
	l := &Listener{dir: dir, pid: pid, conn: conn, C: c}
	go func() {
		buf := make([]byte, 4096)
		defer close(c)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // closed
			}
			c <- CleanLabel(string(buf[:n]))
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
	for _, p := range []string{l.Path(), pidsPath(l.dir, l.pid)} {
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
	// PIDs are the processes it traces (as first listed).
	PIDs []int
}

// Running lists the traces whose tracer is alive.
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
		if err != nil || !alive(pid) {
			continue
		}
		t := Trace{Tracer: pid, Socket: filepath.Join(dir, e.Name())}
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

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Find picks the trace to mark: the one tracing pid when pid > 0 (or
// whose tracer is pid), else the only one running.
func Find(dir string, pid int) (Trace, error) {
	ts, err := Running(dir)
	if err != nil {
		return Trace{}, err
	}
	if len(ts) == 0 {
		return Trace{}, ErrNoTrace
	}
	if pid > 0 {
		for _, t := range ts {
			if t.Tracer == pid {
				return t, nil
			}
			for _, p := range t.PIDs {
				if p == pid {
					return t, nil
				}
			}
		}
		return Trace{}, fmt.Errorf("no running trace follows pid %d (%s)", pid, describe(ts))
	}
	if len(ts) > 1 {
		return Trace{}, fmt.Errorf("%d traces are running (%s): choose one with --pid", len(ts), describe(ts))
	}
	return ts[0], nil
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
