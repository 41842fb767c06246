package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseKeysAndErrors(t *testing.T) {
	c, err := Parse(strings.NewReader("# pushes under sudo\n\npush-allow http://gw.example:9091/\n  push-allow   https://gw2.example/jobs  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PushAllow) != 2 || c.PushAllow[0].Host != "gw.example:9091" || c.PushAllow[1].Path != "/jobs" {
		t.Fatalf("PushAllow %v", c.PushAllow)
	}
	for _, bad := range []string{
		"push-allow\n", "push-alow http://gw/\n", "push-allow gw.example\n", "push-allow ftp://gw/\n",
		"push-allow http://u:p@gw/\n", "push-allow http://gw/?a=1\n", "push-allow http://gw/a/../b\n",
		"push-allow http:///path\n", "push-allow http://gw/ http://other/\n",
	} {
		if _, err := Parse(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Parse(%q) = %v: want an error naming line 1", bad, err)
		}
	}
}

func TestPushAllowedMatchesWholeComponents(t *testing.T) {
	c, err := Parse(strings.NewReader("push-allow http://gw.example:9091/a\npush-allow https://other.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Path = "/etc/coldtrace/config"
	allowed := []string{
		"http://gw.example:9091/a", "http://gw.example:9091/a/", "http://gw.example:9091/a/b/c",
		"HTTP://GW.example:9091/a/b", "https://other.example", "https://other.example/anything",
	}
	refused := []string{
		"http://gw.example:9091/ab", "http://gw.example:9091/", "http://gw.example/a", "https://gw.example:9091/a",
		"http://gw.example:9091.evil/a", "http://gw.example:9091@evil/a", "http://evil/http://gw.example:9091/a",
		"http://gw.example:9091/a/../b", "http://gw.example:9091/a/%2e%2e/b", "http://other.example/",
		"https://other.example.evil/", "http://127.0.0.1:9091/a", "%zz",
	}
	for _, u := range allowed {
		if !c.PushAllowed(u) {
			t.Errorf("PushAllowed(%q) = false, want true", u)
		}
	}
	for _, u := range refused {
		if c.PushAllowed(u) {
			t.Errorf("PushAllowed(%q) = true, want false", u)
		}
	}
	var none Config
	if !none.PushAllowed("http://127.0.0.1:1/") {
		t.Error("with no config file a push must stay allowed")
	}
	empty := Config{Path: "/etc/coldtrace/config"}
	if empty.PushAllowed("http://gw.example:9091/a") {
		t.Error("a config file with no push-allow line must refuse every push")
	}
}

func TestLoadMissingFileAllowsAll(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "none"))
	if err != nil || c.Path != "" || !c.PushAllowed("http://anywhere/") {
		t.Errorf("Load(missing) = %+v, %v", c, err)
	}
}

// TestLoadTrustsOnlyRootsFile: a file is followed only when root owns it
// and no one else can write it or the directories above it.
func TestLoadTrustsOnlyRootsFile(t *testing.T) {
	dir := t.TempDir() // 0700, owned by whoever runs the test
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte("push-allow http://gw.example/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if _, err := Load(path); !errors.Is(err, ErrUntrusted) {
			t.Errorf("Load(a file not owned by root) = %v, want ErrUntrusted", err)
		}
		return
	}
	c, err := Load(path)
	if err != nil || c.Path != path || len(c.PushAllow) != 1 {
		t.Fatalf("Load(root's 0644 file) = %+v, %v", c, err)
	}
	for _, mode := range []os.FileMode{0o664, 0o646} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), path) {
			t.Errorf("Load(mode %o) = %v, want ErrUntrusted naming the file", mode, err)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Load(a file owned by uid 1) = %v, want ErrUntrusted", err)
	}
	if err := os.Chown(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Load(in a world-writable directory) = %v, want ErrUntrusted naming it", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(link); err == nil {
		t.Error("Load(a symlink): want an error")
	}
}
