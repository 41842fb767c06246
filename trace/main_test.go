package trace

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as coldtrace's gated shim: Run
// re-executes its own executable with ShimArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		RunShim()
	}
	os.Exit(m.Run())
}
