// Package actor decides who coldtrace acts for and does file work with that
// user's rights.
//
// Loading BPF needs root; nothing else does. Under sudo (SUDO_UID,
// SUDO_GID, SUDO_USER), doas (DOAS_USER) or pkexec (PKEXEC_UID) coldtrace
// acts for the user who invoked it: the command runs as them, and outputs,
// cache trees and any other file coldtrace opens on their behalf are
// reached with their rights (Actor.Do). A real root login (none of those
// variables) acts as root, and only there may --user name another user for
// the command. A sudoers rule for coldtrace therefore grants tracing of
// one's own work and nothing more.
//
// How Do takes the user's rights, and why a thread rather than a helper
// process: Linux checks file access against a thread's filesystem uid and
// gid, its supplementary groups and its effective capabilities, and all
// four are per thread in the kernel. Do runs the work on a goroutine locked
// to its OS thread and changes exactly those four for that thread with raw
// system calls (setgroups, setfsgid, setfsuid, capset); libc's and
// syscall.Setgroups' wrappers would change every thread of the process.
// The kernel drops CAP_DAC_OVERRIDE and the other filesystem capabilities
// when fsuid leaves 0; Do also clears the whole effective set, so nothing
// (CAP_SYS_RESOURCE on reserved blocks, say) is left to the work but the
// user's own rights, and it checks all of it before running the work. The
// Go runtime never clones a new thread from a thread locked with
// LockOSThread (it asks its template thread), so no other thread can
// inherit the user's identity. Afterwards Do restores the thread and
// checks it; if that fails it leaves the thread locked, and the Go runtime
// then ends the thread with the goroutine instead of reusing it. A helper
// process running as the user would be just as sound but needs every
// operation (create, rename, walk, stat) marshalled across a pipe; the
// thread needs none of that and costs microseconds.
//
// Rules for the work passed to Do: it must do its file operations on its
// own goroutine (a goroutine it starts runs with coldtrace's rights), and
// nothing in coldtrace may call set*id or setgroups on the whole process.
// File descriptors it opens keep the user's rights when used elsewhere,
// which is the point: an output opened as the user may be written by any
// goroutine.
package actor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// User is one account: who the command runs as or whose rights coldtrace
// uses. Groups holds GID first, then the supplementary groups.
type User struct {
	UID    uint32
	GID    uint32
	Groups []int
	Name   string
	Home   string
}

// Actor says for whom coldtrace works.
type Actor struct {
	// User is whose rights coldtrace uses for everything but BPF.
	User
	// Via names what gave the user: "sudo", "doas", "pkexec", or "" for
	// coldtrace's own user (a real root login, or a non-root run).
	Via string
	// Umask is the user's umask as coldtrace inherited it (sudo passes the
	// user's umask, combined with its own, default 022).
	Umask uint32
	// Command is who the command runs as: User, or --user NAME on a real
	// root login.
	Command User
	// SwitchCommand is true when the command must change to Command's
	// uid, gid and groups before exec (it is not coldtrace's own user).
	SwitchCommand bool
	// switchFiles is true when file work must take User's rights (they are
	// not the process's own).
	switchFiles bool
	// resolved is false in the zero Actor, which must not mean root.
	resolved bool
}

// ErrUnresolved is the error of Do on an Actor that Resolve or Self did
// not make: a forgotten Actor fails rather than acting as root.
var ErrUnresolved = errors.New("internal error: no actor resolved (who coldtrace acts for is unknown)")

// Resolved reports whether Resolve or Self made a: the zero Actor is no
// one, and code that takes an Actor may refuse it early.
func (a Actor) Resolved() bool { return a.resolved }

// IsRoot reports whether coldtrace acts with root's rights.
func (a Actor) IsRoot() bool { return a.UID == 0 }

// ErrUserUnderSudo is why --user is refused when coldtrace acts for an
// invoking user.
var ErrUserUnderSudo = errors.New("--user is only for a real root login")

// Resolve decides for whom coldtrace acts, from the --user flag (empty:
// not given) and the environment. It fails, rather than guess, on a
// malformed or contradictory variable: a wrong guess could mean root.
func Resolve(userFlag string, getenv func(string) string) (Actor, error) {
	return resolve(userFlag, getenv, os.Geteuid(), os.Getegid(), osAccounts{})
}

// Self is coldtrace's own user with no change of rights: for tools and
// tests that act for whoever runs them.
func Self() (Actor, error) {
	return resolve("", func(string) string { return "" }, os.Geteuid(), os.Getegid(), osAccounts{})
}

// accounts looks users up; tests replace it.
type accounts interface {
	byName(name string) (User, error)
	byID(uid uint32) (User, error)
}

func resolve(userFlag string, getenv func(string) string, euid, egid int, db accounts) (Actor, error) {
	umask := processUmask()
	if euid != 0 {
		// Not root: the variables of a sudo to another user name someone
		// whose rights coldtrace does not hold; it acts as itself.
		if userFlag != "" {
			return Actor{}, fmt.Errorf("--user %s: needs root", userFlag)
		}
		self, err := db.byID(uint32(euid))
		if err != nil {
			self = User{UID: uint32(euid), GID: uint32(egid), Groups: []int{egid}, Home: getenv("HOME")}
		}
		return Actor{User: self, Umask: umask, Command: self, resolved: true}, nil
	}
	invoker, via, err := invokingUser(getenv, db)
	if err != nil {
		return Actor{}, err
	}
	if via != "" && invoker.UID != 0 {
		if userFlag != "" {
			return Actor{}, fmt.Errorf("%w; under %s the command runs as you (%s)", ErrUserUnderSudo, via, describe(invoker))
		}
		return Actor{User: invoker, Via: via, Umask: umask, Command: invoker,
			SwitchCommand: true, switchFiles: true, resolved: true}, nil
	}
	// A real root login, or root itself running sudo: root's rights.
	root, err := db.byID(0)
	if err != nil {
		root = User{Name: "root", Groups: []int{0}, Home: "/root"}
	}
	root.UID, root.GID = 0, uint32(egid)
	a := Actor{User: root, Via: via, Umask: umask, Command: root, resolved: true}
	if userFlag != "" {
		cmd, err := lookupFlagUser(userFlag, db)
		if err != nil {
			return Actor{}, err
		}
		a.Command, a.SwitchCommand = cmd, true
	}
	return a, nil
}

func describe(u User) string {
	if u.Name != "" {
		return u.Name
	}
	return "uid " + strconv.FormatUint(uint64(u.UID), 10)
}

// invokingUser reads SUDO_*, DOAS_USER and PKEXEC_UID. Every variable
// present must name the same user: sudo and doas may keep other variables
// of the user's environment, so one of them alone is not proof.
func invokingUser(getenv func(string) string, db accounts) (User, string, error) {
	type claim struct {
		via string
		u   User
	}
	var claims []claim
	if s := getenv("SUDO_UID"); s != "" || getenv("SUDO_USER") != "" || getenv("SUDO_GID") != "" {
		u, err := sudoUser(getenv, db)
		if err != nil {
			return User{}, "", err
		}
		claims = append(claims, claim{"sudo", u})
	}
	if name := getenv("DOAS_USER"); name != "" {
		u, err := db.byName(name)
		if err != nil {
			return User{}, "", fmt.Errorf("DOAS_USER=%q: %w", name, err)
		}
		claims = append(claims, claim{"doas", u})
	}
	if s := getenv("PKEXEC_UID"); s != "" {
		uid, err := parseID("PKEXEC_UID", s)
		if err != nil {
			return User{}, "", err
		}
		u, err := db.byID(uid)
		if err != nil {
			return User{}, "", fmt.Errorf("PKEXEC_UID=%s: %w", s, err)
		}
		claims = append(claims, claim{"pkexec", u})
	}
	if len(claims) == 0 {
		return User{}, "", nil
	}
	for _, c := range claims[1:] {
		if c.u.UID != claims[0].u.UID {
			return User{}, "", fmt.Errorf("%s names %s but %s names %s; unset the stale variable",
				claims[0].via, describe(claims[0].u), c.via, describe(c.u))
		}
	}
	return claims[0].u, claims[0].via, nil
}

// sudoUser is the user sudo recorded: SUDO_UID is required, SUDO_GID is
// the primary group sudo saw (it wins over the passwd entry's), and
// SUDO_USER, when given, must be a name of that uid.
func sudoUser(getenv func(string) string, db accounts) (User, error) {
	s := getenv("SUDO_UID")
	if s == "" {
		return User{}, errors.New("SUDO_USER or SUDO_GID is set but SUDO_UID is not")
	}
	uid, err := parseID("SUDO_UID", s)
	if err != nil {
		return User{}, err
	}
	u, err := db.byID(uid)
	if err != nil {
		// sudo itself refuses a user without a passwd entry, so this is
		// not a sudo we understand; guessing a HOME would mean root's.
		return User{}, fmt.Errorf("SUDO_UID=%s: %w", s, err)
	}
	if g := getenv("SUDO_GID"); g != "" {
		gid, err := parseID("SUDO_GID", g)
		if err != nil {
			return User{}, err
		}
		u = withPrimaryGroup(u, gid)
	}
	if name := getenv("SUDO_USER"); name != "" && name != u.Name {
		alias, err := db.byName(name)
		if err != nil || alias.UID != uid {
			return User{}, fmt.Errorf("SUDO_USER=%q is not the user of SUDO_UID=%s", name, s)
		}
		u.Name = name
	}
	return u, nil
}

func withPrimaryGroup(u User, gid uint32) User {
	groups := []int{int(gid)}
	for _, g := range u.Groups {
		if g != int(gid) {
			groups = append(groups, g)
		}
	}
	u.GID, u.Groups = gid, groups
	return u
}

// parseID parses a uid or gid strictly: decimal digits only, below
// 4294967295 ((uid_t)-1 means "no change" to the kernel). Anything else
// is an error, never a wrapped-around 0.
func parseID(name, s string) (uint32, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%s=%q is not a decimal id", name, s)
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 1<<32-1 {
		return 0, fmt.Errorf("%s=%s is out of range (0 to 4294967294)", name, s)
	}
	return uint32(v), nil
}

func lookupFlagUser(name string, db accounts) (User, error) {
	u, err := db.byName(name)
	if err == nil {
		return u, nil
	}
	if strings.TrimLeft(name, "0123456789") == "" {
		uid, perr := parseID("--user", name)
		if perr != nil {
			return User{}, perr
		}
		if u, err = db.byID(uid); err == nil {
			return u, nil
		}
	}
	return User{}, fmt.Errorf("--user %s: %w", name, err)
}

// osAccounts is the system's user database (NSS through cgo, else
// /etc/passwd and /etc/group).
type osAccounts struct{}

func (osAccounts) byName(name string) (User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return User{}, err
	}
	return fromOS(u)
}

func (osAccounts) byID(uid uint32) (User, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return User{}, err
	}
	return fromOS(u)
}

func fromOS(u *user.User) (User, error) {
	uid, err := parseID("uid of "+u.Username, u.Uid)
	if err != nil {
		return User{}, err
	}
	gid, err := parseID("gid of "+u.Username, u.Gid)
	if err != nil {
		return User{}, err
	}
	groups := []int{int(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return User{}, fmt.Errorf("groups of %s: %w", u.Username, err)
	}
	for _, s := range ids {
		g, err := parseID("group of "+u.Username, s)
		if err != nil {
			return User{}, err
		}
		if g != gid {
			groups = append(groups, int(g))
		}
	}
	return User{UID: uid, GID: gid, Groups: groups, Name: u.Username, Home: u.HomeDir}, nil
}

// processUmask reads the umask from /proc (umask(2) can only read it by
// changing it, for every thread at once). 022 when /proc has no answer.
func processUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o022
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(m) & 0o777
			}
		}
	}
	return 0o022
}

// CommandActor acts with the command's rights: for what the command
// named (its cache trees, its script), which under --user on a real root
// login are the rights of that user, not root's.
func (a Actor) CommandActor() Actor {
	c := a
	c.User = a.Command
	c.switchFiles = a.SwitchCommand && a.Command.UID != 0
	return c
}
