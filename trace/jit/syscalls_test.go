package jit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyscallsAtStart checks which commands get the path-syscall probes
// before they start: Python run directly, through env(1) or a script's
// #! line, and any command with --cache-dir, --jit-uprobe or always.
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
		{Options{Command: []string{py, "-c", "1"}}, "runs python3"},
		{Options{Command: []string{"python3", "-c", "1"}}, "runs python3"},
		{Options{Command: []string{"env", "-u", "X", "A=B", "python3", "-c", "1"}}, "runs python3"},
		{Options{Command: []string{script}}, "runs python3"},
		{Options{Command: []string{shell}}, ""},
		{Options{Command: []string{"cat", "/dev/null"}}, ""},
		{Options{Command: []string{"no-such-program-here"}}, ""},
		{Options{Command: []string{"cat"}, Syscalls: SyscallsAlways}, "always"},
		{Options{Command: []string{"cat"}, CacheDirs: []string{"x=/tmp"}}, "--cache-dir"},
		{Options{Command: []string{"cat"}, Uprobes: []string{"libx:f"}}, "--jit-uprobe"},
	}
	for _, c := range cases {
		got := syscallsAtStart(&c.opts)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%v: %q, want %q", c.opts.Command, got, c.want)
		}
	}
}
