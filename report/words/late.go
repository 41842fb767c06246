package words

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// lateSentence: "3 compiles after ready (mark "ready", at +2.00 s): 2
// during segment 1 "ready" (triton, libnvrtc:x: 1.50 s); … — 1.70 s of
// latency in live requests; …".
func lateSentence(l advice.LateCompiles) string {
	parts := make([]string, 0, len(l.Segments))
	for _, s := range l.Segments {
		parts = append(parts, fmt.Sprintf("%d during segment %d %s (%s: %s)", s.Compiles, s.Index, strconv.Quote(s.Label),
			strings.Join(s.Sources, ", "), hundredths(s.CompileNS)))
	}
	return fmt.Sprintf("%s after ready (%s, at +%s): %s — %s of latency in live requests; warm them up before ready, or persist the cache",
		format.Counted(uint64(max(l.Compiles, 0)), "compile", "compiles"), l.ReadyBy, hundredths(l.ReadyNS), strings.Join(parts, "; "), hundredths(l.CompileNS))
}

// lateAction is the step for compiles after ready.
const lateAction = "compile before ready: warm the kernels up before the program says it is ready, or persist the cache so that they load"
