package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

// ShimArg is argv[1] of coldtrace re-executed as the gated shim. main
// checks for it before anything else and calls RunShim.
const ShimArg = "__coldtrace_shim"

const shimSpecEnv = "COLDTRACE_SHIM_SPEC"

// shimSpec tells the shim who to become; it travels in the environment and
// is removed before the command is executed.
type shimSpec struct {
	SetUser bool     `json:"set_user"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
	Groups  []int    `json:"groups"`
	Command []string `json:"command"`
}

// Identity is who the command runs as.
type Identity struct {
	Switch bool // false: run as coldtrace's own user
	record.User
	Groups []int
}

// ResolveIdentity decides who the command runs as: --user NAME when given,
// else the user who invoked sudo (SUDO_UID/SUDO_GID), else coldtrace's
// own user. Running as root under sudo would make the command read and
// fill /root's caches instead of the user's.
func ResolveIdentity(name string, getenv func(string) string) (Identity, error) {
	if name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			if _, numErr := strconv.Atoi(name); numErr == nil {
				u, err = user.LookupId(name)
			}
		}
		if err != nil {
			return Identity{}, fmt.Errorf("--user %s: %w", name, err)
		}
		return identityOf(u, -1)
	}
	if os.Geteuid() == 0 && getenv("SUDO_UID") != "" {
		uid, err := strconv.Atoi(getenv("SUDO_UID"))
		if err != nil {
			return Identity{}, fmt.Errorf("SUDO_UID=%q is not a number", getenv("SUDO_UID"))
		}
		gid := -1
		if s := getenv("SUDO_GID"); s != "" {
			if gid, err = strconv.Atoi(s); err != nil {
				return Identity{}, fmt.Errorf("SUDO_GID=%q is not a number", s)
			}
		}
		u, err := user.LookupId(strconv.Itoa(uid))
		if err != nil {
			// A uid without a passwd entry still runs; it keeps HOME.
			if gid < 0 {
				gid = uid
			}
			return Identity{Switch: true, User: record.User{UID: uint32(uid), GID: uint32(gid),
				Name: getenv("SUDO_USER"), Home: getenv("HOME")}, Groups: []int{gid}}, nil
		}
		return identityOf(u, gid)
	}
	u, err := user.Current()
	if err != nil {
		return Identity{User: record.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Home: getenv("HOME")}}, nil
	}
	id, err := identityOf(u, -1)
	id.Switch = false
	return id, err
}

func identityOf(u *user.User, gid int) (Identity, error) {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return Identity{}, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	if gid < 0 {
		if gid, err = strconv.Atoi(u.Gid); err != nil {
			return Identity{}, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
		}
	}
	groups := []int{gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && g != gid {
				groups = append(groups, g)
			}
		}
	}
	return Identity{Switch: true, User: record.User{UID: uint32(uid), GID: uint32(gid), Name: u.Username, Home: u.HomeDir},
		Groups: groups}, nil
}

// commandEnv is coldtrace's environment with the identity's HOME, USER and
// LOGNAME, as sudo -H would give the user.
func commandEnv(base []string, id Identity) []string {
	if !id.Switch {
		return base
	}
	set := map[string]string{"HOME": id.Home, "USER": id.Name, "LOGNAME": id.Name}
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
}

// Stdio are the command's standard files.
type Stdio struct {
	Stdin, Stdout, Stderr *os.File
}

// Start starts the shim for command as id, with environment env
// (coldtrace's own when nil; HOME, USER and LOGNAME are id's either way).
// With foreground, the command's process group gets the terminal on
// stdin.
func Start(command, env []string, id Identity, stdio Stdio, foreground bool) (*Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find coldtrace's own executable: %w", err)
	}
	spec := shimSpec{SetUser: id.Switch, UID: int(id.UID), GID: int(id.GID), Groups: id.Groups, Command: command}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode shim spec: %w", err)
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("gate pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		gateR.Close()
		gateW.Close()
		return nil, fmt.Errorf("status pipe: %w", err)
	}
	cmd := exec.Command(self, ShimArg)
	cmd.Args[0] = command[0]
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(commandEnv(env, id), shimSpecEnv+"="+string(specJSON))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	cmd.ExtraFiles = []*os.File{gateR, statusW}
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
	if err != nil {
		gateW.Close()
		statusR.Close()
		return nil, fmt.Errorf("start %s: %w", self, err)
	}
	return &Child{cmd: cmd, gate: gateW, status: statusR}, nil
}

// Pid is the command's pid (the shim's, which execs the command).
func (g *Child) Pid() int { return g.cmd.Process.Pid }

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

// RunShim is the gated child: it waits for the release byte on fd 3, takes
// the user's identity, and execs the command. On failure it writes the
// reason to fd 4 and exits 127. It never returns.
func RunShim() {
	gate := os.NewFile(3, "gate")
	status := os.NewFile(4, "status")
	unix.CloseOnExec(4)
	fail := func(format string, a ...any) {
		fmt.Fprintf(status, format, a...)
		os.Exit(127)
	}
	var spec shimSpec
	if err := json.Unmarshal([]byte(os.Getenv(shimSpecEnv)), &spec); err != nil || len(spec.Command) == 0 {
		fail("coldtrace shim: bad spec: %v", err)
	}
	os.Unsetenv(shimSpecEnv)
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 {
		os.Exit(127) // coldtrace gave up before releasing us
	}
	gate.Close()
	if spec.SetUser {
		if err := syscall.Setgroups(spec.Groups); err != nil {
			fail("set groups %v: %v", spec.Groups, err)
		}
		if err := syscall.Setgid(spec.GID); err != nil {
			fail("set gid %d: %v", spec.GID, err)
		}
		if err := syscall.Setuid(spec.UID); err != nil {
			fail("set uid %d: %v", spec.UID, err)
		}
	}
	path, err := exec.LookPath(spec.Command[0])
	if err != nil {
		if errors.Is(err, exec.ErrDot) {
			path, err = spec.Command[0], nil
		} else {
			var ee *exec.Error
			if errors.As(err, &ee) {
				err = ee.Err
			}
			fail("%s: %v", spec.Command[0], err)
		}
	}
	err = syscall.Exec(path, spec.Command, os.Environ())
	fail("%s: %v", spec.Command[0], err)
}
