package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
)

// startSelfProfile profiles coldtrace itself when COLDTRACE_CPUPROFILE
// names a file, to find what tracing costs in user space (`make bench`
// uses it). The returned function stops the profile and writes it. The
// profile is kept in memory and written at the end like any output: with
// the rights of the user coldtrace acts for, replacing only a regular file
// (sudo may keep the variable, and root must not truncate what it names).
func startSelfProfile() func() {
	path := os.Getenv("COLDTRACE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	a, err := actor.Resolve("", os.Getenv)
	if err == nil {
		err = outfile.Check(a, outfile.Output{Flag: "COLDTRACE_CPUPROFILE", Path: path})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "coldtrace: COLDTRACE_CPUPROFILE: %v\n", err)
		return func() {}
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		fmt.Fprintf(os.Stderr, "coldtrace: COLDTRACE_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		err := outfile.Write(a, path, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err })
		if err != nil {
			fmt.Fprintf(os.Stderr, "coldtrace: COLDTRACE_CPUPROFILE: %v\n", err)
		}
	}
}
