package words

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// Memory says why files were read from disk again, and what to do.
func Memory(m attribution.MemoryCause, warmNS int64) string {
	file := format.Path(m.File, format.PathWidth)
	if m.SizeBytes > 0 {
		file += " (" + format.Bytes(uint64(m.SizeBytes)) + ")"
	}
	read := fmt.Sprintf("%s was read from disk %.1f× (%s)", file, m.Factor, format.Bytes(m.FromDiskBytes))
	again := fmt.Sprintf("a rerun will read it again and will not be faster (~%s)", format.Duration(warmNS))
	switch m.Kind {
	case attribution.MemoryLimit:
		limit := "the run's memory cgroup limit"
		if m.LimitBytes > 0 {
			limit += " (" + format.Bytes(m.LimitBytes) + ")"
		}
		return fmt.Sprintf("thrashing: %s because %s is below the data it reads; %s. Raise the limit above ~%s, or read the file once.",
			read, limit, again, roughGiB(m.DataBytes*6/5))
	case attribution.MemoryPressure:
		by := "the kernel"
		if m.Evictor != nil {
			by = Evictor(*m.Evictor)
		}
		avail := ""
		if m.AvailableBytes > 0 {
			avail = fmt.Sprintf(" while MemAvailable was down to %s", format.Bytes(m.AvailableBytes))
		}
		return fmt.Sprintf("memory pressure: %s: %s evicted %s of it during the run%s; under the same pressure %s. Free memory, or read the file once.",
			read, by, format.Bytes(m.EvictedBytes), avail, again)
	}
	by := "another process"
	if m.Evictor != nil {
		by = Evictor(*m.Evictor)
	}
	return fmt.Sprintf("evicted during the run: %s because %s evicted %s of it; if that happens again, %s.",
		read, by, format.Bytes(m.EvictedBytes), again)
}

// roughGiB says a size the way advice rounds it: "~0.6 GiB".
func roughGiB(b uint64) string {
	if b < 100<<20 {
		return format.Bytes(b)
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// Evictor names who evicted pages: "kswapd", "memory-cgroup reclaim in
// pid 12 (cat, traced, cgroup v1:/x)", "pid 7 (python3, not traced,
// fadvise64)".
func Evictor(e record.Evictor) string {
	traced := "not traced"
	if e.Traced {
		traced = "traced"
	}
	who := fmt.Sprintf("pid %d (%s, %s", e.PID, e.Comm, traced)
	if e.Cgroup != "" && (e.Kind == record.EvictMemcgReclaim || e.Kind == record.EvictDirectReclaim) {
		who += ", cgroup " + e.Cgroup
	}
	switch e.Kind {
	case record.EvictKswapd:
		return "kswapd (memory pressure)"
	case record.EvictKdamond:
		return "DAMON (" + e.Comm + ")"
	case record.EvictMemcgReclaim:
		return "memory-cgroup reclaim in " + who + ")"
	case record.EvictDirectReclaim:
		return "direct reclaim in " + who + ")"
	case record.EvictSyscall:
		if e.Syscall != "" {
			who += ", " + e.Syscall
		}
		return who + ")"
	}
	return "the kernel (" + e.Comm + ")"
}

// Contention says that the run waited for CPUs other work held.
func Contention(c attribution.Contention) string {
	var s strings.Builder
	fmt.Fprintf(&s, "The run waited %s for a CPU", format.Duration(c.RunQueueNS))
	if c.FillRunQueueNS > 0 {
		fmt.Fprintf(&s, " (%s of it inside page-cache fills, counted as disk reads)", format.Duration(c.FillRunQueueNS))
	}
	if c.OthersCount > 0 {
		names := make([]string, 0, len(c.Others))
		for i, o := range c.Others {
			if i == 3 {
				break
			}
			names = append(names, o.Comm)
		}
		fmt.Fprintf(&s, ": %d other processes (%s) used %s of CPU during it", c.OthersCount, strings.Join(names, ", "), format.Duration(c.OthersCPUNS))
	}
	if c.StealNS > 0 {
		fmt.Fprintf(&s, "; the hypervisor took %s (steal)", format.Duration(c.StealNS))
	}
	return s.String() + "."
}

// FileMachine says, for a file's row, what the machine did to it: read
// again after eviction, evicted by whom, read from disk by whom else.
// Nothing when none of it happened.
func FileMachine(f record.File, pageSize int) []string {
	ps := uint64(max(pageSize, 1))
	var out []string
	if f.PagesReread > 0 {
		line := fmt.Sprintf("read from disk again after eviction: %s", format.Bytes(f.PagesReread*ps))
		if f.SizeBytes > 0 {
			line = fmt.Sprintf("read from disk %.1f× its size (%s again after eviction)",
				float64(f.PagesMissed*ps)/float64(f.SizeBytes), format.Bytes(f.PagesReread*ps))
		}
		out = append(out, line)
	}
	for i, e := range f.Evictors {
		if i == 3 {
			out = append(out, fmt.Sprintf("… %d more evictors", len(f.Evictors)-i))
			break
		}
		out = append(out, fmt.Sprintf("evicted during the run: %s by %s", format.Bytes(e.Pages*ps), Evictor(e)))
	}
	for i, in := range f.Inserters {
		if i == 3 {
			break
		}
		out = append(out, fmt.Sprintf("%s read from disk by pid %d (%s, not traced) during the run", format.Bytes(in.Pages*ps), in.PID, in.Comm))
	}
	if f.PagesShared > 0 {
		out = append(out, fmt.Sprintf("%s of its reads waited for those pages (not hits)", format.Bytes(f.PagesShared*ps)))
	}
	return out
}
