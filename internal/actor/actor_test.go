package actor

import (
	"errors"
	"os/user"
	"slices"
	"strings"
	"testing"
)

// fakeAccounts is a user database of three users; alice has a second
// name, alice2, as some sites give one uid two logins.
type fakeAccounts map[string]User

func (f fakeAccounts) byName(name string) (User, error) {
	if u, ok := f[name]; ok {
		return u, nil
	}
	return User{}, user.UnknownUserError(name)
}

func (f fakeAccounts) byID(uid uint32) (User, error) {
	for _, name := range []string{"root", "alice", "bob"} {
		if u := f[name]; u.UID == uid {
			return u, nil
		}
	}
	return User{}, user.UnknownUserIdError(int(uid))
}

var testDB = fakeAccounts{
	"root":   {UID: 0, GID: 0, Groups: []int{0}, Name: "root", Home: "/root"},
	"alice":  {UID: 1000, GID: 1000, Groups: []int{1000, 27}, Name: "alice", Home: "/home/alice"},
	"alice2": {UID: 1000, GID: 1000, Groups: []int{1000}, Name: "alice2", Home: "/home/alice"},
	"bob":    {UID: 1001, GID: 1001, Groups: []int{1001}, Name: "bob", Home: "/home/bob"},
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestResolveInvokingUser(t *testing.T) {
	cases := map[string]struct {
		flag     string
		env      func(string) string
		uid      uint32
		gid      uint32
		groups   []int
		name     string
		home     string
		via      string
		cmdUID   uint32
		switched bool
	}{
		"real root login": {env: env("HOME", "/root"), uid: 0, name: "root", home: "/root", cmdUID: 0},
		"real root, --user bob": {flag: "bob", env: env(), uid: 0, name: "root", home: "/root",
			cmdUID: 1001, switched: true},
		"real root, --user by uid": {flag: "1000", env: env(), uid: 0, name: "root", home: "/root",
			cmdUID: 1000, switched: true},
		"sudo": {env: env("SUDO_UID", "1000", "SUDO_GID", "1000", "SUDO_USER", "alice", "HOME", "/root"),
			uid: 1000, gid: 1000, groups: []int{1000, 27}, name: "alice", home: "/home/alice", via: "sudo",
			cmdUID: 1000, switched: true},
		"sudo keeps the group sudo saw": {env: env("SUDO_UID", "1000", "SUDO_GID", "27", "SUDO_USER", "alice"),
			uid: 1000, gid: 27, groups: []int{27, 1000}, name: "alice", home: "/home/alice", via: "sudo",
			cmdUID: 1000, switched: true},
		"sudo under a second login name": {env: env("SUDO_UID", "1000", "SUDO_GID", "1000", "SUDO_USER", "alice2"),
			uid: 1000, gid: 1000, groups: []int{1000, 27}, name: "alice2", home: "/home/alice", via: "sudo",
			cmdUID: 1000, switched: true},
		"root runs sudo: root's rights": {flag: "bob", env: env("SUDO_UID", "0", "SUDO_GID", "0", "SUDO_USER", "root"),
			uid: 0, name: "root", home: "/root", via: "sudo", cmdUID: 1001, switched: true},
		"doas":   {env: env("DOAS_USER", "bob"), uid: 1001, gid: 1001, groups: []int{1001}, name: "bob", home: "/home/bob", via: "doas", cmdUID: 1001, switched: true},
		"pkexec": {env: env("PKEXEC_UID", "1001"), uid: 1001, gid: 1001, groups: []int{1001}, name: "bob", home: "/home/bob", via: "pkexec", cmdUID: 1001, switched: true},
		"sudo and doas agree": {env: env("SUDO_UID", "1001", "DOAS_USER", "bob"), uid: 1001, gid: 1001,
			groups: []int{1001}, name: "bob", home: "/home/bob", via: "sudo", cmdUID: 1001, switched: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := resolve(c.flag, c.env, 0, 0, testDB)
			if err != nil {
				t.Fatal(err)
			}
			if a.UID != c.uid || a.Name != c.name || a.Home != c.home || a.Via != c.via {
				t.Errorf("acts for uid %d %q home %q via %q; want uid %d %q home %q via %q",
					a.UID, a.Name, a.Home, a.Via, c.uid, c.name, c.home, c.via)
			}
			if c.groups != nil && (a.GID != c.gid || !slices.Equal(a.Groups, c.groups)) {
				t.Errorf("gid %d groups %v; want %d %v", a.GID, a.Groups, c.gid, c.groups)
			}
			if a.Command.UID != c.cmdUID || a.SwitchCommand != c.switched {
				t.Errorf("command as uid %d switch %v; want %d %v", a.Command.UID, a.SwitchCommand, c.cmdUID, c.switched)
			}
			if a.switchFiles != (c.uid != 0) {
				t.Errorf("switchFiles %v for uid %d", a.switchFiles, c.uid)
			}
		})
	}
}

func TestResolveRefuses(t *testing.T) {
	cases := map[string]struct {
		flag string
		env  func(string) string
		want string
	}{
		"uid wraps to 0":           {env: env("SUDO_UID", "4294967296"), want: "out of range"},
		"uid (uid_t)-1":            {env: env("SUDO_UID", "4294967295"), want: "out of range"},
		"negative uid":             {env: env("SUDO_UID", "-1"), want: "not a decimal id"},
		"plus sign":                {env: env("SUDO_UID", "+1000"), want: "not a decimal id"},
		"not a number":             {env: env("SUDO_UID", "alice"), want: "not a decimal id"},
		"space":                    {env: env("SUDO_UID", " 1000"), want: "not a decimal id"},
		"hex":                      {env: env("SUDO_UID", "0x3e8"), want: "not a decimal id"},
		"gid wraps":                {env: env("SUDO_UID", "1000", "SUDO_GID", "4294967296"), want: "SUDO_GID"},
		"pkexec wraps":             {env: env("PKEXEC_UID", "4294967296"), want: "PKEXEC_UID"},
		"SUDO_USER without uid":    {env: env("SUDO_USER", "alice"), want: "SUDO_UID is not"},
		"uid without passwd":       {env: env("SUDO_UID", "4242"), want: "SUDO_UID=4242"},
		"SUDO_USER of other uid":   {env: env("SUDO_UID", "1000", "SUDO_USER", "bob"), want: "not the user of"},
		"unknown doas user":        {env: env("DOAS_USER", "mallory"), want: "DOAS_USER"},
		"sudo and doas disagree":   {env: env("SUDO_UID", "1000", "DOAS_USER", "root"), want: "unset the stale"},
		"sudo and pkexec disagree": {env: env("SUDO_UID", "1000", "PKEXEC_UID", "0"), want: "unset the stale"},
		"--user under sudo":        {flag: "root", env: env("SUDO_UID", "1000", "SUDO_USER", "alice"), want: "runs as you (alice)"},
		"--user under doas":        {flag: "bob", env: env("DOAS_USER", "alice"), want: "under doas"},
		"unknown --user":           {flag: "mallory", env: env(), want: "--user mallory"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := resolve(c.flag, c.env, 0, 0, testDB)
			if err == nil {
				t.Fatalf("accepted: acts for uid %d, command as %d", a.UID, a.Command.UID)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q; want one line with %q", err, c.want)
			}
		})
	}
}

func TestUserFlagUnderSudoSaysWhy(t *testing.T) {
	_, err := resolve("root", env("SUDO_UID", "1000", "SUDO_GID", "1000", "SUDO_USER", "alice"), 0, 0, testDB)
	if !errors.Is(err, ErrUserUnderSudo) {
		t.Fatalf("err = %v; want ErrUserUnderSudo", err)
	}
	if got, want := err.Error(), "--user is only for a real root login; under sudo the command runs as you (alice)"; got != want {
		t.Errorf("message %q; want %q", got, want)
	}
}

func TestResolveNotRoot(t *testing.T) {
	// sudo -u bob: coldtrace is bob, SUDO_UID names alice; it holds only
	// bob's rights and acts as bob.
	a, err := resolve("", env("SUDO_UID", "1000", "SUDO_USER", "alice"), 1001, 1001, testDB)
	if err != nil {
		t.Fatal(err)
	}
	if a.UID != 1001 || a.SwitchCommand || a.switchFiles || a.Via != "" {
		t.Errorf("acts for %d via %q, switch %v/%v; want bob, no switch", a.UID, a.Via, a.SwitchCommand, a.switchFiles)
	}
	if _, err := resolve("alice", env(), 1001, 1001, testDB); err == nil || !strings.Contains(err.Error(), "needs root") {
		t.Errorf("--user without root: err %v", err)
	}
}

func TestParseID(t *testing.T) {
	for s, want := range map[string]uint32{"0": 0, "1000": 1000, "4294967294": 4294967294, "01000": 1000} {
		if got, err := parseID("X", s); err != nil || got != want {
			t.Errorf("parseID(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "4294967295", "4294967296", "18446744073709551616", "-0", "1_000", "1e3", "٣"} {
		if got, err := parseID("X", s); err == nil {
			t.Errorf("parseID(%q) = %d; want an error", s, got)
		}
	}
}

func TestProcessUmask(t *testing.T) {
	if m := processUmask(); m&^0o777 != 0 {
		t.Errorf("umask %#o has bits outside 0777", m)
	}
}

func TestZeroActorIsNotRoot(t *testing.T) {
	var a Actor
	ran := false
	if err := a.Do(func() error { ran = true; return nil }); !errors.Is(err, ErrUnresolved) || ran {
		t.Errorf("zero Actor: Do ran %v, err %v; want ErrUnresolved and no work", ran, err)
	}
	if err := a.MayTrace(1); !errors.Is(err, ErrUnresolved) {
		t.Errorf("zero Actor: MayTrace err %v", err)
	}
}
