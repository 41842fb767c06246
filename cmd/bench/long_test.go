package main

import (
	"testing"
	"time"
)

// series is RSS each second from one minute to d: base, a sawtooth of
// saw bytes every 20 s, and leak bytes per hour.
func series(d time.Duration, base, saw uint64, leak float64) []rssAt {
	var out []rssAt
	for t := time.Minute; t <= d; t += time.Second {
		r := base + uint64(leak*(t-time.Minute).Hours())
		r += saw * uint64(t/time.Second%20) / 20
		out = append(out, rssAt{t, r})
	}
	return out
}

func TestHourGrowth(t *testing.T) {
	const mib = 1 << 20
	d := 10 * time.Minute
	// Levelled off after a step of 3 MiB: the projection is the step.
	flat := series(d, 40*mib, 4*mib, 0)
	if g := hourGrowth(3*mib, flat, d); g < 3*mib || g > 4*mib {
		t.Errorf("levelled-off RSS: %.1f MiB projected, want about 3", float64(g)/mib)
	}
	// 24 MiB an hour, under a sawtooth: 3.6 MiB in 9 minutes, about 24
	// projected.
	leak := series(d, 40*mib, 4*mib, 24*mib)
	if g := hourGrowth(int64(leak[len(leak)-1].rss-leak[0].rss), leak, d); g < 18*mib || g > 30*mib {
		t.Errorf("leaking RSS: %.1f MiB projected, want about 24", float64(g)/mib)
	}
	// An hour's run is judged on what it grew.
	if g := hourGrowth(5*mib, leak, time.Hour); g != 5*mib {
		t.Errorf("an hour's run: %d projected, want its own growth", g)
	}
}
