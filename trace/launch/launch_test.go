package launch

import (
	"os"
	"testing"
)

func TestResolveIdentity(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if os.Geteuid() == 0 {
		id, err := ResolveIdentity("", env(map[string]string{"SUDO_UID": "65534", "SUDO_GID": "65534"}))
		if err != nil || !id.Switch || id.UID != 65534 || id.GID != 65534 {
			t.Errorf("sudo identity %+v, %v", id, err)
		}
		if _, err := ResolveIdentity("", env(map[string]string{"SUDO_UID": "x"})); err == nil {
			t.Errorf("bad SUDO_UID accepted")
		}
	}
	id, err := ResolveIdentity("", env(nil))
	if err != nil || id.Switch {
		t.Errorf("no sudo: %+v, %v", id, err)
	}
	if _, err := ResolveIdentity("no-such-user-coldtrace", env(nil)); err == nil {
		t.Errorf("unknown --user accepted")
	}
	if id, err := ResolveIdentity("root", env(nil)); err != nil || id.UID != 0 || id.Home == "" {
		t.Errorf("--user root: %+v, %v", id, err)
	}
}

func TestCommandEnv(t *testing.T) {
	base := []string{"HOME=/root", "PATH=/bin", "USER=root"}
	id := Identity{Switch: true}
	id.Name, id.Home = "alice", "/home/alice"
	got := commandEnv(base, id)
	want := map[string]bool{"PATH=/bin": true, "HOME=/home/alice": true, "USER=alice": true, "LOGNAME=alice": true}
	if len(got) != len(want) {
		t.Fatalf("env %v", got)
	}
	for _, kv := range got {
		if !want[kv] {
			t.Errorf("unexpected %q in %v", kv, got)
		}
	}
	if got := commandEnv(base, Identity{}); len(got) != 3 {
		t.Errorf("no switch changed the env: %v", got)
	}
}
