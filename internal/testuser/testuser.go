// Package testuser creates a throwaway login for root tests of what
// coldtrace does on behalf of a user who ran sudo.
package testuser

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"
)

// User is an account that exists for one test.
type User struct {
	Name     string
	UID, GID int
	Home     string
	// Group is a supplementary group the user is a member of.
	Group    string
	GroupGID int
}

// Create adds a user with a group of its own and one supplementary group,
// and removes them when t ends. It skips t when useradd is missing. The
// caller must be root (testenv.RequireRoot).
func Create(t testing.TB) User {
	t.Helper()
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing (package passwd): cannot create a test user", tool)
		}
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b[:])
	u := User{Name: "ctu" + suffix, Group: "ctg" + suffix, Home: "/home/ctu" + suffix}
	shadowTool(t, "groupadd", u.Group)
	t.Cleanup(func() { shadowTool(t, "groupdel", u.Group) })
	shadowTool(t, "useradd", "--no-create-home", "--home-dir", u.Home, "--shell", "/usr/sbin/nologin",
		"--user-group", "--groups", u.Group, u.Name)
	t.Cleanup(func() {
		shadowTool(t, "userdel", u.Name)
		// userdel removes the user's own group only where USERGROUPS_ENAB
		// says so.
		if _, err := user.LookupGroup(u.Name); err == nil {
			shadowTool(t, "groupdel", u.Name)
		}
	})
	pw, err := user.Lookup(u.Name)
	if err != nil {
		t.Fatalf("look up new user %s: %v", u.Name, err)
	}
	gr, err := user.LookupGroup(u.Group)
	if err != nil {
		t.Fatalf("look up new group %s: %v", u.Group, err)
	}
	u.UID, _ = strconv.Atoi(pw.Uid)
	u.GID, _ = strconv.Atoi(pw.Gid)
	u.GroupGID, _ = strconv.Atoi(gr.Gid)
	return u
}

// SudoEnv is getenv as sudo leaves it for a command run by u: SUDO_UID,
// SUDO_GID and SUDO_USER set, HOME root's; other variables from base.
func (u User) SudoEnv(base func(string) string) func(string) string {
	return func(k string) string {
		switch k {
		case "SUDO_UID":
			return strconv.Itoa(u.UID)
		case "SUDO_GID":
			return strconv.Itoa(u.GID)
		case "SUDO_USER":
			return u.Name
		case "HOME":
			return "/root"
		case "DOAS_USER", "PKEXEC_UID":
			return ""
		}
		return base(k)
	}
}

// SudoEnviron is os.Environ() rewritten the same way, for a child process.
func (u User) SudoEnviron(base []string) []string {
	out := make([]string, 0, len(base)+4)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SUDO_UID", "SUDO_GID", "SUDO_USER", "HOME", "DOAS_USER", "PKEXEC_UID":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "SUDO_UID="+strconv.Itoa(u.UID), "SUDO_GID="+strconv.Itoa(u.GID),
		"SUDO_USER="+u.Name, "HOME=/root")
}

// shadowTool runs useradd and friends, retrying while another process
// holds the lock on /etc/passwd or /etc/group (tests of other packages run
// at the same time).
func shadowTool(t testing.TB, name string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err == nil {
			return
		}
		if strings.Contains(string(out), "lock") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
