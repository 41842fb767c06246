package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/residency/kcache"
)

func TestColdFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		classes []kcache.Class
		err     string
	}{
		{args: []string{"--", "true"}},
		{args: []string{"--cold", "--", "true"}, classes: kcache.DefaultClasses},
		{args: []string{"--cold=jit,pycache", "--", "true"}, classes: []kcache.Class{kcache.JIT, kcache.Pycache}},
		{args: []string{"--cold", "--evict", "/m", "--evict", "/n", "--from", "r", "--keep-cold-caches", "--", "true"}, classes: kcache.DefaultClasses},
		{args: []string{"--cold=gpu", "--", "true"}, err: `"gpu"`},
		{args: []string{"--evict", "/m", "--", "true"}, err: "go with --cold"},
		{args: []string{"--keep-cold-caches", "--", "true"}, err: "go with --cold"},
		{args: []string{"--cold=jit", "--from", "r", "--", "true"}, err: "add page-cache"},
		// A bare --cold takes no separate value: a class list as the next
		// word is a mistake, not a command.
		{args: []string{"--cold", "jit", "--", "true"}, err: "--cold=jit"},
		{args: []string{"--cold", "python3", "x.py"}, classes: kcache.DefaultClasses},
	} {
		o, err := parseRunFlags(tc.args, io.Discard)
		if tc.err != "" {
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want a usage error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if strings.Join(classNames(o.cold.classes), ",") != strings.Join(classNames(tc.classes), ",") {
			t.Errorf("%q: classes %v, want %v", tc.args, o.cold.classes, tc.classes)
		}
	}
	o, _ := parseRunFlags([]string{"--cold", "--evict", "/m", "--evict", "/n", "--from", "r", "--keep-cold-caches", "--", "true"}, io.Discard)
	if len(o.cold.evict) != 2 || o.cold.from != "r" || !o.cold.keep {
		t.Errorf("cold options %+v", o.cold)
	}
}

func classNames(cs []kcache.Class) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}
