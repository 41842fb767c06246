package probe

// FileSeen is one path record of the page-cache probes, resolved: what
// tells the JIT sensor which libraries a process maps and, while no path
// syscall is traced, Python's bytecode cache at work.
type FileSeen struct {
	PID, TID int32
	// TS is CLOCK_MONOTONIC (ns); CPUNS the thread's on-CPU time so far,
	// the clock the JIT sensor's path events carry.
	TS, CPUNS uint64
	Path      string
	// Dev (the kernel's s_dev encoding), Ino and Gen (its inode's
	// generation) are the file's.
	Dev  uint32
	Ino  uint64
	Gen  uint32
	Kind SeenKind
}

// SeenKind says why a path was sent (enum path_kind in pagecache.bpf.c).
type SeenKind uint32

const (
	// SeenFirst is a file's first sight by the run: read, mapped or
	// written.
	SeenFirst SeenKind = iota
	// SeenPythonRead is the first read of a .py or .pyc file by a
	// process.
	SeenPythonRead
	// SeenCreated is a file whose first page the run inserted by writing
	// it: a new file.
	SeenCreated
)
