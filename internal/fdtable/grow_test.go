package fdtable

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTableGrownBeforeTheRuntime: the test binary links the package, so
// its constructor ran: the table has Slots slots, which a process opening
// no more descriptors than a test never reaches on its own.
func TestTableGrownBeforeTheRuntime(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < uint64(Slots) {
		t.Skipf("RLIMIT_NOFILE's hard limit is %d, under %d: the constructor cannot grow the table", lim.Max, Slots)
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "FDSize:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			if n < Slots {
				t.Errorf("descriptor table has %d slots, want at least %d", n, Slots)
			}
			return
		}
	}
	t.Fatal("no FDSize in /proc/self/status")
}

// TestConstructorSkipsTheShimArgument: the C side skips ShimArg.
func TestConstructorSkipsTheShimArgument(t *testing.T) {
	if shimArg() != ShimArg {
		t.Errorf("the constructor skips %q, ShimArg is %q", shimArg(), ShimArg)
	}
}
