package actor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Open opens name for reading with the user's rights: an input record, a
// file to evict or prefetch. The file may be a pipe (report <(...));
// reading it later needs no rights.
func (a Actor) Open(name string) (*os.File, error) {
	var f *os.File
	err := a.Do(func() error {
		var err error
		f, err = os.Open(name)
		return err
	})
	return f, err
}

// MayTrace fails unless the user may trace process pid: root may trace
// any; a user, only a process whose real, effective, saved and filesystem
// uids are all theirs (a setuid program they started is not theirs), as
// the kernel's own ptrace check asks. For attach and mark.
func (a Actor) MayTrace(pid int) error {
	if !a.resolved {
		return ErrUnresolved
	}
	if a.IsRoot() {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		ids := strings.Fields(v)
		if len(ids) != 4 {
			return fmt.Errorf("process %d: Uid line %q", pid, line)
		}
		for _, id := range ids {
			if id != strconv.FormatUint(uint64(a.UID), 10) {
				return fmt.Errorf("process %d is not %s's (uids %s)", pid, describe(a.User), strings.Join(ids, " "))
			}
		}
		return nil
	}
	return fmt.Errorf("process %d: no Uid line in its status", pid)
}
