package trace

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrPreflight marks a problem with the machine or the invocation that
// stops coldtrace before it runs anything; its message says what to do.
var ErrPreflight = errors.New("cannot trace")

const (
	btfPath     = "/sys/kernel/btf/vmlinux"
	tracefsPath = "/sys/kernel/tracing"
)

// Preflight checks what tracing needs, in the order a user would fix it.
// It mounts tracefs when it is missing, as perf does: classic tracepoints
// are found through it.
func Preflight() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: coldtrace needs root to load its eBPF probes; run it with sudo (the command itself still runs as you)", ErrPreflight)
	}
	if _, err := os.Stat(btfPath); err != nil {
		return fmt.Errorf("%w: this kernel exposes no BTF (%s is missing); coldtrace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y", ErrPreflight, btfPath)
	}
	if _, err := os.Stat(tracefsPath + "/events"); err != nil {
		if err := unix.Mount("tracefs", tracefsPath, "tracefs", 0, ""); err != nil {
			if _, derr := os.Stat("/sys/kernel/debug/tracing/events"); derr != nil {
				return fmt.Errorf("%w: tracefs is not mounted and mounting it failed (%v); mount it with: mount -t tracefs tracefs %s", ErrPreflight, err, tracefsPath)
			}
		}
	}
	for _, tp := range []string{"filemap/mm_filemap_add_to_page_cache", "filemap/mm_filemap_get_pages", "filemap/mm_filemap_fault", "filemap/mm_filemap_map_pages"} {
		if _, err := os.Stat(tracefsPath + "/events/" + tp); err != nil {
			if _, derr := os.Stat("/sys/kernel/debug/tracing/events/" + tp); derr != nil {
				return fmt.Errorf("%w: this kernel has no tracepoint %s (page-cache tracing needs Linux 6.10 or newer)", ErrPreflight, tp)
			}
		}
	}
	return nil
}
