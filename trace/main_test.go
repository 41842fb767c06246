package trace

import (
	"os"
	"testing"

	"github.com/coldtrace/coldtrace/trace/launch"
)

// TestMain lets the test binary act as coldtrace's gated shim: Run
// re-executes its own executable with launch.ShimArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
	}
	os.Exit(m.Run())
}
