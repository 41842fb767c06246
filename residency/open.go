package residency

import (
	"fmt"
	"os"
	"syscall"
)

// openRegular opens path for reading without ever blocking: a file
// swapped for a FIFO or a device after the walk saw a regular file is
// opened with O_NONBLOCK and refused, instead of holding coldtrace (root)
// until a writer appears.
func openRegular(path string) (*os.File, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())
	}
	return fh, nil
}
