package record

// JIT holds kernel-cache and compiler evidence. An empty section means no
// compile evidence was gathered.
type JIT struct {
	Caches    []Cache    `json:"caches,omitempty"`
	Compilers []Compiler `json:"compilers,omitempty"`
	// Windows are intervals in which a process was compiling (a compiler
	// subprocess ran, an in-process JIT filled a cache entry, or a
	// uprobed compile entry point was running).
	Windows []JITWindow `json:"windows,omitempty"`
	// Uprobes are the compile entry points that were probed in a traced
	// process, with their calls.
	Uprobes []JITUprobe `json:"uprobes,omitempty"`
	// PathSyscalls says from when the path syscalls (opens, failed
	// lookups, renames) that cache hits and misses come from were traced:
	// coldtrace attaches those probes once a process uses a framework with
	// a kernel cache.
	PathSyscalls string `json:"path_syscalls,omitempty"`
	// PathSyscallSpans are the intervals in which those probes were
	// attached, with what brought them in: attached syscall tracepoints
	// slow every task of the machine down, so they come off once no
	// process using such a framework remains.
	PathSyscallSpans []PathSyscallSpan `json:"path_syscall_spans,omitempty"`
}

// PathSyscallSpan is one interval in which the path-syscall probes were
// attached, in ns since the run's start.
type PathSyscallSpan struct {
	FromNS int64 `json:"from_ns"`
	// ToNS is when they came off, or the end of the run.
	ToNS int64 `json:"to_ns"`
	// Reason is what brought them in ("pid 12 imported numba").
	Reason string `json:"reason"`
	// Off says why they came off before the end ("": they stayed on).
	Off string `json:"off,omitempty"`
}

// Cache is one kernel/JIT cache directory seen during the run.
//
// An entry is the unit a cache key names (a Triton key directory, a .pyc
// file). Lookups counts (process, entry) pairs that looked an entry up;
// Hits, those that opened an existing entry for reading; Misses, those
// whose lookup failed or that created the entry, plus entries written
// without any lookup seen. EntriesWritten counts entries filled (usually a
// temp name renamed into place; several files renamed into one entry are
// one entry); BytesWritten is their size at the end of the run.
// CompileNS is the wall time of compiler subprocesses started between a
// miss and its fill, plus the on-CPU time of the missing thread over that
// interval (in-process compiles).
type Cache struct {
	Name           string `json:"name"`
	Root           string `json:"root"`
	Lookups        uint64 `json:"lookups"`
	Hits           uint64 `json:"hits"`
	Misses         uint64 `json:"misses"`
	EntriesWritten uint64 `json:"entries_written"`
	BytesWritten   uint64 `json:"bytes_written"`
	CompileNS      int64  `json:"compile_ns"`

	// Framework names the library that owns the cache ("Triton").
	Framework string `json:"framework,omitempty"`
	// Via is what decided Root: an environment variable of the traced
	// process, "default", or "--cache-dir".
	Via string `json:"via,omitempty"`
	// Health: the filesystem the root is on ("ext4", "tmpfs"), whether
	// that filesystem is lost on reboot, the cache's size at the end of
	// the run (SizeCapped: the walk stopped early, so SizeBytes is a lower
	// bound), the size limit set in the environment, and the switch that
	// disables or bypasses the cache, as "VAR=value".
	FS       string `json:"fs,omitempty"`
	Volatile bool   `json:"volatile,omitempty"`
	// ContainerLayer: the root is on overlay, a container's writable
	// layer, lost when the container is replaced.
	ContainerLayer bool `json:"container_layer,omitempty"`
	Missing        bool `json:"missing,omitempty"`
	// Unreadable: the command's user may not list the root, so coldtrace
	// did not size it (SizeBytes and Files are zero, not measured).
	Unreadable bool   `json:"unreadable,omitempty"`
	SizeBytes  int64  `json:"size_bytes,omitempty"`
	Files      int64  `json:"files,omitempty"`
	SizeCapped bool   `json:"size_capped,omitempty"`
	LimitBytes int64  `json:"limit_bytes,omitempty"`
	Disabled   string `json:"disabled,omitempty"`
	// Offline is the switch that keeps the next run off the network
	// ("HF_HUB_OFFLINE=1"): it cannot download, so a file the cache lacks
	// fails it instead of being fetched.
	Offline string `json:"offline,omitempty"`
	// Notes say in words what the health fields mean for the next run.
	Notes []string `json:"notes,omitempty"`
	// EntriesStale counts entries this run found and read, then wrote
	// again: present, but their key no longer matched (Numba's index
	// names the source's timestamp).
	EntriesStale uint64 `json:"entries_stale,omitempty"`
	// MissedKeys, WrittenKeys and StaleKeys name those entries (paths
	// below Root; below / for an in-tree root such as **/__pycache__,
	// whose every directory holds its own entries), sorted, at most
	// 2,000 each (KeysCapped: more were
	// left out), so that a diff can tell a changed key from a moved root.
	// Keys hold exact bytes, which need not be UTF-8: JSON carries every
	// key's base64 in missed_keys_b64 (written_keys_b64, stale_keys_b64,
	// hit_keys_b64) then, when any one is not (Cache.MarshalJSON).
	MissedKeys  []string `json:"missed_keys,omitempty"`
	WrittenKeys []string `json:"written_keys,omitempty"`
	StaleKeys   []string `json:"stale_keys,omitempty"`
	KeysCapped  bool     `json:"keys_capped,omitempty"`
	// Survival says whether the root outlives a reboot or its container,
	// by the one rule of docs/definitions.md (its filesystem and systemd-tmpfiles ageing):
	// "persistent", "lost at reboot", "container layer" or "aged";
	// SurvivalAge is the ageing rule's age and file, when one applies.
	Survival    string `json:"survival,omitempty"`
	SurvivalAge string `json:"survival_age,omitempty"`
	// MovedBy is the environment variable that sets the root, highest
	// precedence first ("NUMBA_CACHE_DIR"), whether or not it was set.
	MovedBy string `json:"moved_by,omitempty"`
	// HitKeys names the entries found and used (as MissedKeys).
	HitKeys []string `json:"hit_keys,omitempty"`
	// OtherRoots are default locations of the same cache, other than
	// Root, that hold files at the end of a run whose lookups all missed:
	// HOME, XDG_CACHE_HOME or a variable moved the cache away from them.
	OtherRoots []OtherRoot `json:"other_roots,omitempty"`
	// KeyIncludes says what the framework puts in an entry's key (from
	// the registry), for a cache whose lookups matched no entry it held.
	KeyIncludes string `json:"key_includes,omitempty"`
	// Stacks split the cache's lookups by the Python stack of the thread
	// that made them (seen by the path-syscall probes, in that thread):
	// per stack its misses, their compile time (NS, the part of
	// CompileNS of the misses it started) and its hits, most time first.
	// Lookups of threads without a Python stack are in the totals only.
	Stacks []StackCharge `json:"stacks,omitempty"`
	// Failures are the calls under Root that failed in a way a lookup
	// does not (a rename or unlink, an open for anything but ENOENT), by
	// call and errno, most first: seen only while the path syscalls were
	// traced. A cache on NFS or shared between processes fails them
	// (EBUSY, ENOENT, ESTALE) and its framework compiles again.
	Failures []CacheFailure `json:"failures,omitempty"`
	// EntriesGone counts entries written this run (EntriesWritten) whose
	// file no longer existed at the end: removed, or never renamed into
	// place (a Python .pyc whose rename failed is counted written from
	// its temporary file). An in-tree entry whose source directory went
	// too (a tree pip compiled and moved, a build's scratch tree) is not
	// counted: it went with its sources.
	EntriesGone uint64 `json:"entries_gone,omitempty"`
}

// CacheFailure is one kind of failed call under a cache's root.
type CacheFailure struct {
	// Op is "rename", "unlink" or "open"; Errno its error ("EBUSY").
	Op    string `json:"op"`
	Errno string `json:"errno"`
	Count uint64 `json:"count"`
	// Path is the first failed call's path (a rename's new name), and
	// FirstNS when it failed. Its exact bytes, which need not be UTF-8,
	// are in path_b64 then (CacheFailure.MarshalJSON).
	Path    string `json:"path"`
	FirstNS int64  `json:"first_ns"`
	// PIDs are the processes whose calls failed (at most 64), sorted.
	PIDs []int32 `json:"pids"`
}

// OtherRoot is a location of a cache the run did not use, and what it
// holds.
type OtherRoot struct {
	// Path holds exact bytes: path_b64 when not UTF-8, as a file's.
	Path      string `json:"path"`
	Files     int64  `json:"files"`
	SizeBytes int64  `json:"size_bytes"`
}

// Compiler is one compiler program's runs as subprocesses. WallNS is the
// union of the intervals in which a process of that name or one of its
// descendants ran; CPUNS is the on-CPU time of those processes and of
// their descendants that are not compilers themselves (so the compilers'
// CPUNS add up without double counting).
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
	// Stack is 1 + the index in Record.Stacks of the Python stack behind
	// the window, 0 for none: for "uprobe", the calling thread's at the
	// call; for "in_process", the missing thread's at the miss. Windows
	// of other stacks are not merged into one.
	Stack int `json:"stack,omitempty"`
}

// JITUprobe is one probed compile entry point. Name is "LIB:SYMBOL" with
// LIB as the user gave it (or the library's base name for the built-in
// probes); Path is the file the probe was attached to. TotalNS sums the
// calls' entry→return times; CPUNS their threads' on-CPU time. Path's
// exact bytes, when not UTF-8, are in path_b64 (JITUprobe.MarshalJSON).
type JITUprobe struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Calls   uint64 `json:"calls"`
	TotalNS int64  `json:"total_ns"`
	CPUNS   int64  `json:"cpu_ns"`
	// Error says why the probe could not be attached.
	Error string `json:"error,omitempty"`
	// Scope says which processes the probe was installed in: traced
	// ones only, how, and how many.
	Scope string `json:"scope,omitempty"`
}
