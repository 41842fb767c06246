package words

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// Verdict says a run's verdict in one or two sentences: the memory
// cause when pages were read again after an eviction (it replaces the
// cold-start sentence: a rerun would not be faster), then the CPU
// contention when the run waited for CPUs others held.
func Verdict(v attribution.Verdict) string {
	out := verdictCore(v)
	if v.Memory != nil && v.Kind != attribution.VerdictEmpty {
		out = Memory(*v.Memory, v.WarmEstimateNS)
	}
	if v.Contention != nil {
		out += " " + Contention(*v.Contention)
	}
	return out
}

func verdictCore(v attribution.Verdict) string {
	switch v.Kind {
	case attribution.VerdictEmpty:
		return "empty run: the command exited at once; there is no time to attribute."
	case attribution.VerdictCold:
		parts := make([]string, 0, len(v.Causes))
		for _, c := range v.Causes {
			parts = append(parts, pct(c)+" "+c.Category.Label()+detail(c))
		}
		return fmt.Sprintf("cold start: %s; a warm rerun should take ~%s.",
			strings.Join(parts, ", "), format.Duration(v.WarmEstimateNS))
	}
	var parts []string
	for _, c := range v.Causes {
		if c.Recurring {
			parts = append(parts, pct(c)+" "+c.Category.Label()+recurring(c))
			continue
		}
		parts = append(parts, pct(c)+" "+c.Category.Label()+waitHint(c))
	}
	var tail string
	switch {
	case v.AvoidableNS == 0 && v.RecurringNS > 0:
		tail = "what it read from disk a rerun reads again, and nothing came from a compiler or the network, so a rerun should take about as long."
	case v.AvoidableNS == 0:
		tail = "nothing came from disk, a compiler or the network, so a rerun should take about as long."
	default:
		// Name the main avoidable cost even when it is small: "why was
		// it not slower/faster" still wants the file or compiler.
		var mostly string
		if v.Mostly != nil {
			mostly = ", mostly " + v.Mostly.Category.Label() + detail(*v.Mostly)
		}
		tail = fmt.Sprintf("disk reads, compiles and downloads took only %s (%s)%s, so a warm rerun would save little.",
			sharePct(v.AvoidableShare), format.Duration(v.AvoidableNS), mostly)
		if v.AvoidableShare >= 0.10 {
			// Warm by what happened: those reads, downloads and
			// compiles left nothing a rerun finds, so it repeats them.
			tail = fmt.Sprintf("disk reads, compiles and downloads took %s (%s)%s, but left nothing a rerun would find (no data it finds cached, no kept download, no cache entry), so a rerun repeats them.",
				sharePct(v.AvoidableShare), format.Duration(v.AvoidableNS), mostly)
		}
	}
	return "warm run: " + strings.Join(parts, ", ") + "; " + tail
}

func pct(c attribution.Cause) string {
	if c.Pct == 0 && c.NS > 0 {
		return "<1%"
	}
	return fmt.Sprintf("%d%%", c.Pct)
}

func sharePct(share float64) string {
	p := share * 100
	if p > 0 && p < 1 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}

// recurring names the disk time a rerun pays again: the file read with
// direct I/O that took most of it, or I/O the page cache does not see.
func recurring(c attribution.Cause) string {
	if len(c.Names) == 0 || c.Names[0] == attribution.OutsidePageCache {
		return " (I/O outside the page cache, which a rerun repeats)"
	}
	return " (direct I/O of " + fileAndOthers(c.Names[0], c.OtherFiles) + ", which a rerun repeats)"
}

// fileAndOthers names a cause's top file and counts the rest: "a.bin",
// "a.bin and 1 other file", "a.bin and 3 other files".
func fileAndOthers(top string, others int) string {
	top = format.Path(top, format.PathWidth)
	switch others {
	case 0:
		return top
	case 1:
		return top + " and 1 other file"
	}
	return fmt.Sprintf("%s and %d other files", top, others)
}

func waitHint(c attribution.Cause) string {
	if c.Category == attribution.OtherWait {
		return " (sleep, locks, idle)"
	}
	return ""
}

// detail names a cause's evidence in parentheses.
func detail(c attribution.Cause) string {
	switch c.Category {
	case attribution.DiskRead:
		switch {
		case len(c.Names) == 0 && c.Unidentified:
			return " (files not identified)"
		case len(c.Names) == 0:
			return ""
		}
		if c.NoneMissed {
			// None of their pages did the run read itself: it waited
			// for pages already on their way in, so the files were not
			// simply "not in page cache".
			return " (waiting for " + fileAndOthers(c.Names[0], c.OtherFiles) + " already being read in)"
		}
		return " (" + fileAndOthers(c.Names[0], c.OtherFiles) + " not in page cache)"
	case attribution.JITCompile:
		if len(c.Names) > 0 {
			return " (" + strings.Join(c.Names, ", ") + ")"
		}
	case attribution.Download:
		if c.Download != nil {
			return " (" + Download(*c.Download) + ")"
		}
		if len(c.Names) > 0 {
			return " (" + format.Path(c.Names[0], format.PathWidth) + ")"
		}
	}
	return ""
}

// Download says what a download was and whether a warm rerun repeats it:
// "model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 40 MB/s, into the
// huggingface cache: kept for the next run". The peer is named by its host
// name when the process looked it up.
func Download(d attribution.DownloadEvidence) string {
	from := cmp.Or(d.Host, d.Peer)
	what := fmt.Sprintf("%s from %s at %.0f MB/s", format.Bytes(d.Bytes), from, d.MBPerS)
	if d.Fate != attribution.FateMemory && d.Fate != attribution.FateNotSeen {
		what = format.Path(d.Name, format.PathWidth) + ", " + what
	}
	if d.Count > 1 {
		what += fmt.Sprintf(" (%d downloads)", d.Count)
	}
	cache := "the " + d.Cache + " cache"
	switch d.Fate {
	case attribution.FateKept:
		return what + ", into " + cache + ": kept for the next run"
	case attribution.FateMemory:
		return what + ", kept in memory: a rerun downloads it again"
	case attribution.FateDeleted:
		return what + ", into a file deleted before the exit: a rerun downloads it again"
	case attribution.FateVolatile:
		return what + ", into " + cache + " on " + d.CacheFS + ", lost at reboot: a rerun after a reboot downloads it again"
	case attribution.FateContainer:
		return what + ", into " + cache + " in a container's writable layer, lost with the container: a rerun in a new container downloads it again"
	case attribution.FateNotSeen:
		return what + ", destination not seen: a rerun may download it again"
	case attribution.FateNameUnknown:
		return what + ", into a file renamed, final name unknown: a rerun may download it again"
	}
	return what + ", outside any known cache: a rerun may download it again"
}

// Fate says in a few words what the next run does about a download that
// landed in cache (a cache name, or "").
func Fate(f attribution.Fate, cache string) string {
	switch f {
	case attribution.FateKept:
		return "kept (" + cache + " cache)"
	case attribution.FateMemory:
		return "fetched again (kept in memory)"
	case attribution.FateDeleted:
		return "fetched again (file deleted)"
	case attribution.FateVolatile:
		return "fetched again after a reboot (" + cache + " cache on tmpfs)"
	case attribution.FateContainer:
		return "fetched again in a new container (" + cache + " cache in the container layer)"
	case attribution.FateNotSeen:
		return "maybe fetched again (destination not seen)"
	case attribution.FateNameUnknown:
		return "maybe fetched again (renamed, final name unknown)"
	}
	return "maybe fetched again (not in a known cache)"
}

// Note says one caveat of a result.
func Note(n attribution.Note) string {
	switch n.Kind {
	case attribution.NoteStartError:
		return "the command could not be started: " + n.Text
	case attribution.NoteInterrupted:
		return "coldtrace was interrupted before the command ended; the breakdown covers the part that ran"
	case attribution.NoteKilled:
		return fmt.Sprintf("the command was killed by %s (exit %d)", n.Text, n.ExitCode)
	case attribution.NoteLost:
		if n.Lost == nil {
			return "events were lost: the numbers are lower bounds"
		}
		x := *n.Lost
		msg := fmt.Sprintf("%d events were lost (ring buffer %d, file table %d, thread table %d, tracked table %d, paths %d, fill ends %d",
			x.Total(), x.RingBuffer, x.FileTable, x.ThreadTable, x.Tracked, x.Paths, x.FillEnds)
		if x.Network > 0 {
			msg += fmt.Sprintf(", network %d", x.Network)
		}
		return msg + "): the numbers are lower bounds"
	case attribution.NoteUnobservedAll:
		return "no thread samples cover the run: its time counts as other wait unless a GPU or download signal covers it"
	case attribution.NoteUnobservedTail:
		return fmt.Sprintf("the last %s after the final sample were not observed and count as other wait", format.Duration(n.NS))
	case attribution.NoteAfterExit:
		return fmt.Sprintf("processes kept running after the command exited: %s of thread time after the exit is not in the breakdown", format.Duration(n.NS))
	case attribution.NoteGPUUnavailable:
		return "GPU: " + n.Text
	case attribution.NoteSharedRead:
		if n.Inserter == nil {
			break
		}
		return fmt.Sprintf("%s of %s came from disk through pid %d (%s, not traced) while this run waited: counted as disk reads, not hits",
			format.Bytes(n.Bytes), format.Path(n.Path, format.PathWidth), n.Inserter.PID, n.Inserter.Comm)
	case attribution.NoteEvictedBy:
		if n.Evictor == nil {
			break
		}
		return fmt.Sprintf("%s of %s was evicted during the run by %s", format.Bytes(n.Bytes), format.Path(n.Path, format.PathWidth), Evictor(*n.Evictor))
	case attribution.NoteGPULost:
		return fmt.Sprintf("GPU %d was lost at +%s (%s): its numbers stop there; the rest of the trace goes on", n.GPU, format.Duration(n.NS), n.Text)
	case attribution.NoteGPUUnsupported:
		return fmt.Sprintf("GPU %d does not report %s (NVML: not supported); its other numbers are kept", n.GPU, gpuFields(n.Names))
	case attribution.NoteGPUShared:
		msg := fmt.Sprintf("GPU %d was also used by %d untraced process(es) (%s): ", n.GPU, n.Processes, strings.Join(n.Names, ", "))
		if n.RunSharePct != nil {
			return msg + fmt.Sprintf("gpu_compute counts the run's share of its work (%.0f%%)", *n.RunSharePct)
		}
		return msg + "the run's share is unknown, so gpu_compute may include their work"
	}
	return string(n.Kind)
}

// Notes says each caveat; nil when there are none.
func Notes(ns []attribution.Note) []string {
	if len(ns) == 0 {
		return nil
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = Note(n)
	}
	return out
}

// gpuFields words the names of GPU fields a device did not report.
func gpuFields(names []string) string {
	words := map[string]string{
		record.GPUFieldUtil: "utilization", record.GPUFieldMemUtil: "memory utilization",
		record.GPUFieldMemUsed: "memory used", record.GPUFieldSMClock: "SM clock", record.GPUFieldPower: "power",
		record.GPUFieldProcesses: "its processes (per-process VRAM)", record.GPUFieldProcessUtil: "per-process utilization",
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if w, ok := words[n]; ok {
			out = append(out, w)
		} else {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// VRAMAtExit says what the run's VRAM did when the command exited: a
// model a server keeps loaded is a load the next request skips.
func VRAMAtExit(v attribution.VRAMRelease) string {
	if v.Released {
		return fmt.Sprintf("the run's VRAM was released at exit (%s → %s): a server that keeps the model loaded would not load it again",
			format.Bytes(v.BeforeBytes), format.Bytes(v.AfterBytes))
	}
	return fmt.Sprintf("VRAM was not released at exit (%s → %s)", format.Bytes(v.BeforeBytes), format.Bytes(v.AfterBytes))
}

// Destination says where a download's body went, for the downloads
// table's first column: the file, or why there is none.
func Destination(d record.Download) string {
	switch {
	case d.Destination == record.DestNotSeen:
		return "(destination not seen)"
	case d.Path == "":
		return "(kept in memory)"
	}
	return d.Path
}

// DestinationNote is what the downloads table says under a download's
// row about its destination, or "".
func DestinationNote(d record.Download) string {
	switch {
	case d.Destination == record.DestExpanded:
		return fmt.Sprintf("expanded %.1f× (compressed or reassembled transfer)", d.Expansion)
	case d.Destination == record.DestUnpacked && len(d.Files) > 0:
		more := ""
		if d.Expansion >= 1.05 { // not "expanded 1.0×"
			more = fmt.Sprintf(", expanded %.1f×", d.Expansion)
		}
		// Encrypted or not, where one request's body ends and the next
		// begins is not seen: an archive unpacked as it arrives and
		// several bodies over one kept-alive connection (huggingface_hub
		// fetching a model's files in turn, npm) look alike.
		return fmt.Sprintf("written as it arrived into %s%s (an archive unpacked, or several bodies over one connection), the largest %s",
			format.Counted(uint64(len(d.Files)), "file", "files"), more, format.Path(d.Files[0].Path, format.PathWidth))
	case d.Destination == record.DestNotSeen && d.Unlisted:
		return "its process's open files were not listed while it received: a body written to tmpfs and closed between two looks is not seen"
	case d.Destination == record.DestNotSeen:
		return fmt.Sprintf("no file followed the received bytes; %d files written meanwhile (candidates in the record)", len(d.Candidates))
	case d.KeptIn != nil:
		return "its body kept in " + format.Path(d.KeptIn.Path, format.PathWidth)
	case len(d.Files) > 0 && d.Files[0].NameUnknown:
		return "renamed, final name unknown"
	case len(d.Files) > 0 && d.Files[0].WrittenPath != "":
		return "first named " + format.Path(d.Files[0].WrittenPath, format.PathWidth)
	}
	return ""
}
