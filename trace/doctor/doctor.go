// Package doctor checks that coldtrace can trace on this machine and that
// its counters are right here: root, BTF, tracefs, every tracepoint and
// uprobe each sensor uses (loaded and attached for real), NVML,
// cachestat, and then the page-cache counts of a file it evicts and
// reads, compared with the file's known page count. A kernel that
// changes a tracepoint's meaning shows up as wrong counts, not as an
// error (BCC's cachestat reported zero misses for years, bcc#5144);
// this is the comparison with a known answer.
package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/cilium/ebpf/btf"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/trace"
	"github.com/coldtrace/coldtrace/trace/gpu"
	"github.com/coldtrace/coldtrace/trace/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// Status is the outcome of one check.
type Status int

const (
	OK   Status = iota
	Note        // works with a limit worth knowing, or absent and optional
	Fail        // a report would be missing something or be wrong
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Note:
		return "note"
	}
	return "FAIL"
}

// Check is one line of the doctor's report.
type Check struct {
	Status Status
	Name   string
	Detail string
	// Lacks is what a report would lack (or get wrong) because of it.
	Lacks string
}

// Options configure a check-up.
type Options struct {
	// Dir is on the filesystem whose page-cache counts are checked (the
	// current directory when empty).
	Dir string
	// Hide names tracepoints to treat as absent, for tests of the doctor
	// itself: each is renamed to one no kernel has before it is loaded
	// or attached, so the kernel's own refusal is what the doctor
	// reports.
	Hide []string
	// NVML is the library to ask about GPUs (nvml.New() when nil).
	NVML nvml.Interface
	// Actor is whose rights the test file is made with (internal/actor:
	// the invoking user under sudo); the traced read runs as that user.
	Actor actor.Actor
}

// Report is every check, in the order run.
type Report struct {
	Checks []Check
}

// Failed is the checks that failed.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == Fail {
			out = append(out, c)
		}
	}
	return out
}

func (r *Report) add(c Check) { r.Checks = append(r.Checks, c) }

// Run runs every check. Later checks run even when earlier ones fail, so
// one run shows everything that is wrong; those that cannot run say why.
func Run(ctx context.Context, opts Options) *Report {
	if opts.Dir == "" {
		opts.Dir = "."
	}
	if opts.NVML == nil {
		opts.NVML = nvml.New()
	}
	r := &Report{}
	if os.Geteuid() != 0 {
		r.add(Check{Status: Fail, Name: "root", Detail: "not root: loading eBPF needs it; run: sudo coldtrace doctor",
			Lacks: "everything: coldtrace run needs root"})
		return r
	}
	r.add(Check{Status: OK, Name: "root"})
	if _, err := btf.LoadKernelSpec(); err != nil {
		r.add(Check{Status: Fail, Name: "BTF", Detail: err.Error(), Lacks: "everything: the probes need the kernel's BTF (CONFIG_DEBUG_INFO_BTF=y)"})
		return r
	}
	r.add(Check{Status: OK, Name: "BTF", Detail: "/sys/kernel/btf/vmlinux"})
	r.add(checkTracefs())
	hide := map[string]bool{}
	for _, h := range opts.Hide {
		hide[h] = true
	}
	for _, c := range checkPrograms(hide) {
		r.add(c)
	}
	r.add(checkFillEnds())
	r.add(checkUprobes())
	r.add(checkNVML(opts.NVML))
	for _, c := range checkPageCache(ctx, opts.Actor, opts.Dir) {
		r.add(c)
	}
	return r
}

func checkTracefs() Check {
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(dir + "/events"); err == nil {
			return Check{Status: OK, Name: "tracefs", Detail: dir}
		}
	}
	// Classic tracepoints are found by their tracefs id; coldtrace run
	// mounts it when it is missing (trace.Preflight), and so does this.
	if err := trace.Preflight(); err != nil {
		return Check{Status: Fail, Name: "tracefs", Detail: err.Error(), Lacks: "classic tracepoints (evictions, path syscalls)"}
	}
	return Check{Status: Note, Name: "tracefs", Detail: "was not mounted; mounted it at /sys/kernel/tracing, as coldtrace run does"}
}

// checkFillEnds says how this kernel lets fill intervals end: at each
// kernel entry's return to user space (a task work), or at the next look
// at the thread.
func checkFillEnds() Check {
	ok, err := pagecache.TaskWorksAllowed(nil)
	switch {
	case err != nil:
		return Check{Status: Fail, Name: "fill ends", Detail: err.Error(), Lacks: "page-cache fills"}
	case ok:
		return Check{Status: OK, Name: "fill ends", Detail: "a BPF task work ends each fill at its return to user space"}
	}
	rseq, err := probe.HasTracepoint(nil, "rseq_update")
	if err != nil {
		return Check{Status: Fail, Name: "fill ends", Detail: err.Error(), Lacks: "page-cache fills"}
	}
	detail := "this kernel refuses task works to tracing programs: "
	if rseq {
		detail += "a fill in which its thread waited ends at its return to user space (rseq_update, for threads with an rseq area: glibc 2.35 and later), "
	}
	detail += "a read's other fills at its syscall exit (that tracepoint goes on only for fills that need it and puts every process on the syscall slow path until a second passes without one; --no-read-exits leaves it off), any other at the next look at its thread"
	return Check{Status: Note, Name: "fill ends", Detail: detail,
		Lacks: "the CPU time from a filling entry's last page-cache event to its return to user space where neither shows it (see docs/limitations.md)"}
}

func checkNVML(lib nvml.Interface) Check {
	s := gpu.Open(lib, gpu.Options{})
	defer s.Close()
	if !s.Available() {
		return Check{Status: Note, Name: "NVML", Detail: s.Unavailable(), Lacks: "GPU compute time, utilisation and VRAM (fine on a machine without an NVIDIA GPU)"}
	}
	return Check{Status: OK, Name: "NVML", Detail: "NVIDIA GPUs are sampled"}
}

// Write prints the report: one line per check, then what a report would
// lack.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("coldtrace doctor\n")
	counts := map[Status]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
		line := fmt.Sprintf("  %-4s  %s", c.Status, c.Name)
		if c.Detail != "" {
			line += ": " + c.Detail
		}
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "\n%d ok, %d notes, %d failed\n", counts[OK], counts[Note], counts[Fail])
	var lacks []string
	for _, c := range r.Checks {
		if c.Status != OK && c.Lacks != "" {
			lacks = append(lacks, fmt.Sprintf("  %s (%s): %s", c.Lacks, c.Name, c.Status))
		}
	}
	if len(lacks) > 0 {
		b.WriteString("a report here would lack:\n" + strings.Join(lacks, "\n") + "\n")
	} else {
		b.WriteString("a report here would lack nothing\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
