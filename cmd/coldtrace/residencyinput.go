package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/trace/jit"
)

// exitPartial is the exit code of status, evict and prefetch when some
// paths could not be handled and the others were (as ls and du do).
const exitPartial = 1

// actingUser is who status, evict and prefetch act for: file opens,
// directory walks, cachestat and /proc/PID/maps reads all go through
// actor; env and id resolve the registry's cache roots.
//
// Until internal/actor lands, invokingUser below is the whole permission
// model of these commands: under sudo, doas or pkexec, the invoking user
// with their groups and passwd home (residency.Creds switches the
// filesystem identity of the thread that does the file work); otherwise
// coldtrace's own identity (residency.Self).
type actingUser struct {
	actor residency.Actor
	env   jit.Env
	id    jit.Identity
}

// invokingUser is the user coldtrace acts for (../shared/DESIGN.md, "Who
// coldtrace acts for").
func invokingUser() (actingUser, error) {
	cwd, _ := os.Getwd()
	env := jit.Env{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[k]; !dup {
				env[k] = v
			}
		}
	}
	invoker, how := invokingID()
	if os.Geteuid() != 0 || invoker == "" {
		id := jit.Identity{UID: uint32(os.Getuid()), Cwd: cwd}
		if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
			id.User, id.Home = u.Username, u.HomeDir
		}
		return actingUser{actor: residency.Self{}, env: env, id: id}, nil
	}
	var u *user.User
	var err error
	if how == "DOAS_USER" {
		u, err = user.Lookup(invoker)
	} else {
		u, err = user.LookupId(invoker)
	}
	if err != nil {
		return actingUser{}, fmt.Errorf("%s %s: %w", how, invoker, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return actingUser{}, fmt.Errorf("%s %s: uid %q: %w", how, invoker, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return actingUser{}, fmt.Errorf("%s %s: gid %q: %w", how, invoker, u.Gid, err)
	}
	if g := os.Getenv("SUDO_GID"); g != "" && how == "SUDO_UID" {
		if gid, err = strconv.ParseUint(g, 10, 32); err != nil {
			return actingUser{}, fmt.Errorf("SUDO_GID %q: %w", g, err)
		}
	}
	creds := residency.Creds{UID: uint32(uid), GID: uint32(gid)}
	gids, err := u.GroupIds()
	if err != nil {
		return actingUser{}, fmt.Errorf("groups of %s: %w", u.Username, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			creds.Groups = append(creds.Groups, uint32(n))
		}
	}
	// sudo resets HOME and USER to root's: the caches are the user's.
	env["HOME"], env["USER"], env["LOGNAME"] = u.HomeDir, u.Username, u.Username
	return actingUser{actor: creds, env: env,
		id: jit.Identity{UID: uint32(uid), User: u.Username, Home: u.HomeDir, Cwd: cwd}}, nil
}

// invokingID is the user who ran sudo (SUDO_UID), doas (DOAS_USER, a
// name) or pkexec (PKEXEC_UID), and the variable that said so.
func invokingID() (id, how string) {
	for _, v := range []string{"SUDO_UID", "DOAS_USER", "PKEXEC_UID"} {
		if s := os.Getenv(v); s != "" {
			return s, v
		}
	}
	return "", ""
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
func readRecordInput(path string, stderr io.Writer) (*recordInput, error) {
	r, err := record.ReadFile(path)
	if err != nil {
		return nil, err
	}
	in := &recordInput{path: path, rec: r, files: filesReadFromDisk(r)}
	if host, err := os.Hostname(); err == nil && r.Host.Hostname != "" && r.Host.Hostname != host {
		fmt.Fprintf(stderr, "coldtrace: warning: %s was recorded on %s, not on this host (%s): its paths are looked up here\n", path, r.Host.Hostname, host)
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

// filesReadFromDisk are the record's files with pages missed, in the
// order the run first touched them (the first sample that shows them;
// files no sample shows come last, by id).
func filesReadFromDisk(r *record.Record) []record.File {
	first := map[int]int64{}
	for _, s := range r.Samples {
		for _, d := range s.Files {
			if _, ok := first[d.File]; !ok && (d.PagesAccessed > 0 || d.PagesMissed > 0) {
				first[d.File] = s.EndNS
			}
		}
	}
	var out []record.File
	for _, f := range r.Files {
		// Rows that are no file ("[filesystem metadata of 254:0 …]",
		// small files together) have nothing to evict or read, and files
		// in a --cold run's fresh caches went with them.
		if (f.PagesMissed > 0 || f.BytesFromDisk > 0) && !strings.HasPrefix(f.Path, "[") && !madeColdDir(r.MadeCold, f.Path) {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, oki := first[out[i].ID]
		tj, okj := first[out[j].ID]
		if oki != okj {
			return oki
		}
		return ti < tj
	})
	return out
}

// paths lists the record's files by path; files recorded without one
// are reported, one line each.
func (in *recordInput) paths(stderr io.Writer) []string {
	var out []string
	for _, f := range in.files {
		if f.Path == "" {
			fmt.Fprintf(stderr, "coldtrace: %s: file dev %d:%d inode %d has no path in the record\n", in.path, f.Dev>>20, f.Dev&(1<<20-1), f.Ino)
			continue
		}
		out = append(out, f.Path)
	}
	return out
}

// printProblems writes one line per path that could not be handled.
func printProblems(stderr io.Writer, probs []residency.Problem) {
	for _, p := range probs {
		fmt.Fprintf(stderr, "coldtrace: %s\n", p.Error())
	}
}
