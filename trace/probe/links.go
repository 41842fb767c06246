package probe

import (
	"errors"
	"os"
	"sync"

	"github.com/cilium/ebpf/link"
)

// CloseLinks closes links all at once (a link already closed is no
// error). Detaching a uprobe or a syscall tracepoint waits for the
// kernel (an RCU grace period) once per link; one after another, the
// waits add up.
func CloseLinks(ls []link.Link) error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
