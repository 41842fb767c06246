package record

// JIT holds kernel-cache and compiler evidence. Its fields grow with the
// JIT issue; an empty section means no compile evidence was gathered.
type JIT struct {
	Caches    []Cache    `json:"caches,omitempty"`
	Compilers []Compiler `json:"compilers,omitempty"`
	// Windows are intervals in which a process was compiling (a compiler
	// subprocess ran, or an in-process JIT filled a cache entry).
	Windows []JITWindow `json:"windows,omitempty"`
}

// Cache is one kernel/JIT cache directory seen during the run.
type Cache struct {
	Name           string `json:"name"`
	Root           string `json:"root"`
	Lookups        uint64 `json:"lookups"`
	Hits           uint64 `json:"hits"`
	Misses         uint64 `json:"misses"`
	EntriesWritten uint64 `json:"entries_written"`
	BytesWritten   uint64 `json:"bytes_written"`
	CompileNS      int64  `json:"compile_ns"`
}

// Compiler is one compiler program's runs as subprocesses.
type Compiler struct {
	Name   string `json:"name"`
	Runs   int    `json:"runs"`
	WallNS int64  `json:"wall_ns"`
	CPUNS  int64  `json:"cpu_ns"`
}

// JITWindow is one interval of compile work by one process.
type JITWindow struct {
	PID     int32  `json:"pid"`
	StartNS int64  `json:"start_ns"`
	EndNS   int64  `json:"end_ns"`
	Kind    string `json:"kind"`   // "compiler", "in_process", "uprobe"
	Source  string `json:"source"` // compiler name, cache name or LIB:SYMBOL
	CPUNS   int64  `json:"cpu_ns"`
}
