package jit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// TestSyscallsAtStart checks which commands get the path-syscall probes
// before they start: any command with --cache-dir, --jit-uprobe or
// always, not Python alone (its bytecode cache is told from the page
// cache). The programs a command runs are still found through env(1) and
// a script's #! line.
func TestSyscallsAtStart(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to name in the commands")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "train.py")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env python3\nprint(1)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	shell := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(shell, []byte("#!/bin/sh\nexec python3 train.py\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		opts Options
		want string // substring of the reason; "" for none
	}{
		{Options{Command: []string{py, "-c", "1"}}, ""},
		{Options{Command: []string{script}}, ""},
		{Options{Command: []string{shell}}, ""},
		{Options{Command: []string{"cat", "/dev/null"}}, ""},
		{Options{Command: []string{"no-such-program-here"}}, ""},
		{Options{Command: []string{"cat"}, Syscalls: SyscallsAlways}, "always"},
		{Options{Command: []string{"env", "-u", "X", "TRITON_CACHE_DIR=/c", py}}, "sets TRITON_CACHE_DIR"},
		{Options{Command: []string{py}, Env: []string{"HF_HOME=/h", "HF_HUB_CACHE=/c"}}, ""},
		{Options{Command: []string{py}, Env: []string{"HF_HOME=/h", "HF_HUB_OFFLINE=1"}}, "sets HF_HUB_OFFLINE"},
		{Options{Command: []string{py}, Env: []string{"TORCHINDUCTOR_CACHE_DIR=/i"}}, "sets TORCHINDUCTOR_CACHE_DIR"},
		{Options{Command: []string{py}, Env: []string{"HOME=/h", "XDG_CACHE_HOME=/x", "PYTHONPYCACHEPREFIX=/p"}}, ""},
		{Options{Command: []string{"cat"}, CacheDirs: []string{"x=/tmp"}}, "--cache-dir"},
		{Options{Command: []string{"cat"}, Uprobes: []string{"libx:f"}}, "--jit-uprobe"},
	}
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		c.opts.Actor = self
		got := syscallsAtStart(&c.opts)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%v: %q, want %q", c.opts.Command, got, c.want)
		}
	}
	for _, argv := range [][]string{{py, "-c", "1"}, {"python3", "-c", "1"}, {"env", "-u", "X", "A=B", "python3", "-c", "1"}, {script}} {
		images := commandImages(argv)
		found := false
		for _, im := range images {
			found = found || strings.HasPrefix(filepath.Base(im), "python3")
		}
		if !found {
			t.Errorf("%v: images %q, want python3 among them", argv, images)
		}
	}
	for _, im := range commandImages([]string{shell}) {
		if strings.HasPrefix(filepath.Base(im), "python") {
			t.Errorf("%s: images include %s: a shell script's own commands are not followed", shell, im)
		}
	}
}

// TestCommandImagesFIFO: a FIFO with execute bits as the command is not
// opened for reading (that would wait for a writer forever); the look
// returns at once with the path alone.
func TestCommandImagesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fc")
	if err := unix.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := commandImagesWithin(self, []string{fifo}, time.Minute)
	if len(got) != 1 || got[0] != fifo {
		t.Errorf("images of a FIFO: %q", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("looking at a FIFO took %v", d)
	}
	// Without an Actor nothing is read.
	if got := commandImagesWithin(actor.Actor{}, []string{fifo}, time.Minute); len(got) != 0 {
		t.Errorf("zero actor read %q", got)
	}
}
