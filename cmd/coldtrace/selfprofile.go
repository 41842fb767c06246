package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startSelfProfile profiles coldtrace itself when COLDTRACE_CPUPROFILE
// names a file, to find what tracing costs in user space (`make bench`
// uses it). The returned function stops the profile.
func startSelfProfile() func() {
	path := os.Getenv("COLDTRACE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coldtrace: COLDTRACE_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "coldtrace: COLDTRACE_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
