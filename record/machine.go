package record

// Machine is what the machine let the run use, and what else took it:
// memory and its limits, CPU time of processes outside the run, and a
// VM's steal time.
type Machine struct {
	// MemStart and MemEnd are /proc/meminfo at the command's release and
	// at its exit.
	MemStart MemInfo `json:"mem_start"`
	MemEnd   MemInfo `json:"mem_end"`
	// Cgroups are the memory cgroups the traced processes ran in.
	Cgroups []Cgroup `json:"cgroups,omitempty"`
	// Others are processes outside the run that used CPU during it,
	// grouped by name, the heaviest first (at most a few).
	Others []OtherCPU `json:"others,omitempty"`
	// OthersCPUNS is the CPU time of every process outside the run
	// during it (coldtrace's own excluded), OthersCount how many.
	OthersCPUNS int64 `json:"others_cpu_ns"`
	OthersCount int   `json:"others_count"`
	// StealNS is CPU time the hypervisor gave to other guests during the
	// run, summed over CPUs (/proc/stat).
	StealNS int64 `json:"steal_ns"`
}

// MemInfo is a /proc/meminfo reading.
type MemInfo struct {
	TotalBytes     uint64 `json:"total_bytes"`
	AvailableBytes uint64 `json:"available_bytes"`
	CachedBytes    uint64 `json:"cached_bytes"`
}

// Cgroup is one memory cgroup of the run and its limits (0: none).
type Cgroup struct {
	// Version is 1 or 2; Path is inside the hierarchy ("/a/b").
	Version int    `json:"version"`
	Path    string `json:"path"`
	// LimitBytes is memory.limit_in_bytes (v1) or memory.max (v2);
	// HighBytes is memory.high (v2).
	LimitBytes uint64  `json:"limit_bytes,omitempty"`
	HighBytes  uint64  `json:"high_bytes,omitempty"`
	PIDs       []int32 `json:"pids"`
}

// OtherCPU is the CPU time of processes outside the run with one name.
type OtherCPU struct {
	Comm      string `json:"comm"`
	Processes int    `json:"processes"`
	CPUNS     int64  `json:"cpu_ns"`
}

// MemoryLimit is the lowest memory limit (limit or high) of the run's
// cgroups, and the cgroup; 0 when none is set.
func (m *Machine) MemoryLimit() (uint64, *Cgroup) {
	if m == nil {
		return 0, nil
	}
	var best uint64
	var cg *Cgroup
	for i := range m.Cgroups {
		c := &m.Cgroups[i]
		for _, l := range []uint64{c.LimitBytes, c.HighBytes} {
			if l > 0 && (best == 0 || l < best) {
				best, cg = l, c
			}
		}
	}
	return best, cg
}
