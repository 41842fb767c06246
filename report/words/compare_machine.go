package words

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/report/format"
)

// MachineChanges says the machine causes one run had and the other did
// not, one sentence each: "A read model.bin from disk 3.0× (memory cgroup
// limit 256.0 MiB); B once."
func MachineChanges(cs []compare.MachineChange) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		if s := MachineChange(c); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// MachineChange says one machine cause of a comparison.
func MachineChange(c compare.MachineChange) string {
	other := "B"
	if c.Side == "B" {
		other = "A"
	}
	file := format.Path(c.File, format.PathWidth)
	switch c.Kind {
	case compare.MachineReread:
		thisF, otherF, otherBytes := c.AFactor, c.BFactor, c.BBytesFromDisk
		thisBytes := c.ABytesFromDisk
		if c.Side == "B" {
			thisF, otherF, otherBytes, thisBytes = c.BFactor, c.AFactor, c.ABytesFromDisk, c.BBytesFromDisk
		}
		times := format.Bytes(thisBytes)
		if thisF > 0 {
			times = fmt.Sprintf("%.1f× (%s)", thisF, format.Bytes(thisBytes))
		}
		return fmt.Sprintf("%s read %s from disk %s, %s; %s %s.", c.Side, file, times, rereadCause(c.Cause), other, otherTimes(otherF, otherBytes))
	case compare.MachineEvictedBy:
		if c.Evictor == nil {
			return ""
		}
		return fmt.Sprintf("During %s, %s evicted %s of %s; not during %s.", c.Side, Evictor(*c.Evictor), format.Bytes(c.Bytes), file, other)
	case compare.MachineSharedRead:
		if c.Inserter == nil {
			return ""
		}
		return fmt.Sprintf("In %s, %s of %s came from disk through pid %d (%s, not traced) while it waited; not in %s.",
			c.Side, format.Bytes(c.Bytes), file, c.Inserter.PID, c.Inserter.Comm, other)
	case compare.MachineContention:
		this, that := c.ARunQueueNS, c.BRunQueueNS
		if c.Side == "B" {
			this, that = that, this
		}
		return fmt.Sprintf("%s waited %s for a CPU%s; %s %s.", c.Side, format.Duration(this), contentionWho(c.Contention), other, format.Duration(that))
	}
	return ""
}

// rereadCause says why a file was read again: "memory cgroup limit
// 256.0 MiB", "memory pressure", "evicted by pid 9 (…)".
func rereadCause(m *attribution.MemoryCause) string {
	if m == nil {
		return "evicted during the run"
	}
	switch m.Kind {
	case attribution.MemoryLimit:
		if m.LimitBytes > 0 {
			return "under its memory cgroup limit of " + format.Bytes(m.LimitBytes)
		}
		return "under its memory cgroup limit"
	case attribution.MemoryPressure:
		if m.AvailableBytes > 0 {
			return "under memory pressure (MemAvailable down to " + format.Bytes(m.AvailableBytes) + ")"
		}
		return "under memory pressure"
	}
	if m.Evictor != nil {
		return "evicted by " + Evictor(*m.Evictor)
	}
	return "evicted during the run"
}

// otherTimes says how often the other run read the file from disk.
func otherTimes(f float64, bytes uint64) string {
	switch {
	case bytes == 0:
		return "not at all"
	case f > 0 && f < 1.05:
		return "once"
	case f > 0:
		return fmt.Sprintf("%.1f×", f)
	}
	return format.Bytes(bytes)
}

// contentionWho says who held the CPUs: " (2 other processes (sh) used
// 1.9s; steal 40ms)".
func contentionWho(c *attribution.Contention) string {
	if c == nil {
		return ""
	}
	var parts []string
	if c.OthersCount > 0 {
		names := make([]string, 0, 3)
		for i, o := range c.Others {
			if i == 3 {
				break
			}
			names = append(names, o.Comm)
		}
		who := fmt.Sprintf("%d other %s", c.OthersCount, format.Plural(uint64(c.OthersCount), "process", "processes"))
		if len(names) > 0 {
			who += " (" + strings.Join(names, ", ") + ")"
		}
		parts = append(parts, fmt.Sprintf("%s used %s", who, format.Duration(c.OthersCPUNS)))
	}
	if c.StealNS > 0 {
		parts = append(parts, "steal "+format.Duration(c.StealNS))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// withMachine appends the machine causes to a comparison's sentence.
func withMachine(s string, v compare.Verdict) string {
	for _, m := range MachineChanges(v.Machine) {
		s += " " + m
	}
	return s
}
