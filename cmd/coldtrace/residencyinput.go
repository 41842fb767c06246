package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/coldrun"
)

// exitPartial is the exit code of status, evict and prefetch when some
// paths could not be handled and the others were (as ls and du do).
const exitPartial = 1

// actingUser is who status, evict and prefetch act for
// (internal/actor; docs/definitions.md, "Who coldtrace acts for"): file
// opens, directory walks, cachestat and /proc/PID/maps reads all go
// through actor; env and id resolve the registry's cache roots.
type actingUser struct {
	actor actor.Actor
	env   registry.Env
	id    registry.Identity
}

// invokingUser is the user coldtrace acts for: under sudo, doas or
// pkexec the invoking user with their groups and passwd home, otherwise
// coldtrace's own. A malformed or contradictory variable is an error,
// never root.
func invokingUser() (actingUser, error) {
	a, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return actingUser{}, err
	}
	cwd, _ := os.Getwd()
	env := registry.Env{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[k]; !dup {
				env[k] = v
			}
		}
	}
	if a.Via != "" {
		// sudo resets HOME and USER to root's: the caches are the user's.
		env["HOME"], env["USER"], env["LOGNAME"] = a.Home, a.Name, a.Name
	}
	return actingUser{actor: a, env: env, id: registry.Identity{UID: a.UID, User: a.Name, Home: a.Home, Cwd: cwd}}, nil
}

// recordInput is what --from RECORD contributes: the files the run read
// from disk, in the order it first read them, and the disk rate it saw.
type recordInput struct {
	path  string
	rec   *record.Record
	files []record.File
	// diskRate is bytes from disk per second of the run's disk-read time
	// (the ledger's disk_read row); 0 when the run read nothing.
	diskRate float64
}

// readRecordInput reads a record for status, evict and prefetch. A record
// of another host is used all the same, after a warning.
func readRecordInput(who actingUser, path string, stderr io.Writer) (*recordInput, error) {
	r, err := readRecordAs(who.actor, path)
	if err != nil {
		return nil, err
	}
	in := &recordInput{path: path, rec: r, files: coldrun.FilesFromDisk(r)}
	if host, err := os.Hostname(); err == nil && r.Host.Hostname != "" && r.Host.Hostname != host {
		fmt.Fprintf(stderr, "coldtrace: warning: %s was recorded on %s, not on this host (%s): its paths are looked up here\n",
			format.Escape(path), format.Escape(r.Host.Hostname), format.Escape(host))
	}
	var fromDisk uint64
	for _, f := range in.files {
		fromDisk += f.BytesFromDisk
	}
	if row := attribution.Analyze(r).Row(attribution.DiskRead); row != nil && row.NS > 0 && fromDisk > 0 {
		in.diskRate = float64(fromDisk) / (float64(row.NS) / 1e9)
	}
	return in, nil
}

// rate is the disk rate the recorded run saw; 0 without a record.
func (in *recordInput) rate() float64 {
	if in == nil {
		return 0
	}
	return in.diskRate
}

// targetPaths are the paths status, evict and prefetch work on: the
// files the record at from read from disk, in the order the run first
// read them (none when from is ""), then paths. in is nil without a
// record.
func targetPaths(who actingUser, from string, paths []string, stderr io.Writer) (all []string, in *recordInput, err error) {
	if from != "" {
		if in, err = readRecordInput(who, from, stderr); err != nil {
			return nil, nil, err
		}
		all = in.paths(stderr)
	}
	return append(all, paths...), in, nil
}

// paths lists the record's files by path, as the host names them;
// files recorded without one are reported, one line each.
func (in *recordInput) paths(stderr io.Writer) []string {
	var out []string
	for _, f := range in.files {
		if f.Path == "" {
			fmt.Fprintf(stderr, "coldtrace: %s: file dev %d:%d inode %d has no path in the record\n", format.Escape(in.path), f.Dev>>20, f.Dev&(1<<20-1), f.Ino)
			continue
		}
		if f.NameCut {
			fmt.Fprintf(stderr, "coldtrace: %s: file dev %d:%d inode %d has its name cut in the record (a path longer than PATH_MAX)\n", in.path, f.Dev>>20, f.Dev&(1<<20-1), f.Ino)
			continue
		}
		// A file the process read in another mount namespace (a bind
		// mount, a container) is reached from here by the host's name.
		out = append(out, cmp.Or(f.HostPath, f.Path))
	}
	return out
}

// printProblems writes one line per path that could not be handled.
func printProblems(stderr io.Writer, probs []residency.Problem) {
	for _, p := range probs {
		fmt.Fprintf(stderr, "coldtrace: %s\n", errorText(p))
	}
}
