package residency

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTmpfilesAge(t *testing.T) {
	root := t.TempDir()
	etc, lib := filepath.Join(root, "etc"), filepath.Join(root, "lib")
	writeText(t, filepath.Join(lib, "tmp.conf"), "# comment\nq /var/tmp 1777 root root 30d\nD /tmp 1777 root root -\n")
	// /etc hides the file of the same name in lib: /var/tmp is 10d here.
	writeText(t, filepath.Join(etc, "tmp.conf"), "q /var/tmp 1777 root root 10d\nd /tmp 1777 root root 1d\nx /tmp/keep*\n")
	writeText(t, filepath.Join(lib, "user.conf"), "d %h/.cache - - - 5d\ne /srv/cache - - - ~2w\n")
	writeText(t, filepath.Join(lib, "zz.conf"), "d /srv/cache - - - 1d\n") // a later rule for the same path loses
	rules, err := LoadTmpfiles([]string{etc, filepath.Join(root, "absent"), lib})
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		"/var/tmp/triton":      "10d",
		"/tmp/torchinductor_u": "1d",
		"/tmp/keepme/cache":    "",
		"/srv/cache/a":         "2w",
		"/home/u/.cache/x":     "",
		"/var/lib":             "",
	} {
		r, ok := rules.AgeOf(dir)
		if got := map[bool]string{true: r.Age}[ok]; got != want {
			t.Errorf("AgeOf(%s) = %q (%+v), want %q", dir, got, r, want)
		}
		if ok && !strings.Contains(r.Source, ".conf:") {
			t.Errorf("source %q", r.Source)
		}
	}
}

func TestMemoryCheck(t *testing.T) {
	m := Memory{AvailableBytes: 1 << 30}
	if err := m.Check(512 << 20); err != nil {
		t.Errorf("fits: %v", err)
	}
	if err := m.Check(2 << 30); err == nil || !strings.Contains(err.Error(), "MemAvailable") {
		t.Errorf("over MemAvailable: %v", err)
	}
	m = Memory{AvailableBytes: 8 << 30, Cgroup: "/sys/fs/cgroup/memory/job", LimitBytes: 256 << 20, AnonBytes: 56 << 20}
	if err := m.Check(100 << 20); err != nil {
		t.Errorf("fits the cgroup: %v", err)
	}
	err := m.Check(201 << 20)
	if err == nil || !strings.Contains(err.Error(), "memory cgroup /sys/fs/cgroup/memory/job allows 200.0 MiB") {
		t.Errorf("over the cgroup: %v", err)
	}
}

func TestMemoryCgroupDir(t *testing.T) {
	root := t.TempDir()
	cg, mi := filepath.Join(root, "cgroup"), filepath.Join(root, "mountinfo")
	writeText(t, cg, "5:devices:/\n4:memory:/jobs/a\n0::/user.slice\n")
	writeText(t, mi, "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"+
		"35 25 0:31 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n")
	dir, v2, err := memoryCgroupDir(cg, mi)
	if err != nil || v2 || dir != "/sys/fs/cgroup/memory/jobs/a" {
		t.Errorf("v1: %q %v %v", dir, v2, err)
	}
	writeText(t, cg, "0::/user.slice/job\n")
	writeText(t, mi, "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	dir, v2, err = memoryCgroupDir(cg, mi)
	if err != nil || !v2 || dir != "/sys/fs/cgroup/user.slice/job" {
		t.Errorf("v2: %q %v %v", dir, v2, err)
	}

	// v2 limits: the least of the cgroup's and its ancestors'.
	job := filepath.Join(root, "v2", "user.slice", "job")
	writeText(t, filepath.Join(job, "memory.max"), "max\n")
	writeText(t, filepath.Join(job, "memory.stat"), "anon 1048576\nfile 5\n")
	writeText(t, filepath.Join(root, "v2", "user.slice", "memory.max"), "268435456\n")
	if limit, anon := cgroupV2Limit(job); limit != 256<<20 || anon != 1<<20 {
		t.Errorf("v2 limit %d anon %d", limit, anon)
	}
	// v1: hierarchical_memory_limit, unlimited read as none.
	v1 := filepath.Join(root, "v1")
	writeText(t, filepath.Join(v1, "memory.stat"), "rss 4096\ntotal_rss 8192\nhierarchical_memory_limit 67108864\n")
	if limit, anon := cgroupV1Limit(v1); limit != 64<<20 || anon != 8192 {
		t.Errorf("v1 limit %d anon %d", limit, anon)
	}
	writeText(t, filepath.Join(v1, "memory.stat"), "rss 4096\nhierarchical_memory_limit 9223372036854771712\n")
	if limit, _ := cgroupV1Limit(v1); limit != 0 {
		t.Errorf("unlimited v1 read as %d", limit)
	}
}

func TestProgress(t *testing.T) {
	p := Progress{DoneBytes: 100 << 20, TotalBytes: 400 << 20, Elapsed: time.Second}
	if p.BytesPerSec() != 100<<20 || p.ETA() != 3*time.Second {
		t.Errorf("rate %v eta %v", p.BytesPerSec(), p.ETA())
	}
	if (Progress{TotalBytes: 1}).ETA() != 0 {
		t.Error("ETA before any byte")
	}
}

func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{512: "512 B", 64 << 20: "64.0 MiB", 13 << 30: "13.0 GiB"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}
