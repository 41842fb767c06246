package words

import (
	"cmp"
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// persistSentence: "/tmp/x (1.0 MiB) is on tmpfs, lost at reboot; this
// run compiled into it for 2.00 s".
func persistSentence(p advice.Persist) string {
	return fmt.Sprintf("%s (%s) is on %s, %s; this run compiled into it for %s",
		p.Root, format.Bytes(uint64(max(p.SizeBytes, 0))), p.FS, p.Survival, hundredths(p.RerunNS))
}

// persistAction: "persist the Triton cache: export …".
func persistAction(p advice.Persist) string {
	what := "move it to a persistent directory"
	if p.Export != "" {
		what = p.Export
	}
	return fmt.Sprintf("persist the %s cache: %s", cmp.Or(p.Framework, p.Cache), what)
}
