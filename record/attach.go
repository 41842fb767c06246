package record

// Attached describes a trace that began in processes already running:
// what they did before the attach is not in the record.
type Attached struct {
	// PIDs are the processes named with --pid; Cgroup the directory
	// named with --cgroup.
	PIDs   []int32 `json:"pids,omitempty"`
	Cgroup string  `json:"cgroup,omitempty"`
	// Processes and Threads are how many were tracked at the attach.
	Processes int `json:"processes"`
	Threads   int `json:"threads"`
}

// Mark is a point the user named while the trace ran; marks cut the run
// into segments.
type Mark struct {
	// AtNS is when the mark arrived, in ns since Start.
	AtNS  int64  `json:"at_ns"`
	Label string `json:"label"`
}

// Ready is the moment a program became ready, and what said so.
type Ready struct {
	// AtNS is in ns since Start.
	AtNS int64 `json:"at_ns"`
	// By says what set it: `mark "ready"` or "the end of the first busy
	// stretch".
	By string `json:"by"`
}
