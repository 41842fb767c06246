package jit

import (
	"os"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/registry"
)

// TestSourcesDocVerdictsMatchRegistry: docs/sources.md's verdict for
// each cache ("no path syscalls" or "keeps path syscalls") is what the
// registry makes coldtrace do.
func TestSourcesDocVerdictsMatchRegistry(t *testing.T) {
	raw, err := os.ReadFile(sourcesDocPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "**keeps path syscalls**") || strings.Contains(l, "**no path syscalls**") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "| `"), "`")
			rows[name] = l
		}
	}
	for i := range registry.Registry {
		s := &registry.Registry[i]
		row, ok := rows[s.Name]
		if !ok {
			t.Errorf("docs/sources.md gives no verdict for %s", s.Name)
			continue
		}
		if keeps := strings.Contains(row, "**keeps path syscalls**"); keeps != needsPathSyscalls(s) {
			t.Errorf("%s: docs/sources.md says keeps=%v, the registry needsPathSyscalls=%v", s.Name, keeps, needsPathSyscalls(s))
		}
	}
}

// TestPathUsersFollowForksAndSpans: a fork of a process that keeps the
// probes keeps them too; page-cache evidence inside an interval with the
// probes on is theirs, outside it the page cache's.
func TestPathUsersFollowForksAndSpans(t *testing.T) {
	u := pathUsers{pids: map[int32]bool{10: true}}
	u.forked(11, 10)
	u.forked(21, 20)
	if !u.pids[11] || u.pids[21] {
		t.Errorf("users %v: want 10 and its child 11 only", u.pids)
	}
	u.spans = []pathSpan{{fromMono: 100, toMono: 200}, {fromMono: 300}}
	for ts, want := range map[uint64]bool{99: false, 100: true, 199: true, 200: false, 299: false, 300: true, 1 << 40: true} {
		if got := u.covers(ts); got != want {
			t.Errorf("covers(%d) = %v, want %v", ts, got, want)
		}
	}
	if !u.attached() {
		t.Error("an open last interval is not attached")
	}
	u.spans[1].toMono = 400
	if u.attached() || !u.everAttached() {
		t.Error("closed intervals: attached or never attached")
	}
}

// TestWeightsCachesNeedNoPathSyscalls: the variables of the weights
// caches and ninja builds bring no probe in, their offline switches do,
// and a compiling framework's variables still do.
func TestWeightsCachesNeedNoPathSyscalls(t *testing.T) {
	for env, want := range map[string]string{
		"HF_HOME=/h":                 "",
		"HF_HUB_CACHE=/h":            "",
		"TORCH_HOME=/t":              "",
		"TORCH_EXTENSIONS_DIR=/e":    "",
		"HF_HUB_OFFLINE=1":           "HF_HUB_OFFLINE",
		"TRANSFORMERS_OFFLINE=1":     "TRANSFORMERS_OFFLINE",
		"TORCHINDUCTOR_CACHE_DIR=/i": "TORCHINDUCTOR_CACHE_DIR",
		"PYTHONPYCACHEPREFIX=/p":     "",
		"NUMBA_CACHE_DIR=/n":         "NUMBA_CACHE_DIR",
	} {
		if got := FrameworkVar(registry.ParseEnvList([]string{env})); got != want {
			t.Errorf("FrameworkVar(%s) = %q, want %q", env, got, want)
		}
	}
	for _, pkg := range []string{"transformers", "diffusers", "huggingface_hub", "flashinfer", "comfy"} {
		if got := ImportedFramework("/venv/site-packages/" + pkg + "/x.py"); got != "" {
			t.Errorf("importing %s brings the probes in (%q)", pkg, got)
		}
	}
}
