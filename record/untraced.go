package record

// Untraced is a process that left the trace at a secure exec: it ran a
// setuid or setgid program, or one with file capabilities, while
// coldtrace acted for an invoking user (sudo, doas, pkexec). What such a
// program reads with its privileges is not that user's to see, so from
// the exec on neither it nor anything it forks is traced.
type Untraced struct {
	// Path is the program as the exec named it.
	Path string `json:"path"`
	PID  int32  `json:"pid"`
	// Reason is UntracedSetuid, UntracedSetgid or UntracedCapabilities.
	Reason string `json:"reason"`
	// AtNS is when the exec happened, in ns since Start.
	AtNS int64 `json:"at_ns"`
}

// The reasons of an Untraced.
const (
	UntracedSetuid       = "setuid"
	UntracedSetgid       = "setgid"
	UntracedCapabilities = "file capabilities"
)
