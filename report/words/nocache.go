package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
)

// noCacheSentence: "Numba compiled with no cache: 0.04 s in 3 calls of
// libllvmlite; enable cache=True …", or, for compiler subprocesses,
// "compiled with no cache: 1.20 s in 4 runs of cc, ptxas, with no
// lookup in any known cache".
func noCacheSentence(n advice.NoCacheCompile) string {
	if n.Subprocess {
		return fmt.Sprintf("compiled with no cache: %s in %d runs of %s, with no lookup in any known cache", hundredths(n.NS), n.Calls, n.Source)
	}
	out := fmt.Sprintf("%s compiled with no cache: %s in %d calls of %s", n.Framework, hundredths(n.NS), n.Calls, n.Source)
	if n.Enable != "" {
		out += "; " + n.Enable
	}
	return out
}
