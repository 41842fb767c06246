package residency

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenRegularNeverBlocks: a FIFO where a regular file was seen is
// refused at once, not waited on.
func TestOpenRegularNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "f")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openRegular(fifo); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO: %v, want ErrNotRegular", err)
	}
	file := filepath.Join(dir, "r")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := openRegular(file)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close()
}
