package attribution

import (
	"fmt"
	"strconv"
)

// FormatDuration renders nanoseconds for people, at a precision that suits
// the size: "850ns", "340µs", "340ms", "8.2s", "42s", "3m30s", "61m12s",
// and hours past ten hours ("12h05m"). Rounding is half away from zero at
// the unit shown; a negative duration gets a leading "-".
func FormatDuration(ns int64) string {
	if ns < 0 {
		if ns == -ns { // math.MinInt64
			ns++
		}
		return "-" + FormatDuration(-ns)
	}
	const (
		us = int64(1e3)
		ms = int64(1e6)
		s  = int64(1e9)
	)
	switch {
	case ns == 0:
		return "0s"
	case ns < us:
		return strconv.FormatInt(ns, 10) + "ns"
	case ns < ms:
		if v := roundDiv(ns, us); v < 1000 {
			return strconv.FormatInt(v, 10) + "µs"
		}
		return "1ms"
	case ns < s:
		if v := roundDiv(ns, ms); v < 1000 {
			return strconv.FormatInt(v, 10) + "ms"
		}
		return "1.0s"
	case ns < 10*s:
		if tenths := roundDiv(ns, s/10); tenths < 100 {
			return fmt.Sprintf("%d.%ds", tenths/10, tenths%10)
		}
		return "10s"
	}
	secs := roundDiv(ns, s)
	switch {
	case secs < 60:
		return strconv.FormatInt(secs, 10) + "s"
	case secs < 10*3600:
		return fmt.Sprintf("%dm%02ds", secs/60, secs%60)
	}
	mins := roundDiv(secs, 60)
	return fmt.Sprintf("%dh%02dm", mins/60, mins%60)
}

// roundDiv is a/b rounded half up, for a ≥ 0, b > 0.
func roundDiv(a, b int64) int64 {
	return a/b + boolInt(a%b >= b-b/2)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
