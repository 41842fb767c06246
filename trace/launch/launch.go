package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// ShimArg is argv[1] of coldtrace re-executed as the gated shim. main
// checks for it before anything else and calls RunShim.
const ShimArg = "__coldtrace_shim"

// The shim's descriptors, as Start passes them (ExtraFiles start at 3).
const (
	fdGate   = 3 // read: one byte releases the shim
	fdStatus = 4 // write, close-on-exec: why the command could not start
	fdSpec   = 5 // read: the encoded Spec
	fdReady  = 6 // write: one byte once the shim waits on the gate
)

// readyTimeout bounds the wait for the shim to start and find the
// program: a program path on a hung network file system must not hold
// coldtrace, and root, forever.
const readyTimeout = 15 * time.Second

func init() {
	// The shim's main goroutine stays on the main thread, the one whose
	// pid coldtrace seeds and which execs the command.
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		runtime.LockOSThread()
	}
}

// CommandEnv is base with u's HOME, USER and LOGNAME, as sudo -H would
// give the user, when the command switches to u; base otherwise.
func CommandEnv(base []string, u actor.User, switchUser bool) []string {
	if !switchUser {
		return base
	}
	set := map[string]string{"HOME": u.Home, "USER": u.Name, "LOGNAME": u.Name}
	out := make([]string, 0, len(base)+3)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range []string{"HOME", "USER", "LOGNAME"} {
		if set[k] != "" {
			out = append(out, k+"="+set[k])
		}
	}
	return out
}

// Child is the command, started as a shim that waits on a pipe until the
// probes are attached, in a process group of its own.
type Child struct {
	cmd    *exec.Cmd
	gate   *os.File // write end: one byte releases the shim
	status *os.File // read end: the shim writes why exec failed
	// programFDs are the shim's descriptors of the program it will
	// execute and of those its arguments name (FirstPrograms), opened
	// with the command's rights; none when it could not tell.
	programFDs []int
}

// Stdio are the command's standard files.
type Stdio struct {
	Stdin, Stdout, Stderr *os.File
}

// Start starts the shim for spec and returns once the shim is ready: it
// has taken the command's user, found the program and waits on the gate,
// so that from here on the shim itself starts no thread and reads no
// page before the exec. With foreground, the command's process group
// gets the terminal on stdin.
func Start(spec Spec, stdio Stdio, foreground bool) (*Child, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("start the command: empty argv")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find coldtrace's own executable: %w", err)
	}
	specFile, err := specMemfd(spec)
	if err != nil {
		return nil, err
	}
	defer specFile.Close()
	var pipes [3][2]*os.File // gate, status, ready: read and write ends
	closeAll := func() {
		for _, p := range pipes {
			for _, f := range p {
				if f != nil {
					f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("shim pipe: %w", err)
		}
		pipes[i] = [2]*os.File{r, w}
	}
	gateR, gateW := pipes[0][0], pipes[0][1]
	statusR, statusW := pipes[1][0], pipes[1][1]
	readyR, readyW := pipes[2][0], pipes[2][1]

	// The shim's own argv and environment are small: what the command
	// gets travels in the spec, so only the command's exec meets the
	// kernel's limits.
	cmd := &exec.Cmd{Path: self, Args: []string{shimName(spec.Argv[0]), ShimArg}, Env: []string{}}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	cmd.ExtraFiles = []*os.File{gateR, statusW, specFile, readyW}
	// A process group of its own: signals coldtrace forwards reach the
	// command and what it started, not coldtrace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if foreground {
		// The command gets the terminal, so Ctrl-C reaches it once, from
		// the terminal, and not again through coldtrace.
		cmd.SysProcAttr = &syscall.SysProcAttr{Foreground: true, Ctty: 0}
	}
	err = cmd.Start()
	gateR.Close()
	statusW.Close()
	readyW.Close()
	if err != nil {
		gateW.Close()
		statusR.Close()
		readyR.Close()
		return nil, fmt.Errorf("start %s: %w", self, err)
	}
	c := &Child{cmd: cmd, gate: gateW, status: statusR}
	c.programFDs, err = waitReady(readyR)
	readyR.Close()
	if errors.Is(err, errShimExited) {
		// It said why on the status pipe before exiting.
		if msg, _ := io.ReadAll(statusR); len(msg) > 0 {
			err = fmt.Errorf("%w: %s", err, msg)
		}
	}
	if err != nil {
		c.Abort()
		return nil, err
	}
	return c, nil
}

// shimName is the shim's argv[0]: the command's name, so that ps shows
// what is about to run, cut to a size that cannot fail the shim's exec.
func shimName(arg0 string) string {
	if len(arg0) > 4096 {
		return arg0[:4096]
	}
	return arg0
}

// specMemfd is spec in an anonymous memory file the shim reads from
// fdSpec: no size limit, and nothing on disk.
func specMemfd(spec Spec) (*os.File, error) {
	fd, err := unix.MemfdCreate("coldtrace-shim-spec", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shim spec: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "coldtrace-shim-spec")
	if _, err := f.Write(spec.encode()); err != nil {
		f.Close()
		return nil, fmt.Errorf("shim spec: write: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("shim spec: rewind: %w", err)
	}
	return f, nil
}

// waitReady reads the shim's ready message: a byte, then the numbers of
// its descriptors of the programs (FirstPrograms), one byte each.
func waitReady(ready *os.File) (programFDs []int, err error) {
	if err := ready.SetReadDeadline(time.Now().Add(readyTimeout)); err != nil {
		return nil, fmt.Errorf("wait for the shim: %w", err)
	}
	// The shim writes its message at once and closes the pipe.
	b, err := io.ReadAll(io.LimitReader(ready, 1+maxFirstPrograms))
	switch {
	case len(b) > 0:
		for _, fd := range b[1:] {
			programFDs = append(programFDs, int(fd))
		}
		return programFDs, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("the command's shim was not ready after %v (is the program on a hung file system?)", readyTimeout)
	}
	return nil, errShimExited
}

var errShimExited = errors.New("the command's shim exited before it was ready")

// Pid is the command's pid (the shim's, which execs the command).
func (g *Child) Pid() int { return g.cmd.Process.Pid }

// FirstPrograms opens the program the shim will execute and the programs
// its arguments name (see firstPrograms), through the shim's own
// descriptors of them (opened with the command's rights, never by a path
// here): what the uprobe gates read before the command runs. An error
// means the shim could not tell them all. It must be called before
// Release.
func (g *Child) FirstPrograms() ([]*os.File, error) {
	if len(g.programFDs) == 0 {
		return nil, errors.New("the shim could not open the programs the command may run first")
	}
	var out []*os.File
	for _, fd := range g.programFDs {
		p := fmt.Sprintf("/proc/%d/fd/%d", g.cmd.Process.Pid, fd)
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("open the command's program: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// Release lets the shim exec the command and reports an exec failure.
func (g *Child) Release() error {
	_, err := g.gate.Write([]byte{1})
	g.gate.Close()
	if err != nil {
		return fmt.Errorf("release command: %w", err)
	}
	msg, err := io.ReadAll(g.status)
	g.status.Close()
	if err != nil {
		return fmt.Errorf("read the command's start status: %w", err)
	}
	if len(msg) > 0 {
		return errors.New(string(msg))
	}
	return nil
}

// Abort kills a shim that will never be released.
func (g *Child) Abort() {
	g.gate.Close()
	g.status.Close()
	// The shim may have died already; either way it is reaped here.
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
}

// Wait waits for the command to exit. Its error says only that the
// command failed, which the state tells better.
func (g *Child) Wait() *os.ProcessState {
	_ = g.cmd.Wait()
	return g.cmd.ProcessState
}

// SignalGroup sends sig to the command's process group.
func (g *Child) SignalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-g.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal the command's process group %d: %w", g.cmd.Process.Pid, err)
	}
	return nil
}

// RunShim is the gated child. It reads its spec, takes the command's user
// and finds the program, says it is ready, waits for the release byte and
// execs the command; it does all it can before the gate so that what
// runs after it is the command alone. A failure is written to the status
// pipe after the release (the run then records why the command could not
// start) and the shim exits 127. It never returns.
func RunShim() {
	if len(os.Args) > 3 && os.Args[2] == watchMode {
		runWatch()
	}
	status := os.NewFile(fdStatus, "status")
	unix.CloseOnExec(fdStatus)
	unix.CloseOnExec(fdSpec)
	specFile := os.NewFile(fdSpec, "spec")
	raw, err := io.ReadAll(specFile)
	specFile.Close()
	if err != nil {
		fmt.Fprintf(status, "coldtrace shim: read spec: %v", err)
		os.Exit(127)
	}
	spec, err := decodeSpec(raw)
	if err != nil {
		fmt.Fprintf(status, "coldtrace shim: bad spec: %v", err)
		os.Exit(127)
	}
	var why string
	path := ""
	if spec.SwitchUser {
		why = becomeUser(spec.User)
	}
	if why == "" {
		if path, err = findProgram(spec.Argv[0], spec.Env); err != nil {
			why = fmt.Sprintf("%s: %v", spec.Argv[0], err)
		}
	}
	ready := os.NewFile(fdReady, "ready")
	msg := []byte{1}
	if why == "" {
		for _, fd := range firstPrograms(path, spec.Argv, spec.Env) {
			msg = append(msg, byte(fd))
		}
	}
	_, _ = ready.Write(msg)
	ready.Close()
	gate := os.NewFile(fdGate, "gate")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 {
		os.Exit(127) // coldtrace gave up before releasing us
	}
	gate.Close()
	if why == "" {
		why = execProgram(path, spec.Argv, spec.Env)
	}
	fmt.Fprint(status, why)
	os.Exit(127)
}

// The bounds of firstPrograms: arguments looked at, words taken for
// program names in them, programs opened.
const (
	maxFirstArgs     = 32
	maxFirstWords    = 64
	maxFirstPrograms = 16
)

// firstPrograms opens, with the command's rights, the program path and
// the programs its arguments name: words of the first arguments (split
// as a shell would split a -c script, roughly) that are a path to an
// executable file or a program found in the command's PATH, skipping
// options and assignments. A command often runs another program in its
// own process (env, nice, timeout, sh -c 'curl …' execute it, or fork
// it at once), before coldtrace could look at it: these are what it may
// run first. None (the caller then assumes the worst) when path cannot be
// opened or the bounds are passed. The descriptors close at the exec.
func firstPrograms(path string, argv, env []string) []int {
	fd, ok := openProgram(path)
	if !ok {
		return nil
	}
	fds := []int{fd}
	fail := func() []int {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil
	}
	if len(argv) > maxFirstArgs {
		return fail()
	}
	words := 0
	for _, a := range argv[1:] {
		for _, w := range strings.FieldsFunc(a, shellSeparator) {
			if words++; words > maxFirstWords {
				return fail()
			}
			if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
				continue
			}
			p := w
			if !strings.Contains(w, "/") {
				var err error
				if p, err = findProgram(w, env); err != nil {
					continue
				}
			} else if unix.Access(p, unix.X_OK) != nil {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue // a directory or a device: no program
			}
			fd, ok := openProgram(p)
			if !ok {
				return fail() // a program the user may run but not read
			}
			if fds = append(fds, fd); len(fds) > maxFirstPrograms {
				return fail()
			}
		}
	}
	return fds
}

// shellSeparator splits a shell word list: blanks, operators and quotes.
func shellSeparator(r rune) bool {
	return strings.ContainsRune(" \t\n;&|()<>`'\"$", r)
}

// openProgram opens path, a regular file, with the command's rights, for
// coldtrace to read what the program can call before it runs (Child's
// FirstPrograms); ok false when it cannot (a program the user may execute
// but not read, or a descriptor number past a byte). The descriptor is
// closed by the exec.
func openProgram(path string) (fd int, ok bool) {
	var st unix.Stat_t
	// Only a regular file is opened: opening a device can act on it.
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, false
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, false
	}
	if fd > 255 {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// becomeUser changes every thread of the shim to u; it returns why not.
func becomeUser(u actor.User) string {
	groups := u.Groups
	if len(groups) == 0 {
		groups = []int{int(u.GID)}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Sprintf("set groups %v: %v", groups, err)
	}
	if err := syscall.Setgid(int(u.GID)); err != nil {
		return fmt.Sprintf("set gid %d: %v", u.GID, err)
	}
	if err := syscall.Setuid(int(u.UID)); err != nil {
		return fmt.Sprintf("set uid %d: %v", u.UID, err)
	}
	return ""
}

// execProgram execs path as execvp(3) does: a file the kernel does not
// recognize as a program (a script without "#!") is run by /bin/sh. It
// returns why the exec failed.
func execProgram(path string, argv, env []string) string {
	err := syscall.Exec(path, argv, env)
	if errors.Is(err, syscall.ENOEXEC) {
		err = syscall.Exec("/bin/sh", append([]string{"/bin/sh", path}, argv[1:]...), env)
	}
	if kind := notProgram(path); kind != "" && errors.Is(err, syscall.EACCES) {
		return fmt.Sprintf("%s: %s is %s, not an executable (%v)", argv[0], path, kind, err)
	}
	return fmt.Sprintf("%s: %v", argv[0], err)
}

// notProgram names what path is when it is no file a program could be
// in: the kernel refuses to exec a FIFO, socket or device with EACCES,
// which alone reads like a missing execute bit. It runs as the command's
// user, after the exec failed, so it tells nothing the user could not
// see; "" for a regular file, a directory or a path not there.
func notProgram(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	}
	return ""
}

// defaultPath is glibc's search path when PATH is unset.
const defaultPath = "/bin:/usr/bin"

// findProgram resolves name in env's PATH as execvp does: a name with a
// slash is used as is (exec reports what is wrong with it); otherwise the
// first executable non-directory, an empty entry meaning ".".
func findProgram(name string, env []string) (string, error) {
	if name == "" {
		return "", syscall.ENOENT
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	search := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	var firstErr error = syscall.ENOENT
	for _, dir := range strings.Split(search, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			if firstErr == syscall.ENOENT {
				firstErr = err
			}
			continue
		}
		return p, nil
	}
	return "", firstErr
}
