package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// silentSentence: "waiting on hub.example for 12.0 s from +2.0 s,
// nothing received; then 4.0 KiB arrived".
func silentSentence(w advice.SilentWait) string {
	then := "nothing received by the end of the run"
	switch {
	case w.Received:
		then = fmt.Sprintf("then %s arrived", format.Bytes(w.Bytes))
	case w.Closed:
		then = "closed with nothing received"
	}
	return fmt.Sprintf("waiting on %s for %s from +%s, nothing received; %s", w.Host, tenths(w.LengthNS), tenths(w.StartNS), then)
}

func silentAction(w advice.SilentWait) string {
	return fmt.Sprintf("the connection to %s: set a read timeout so a server that accepts and does not answer is retried, or fetch from it ahead of the run", w.Host)
}

// slowLookupSentence: "DNS took 1.5 s before the download of a.bin:
// resolving hub.example at +0.1 s".
func slowLookupSentence(s advice.SlowLookup) string {
	what := "the download"
	if s.Download != "" {
		what += " of " + s.Download
	}
	return fmt.Sprintf("DNS took %s before %s: resolving %s at +%s", tenths(s.LengthNS), what, s.Host, tenths(s.StartNS))
}

func slowLookupAction(s advice.SlowLookup) string {
	return fmt.Sprintf("resolving %s: check the resolver in /etc/resolv.conf (an unreachable first server costs its timeout on every lookup), or use a caching resolver", s.Host)
}

// tenths says seconds to a tenth, as the findings have always said
// them: "12.0 s" (a sentence's times stay comparable within it, which
// format.Duration's changing precision would not keep).
func tenths(ns int64) string { return fmt.Sprintf("%.1f s", float64(ns)/1e9) }

// hundredths says seconds to a hundredth: "1.50 s".
func hundredths(ns int64) string { return fmt.Sprintf("%.2f s", float64(ns)/1e9) }
