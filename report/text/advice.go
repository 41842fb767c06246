package text

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/words"
)

// writeAdvice writes what the run says to change: why caches missed,
// what to persist, how the slow files were read, compiles with no cache.
func writeAdvice(b *strings.Builder, a advice.Advice) {
	if len(a.Misses) > 0 {
		b.WriteString("\n  why caches missed\n")
		for _, m := range a.Misses {
			fmt.Fprintf(b, "    %s\n", format.Escape(m.Sentence))
		}
	}
	if len(a.Persist) > 0 {
		b.WriteString("\n  what to persist (caches this run wrote)\n")
		fmt.Fprintf(b, "    %-10s %-36s %9s %-8s %-16s %-22s %9s\n", "cache", "root", "size", "fs", "survives", "moved by", "rerun")
		for _, p := range a.Persist {
			surv := p.Survival
			switch {
			case surv == "":
				surv = "unknown"
			case p.Age != "":
				surv += " " + p.Age
			}
			env := p.Env
			if env == "" {
				env = "(none)"
			}
			fmt.Fprintf(b, "    %-10s %-36s %9s %-8s %-16s %-22s %9s\n", format.Escape(p.Cache), format.Escape(format.Path(p.Root, 36)),
				format.Bytes(uint64(max(p.SizeBytes, 0))), format.Escape(p.FS), format.Escape(surv), format.Escape(env), format.Duration(p.RerunNS))
		}
		for _, line := range advice.Exports(a.Persist) {
			// An export line is shell code to copy: advice.Exports holds
			// only plain text (names checked, values without controls),
			// where escaping would change nothing but double each
			// backslash of a '\'' and break the line.
			if !advice.PlainText(line) {
				line = format.Escape(line)
			}
			fmt.Fprintf(b, "    %s\n", line)
		}
	}
	if len(a.Candidates) > 0 {
		b.WriteString("\n  may be caches (directories this run filled that no known cache accounts for)\n")
		for _, c := range a.Candidates {
			fmt.Fprintf(b, "    %s\n", format.Escape(c.Sentence))
		}
	}
	if len(a.Reads) > 0 {
		b.WriteString("\n  how files were read\n")
		for _, f := range a.Reads {
			fmt.Fprintf(b, "    %s\n", format.Escape(f.Sentence))
		}
	}
	for _, n := range a.NoCache {
		fmt.Fprintf(b, "\n  %s\n", format.Escape(n.Sentence))
	}
	if len(a.SlowFS) > 0 {
		b.WriteString("\n  slow filesystems\n")
		for _, s := range a.SlowFS {
			fmt.Fprintf(b, "    %s\n", format.Escape(s.Sentence))
		}
	}
	if len(a.Stalls) > 0 {
		b.WriteString("\n  downloads that stalled\n")
		for _, s := range a.Stalls {
			fmt.Fprintf(b, "    %s\n", format.Escape(s.Sentence))
		}
	}
	if len(a.Broken) > 0 {
		b.WriteString("\n  caches that did not keep their entries\n")
		for _, c := range a.Broken {
			fmt.Fprintf(b, "    %s\n", format.Escape(c.Sentence))
		}
	}
	if len(a.Silent)+len(a.SlowDNS) > 0 {
		b.WriteString("\n  network waits\n")
		for _, s := range a.Silent {
			fmt.Fprintf(b, "    %s\n", format.Escape(s.Sentence))
		}
		for _, s := range a.SlowDNS {
			fmt.Fprintf(b, "    %s\n", format.Escape(s.Sentence))
		}
	}
	if len(a.Recurring) > 0 {
		b.WriteString("\n  read on every run\n")
		for _, r := range a.Recurring {
			fmt.Fprintf(b, "    %s\n", format.Escape(r.Sentence))
		}
	}
	if a.Late != nil {
		fmt.Fprintf(b, "\n  compiles after ready\n    %s\n", format.Escape(a.Late.Sentence))
	}
}

// writeNext ends the report with the ranked next steps.
func writeNext(b *strings.Builder, a advice.Advice) {
	if len(a.Next) == 0 {
		return
	}
	b.WriteString("\n  next steps\n")
	for i, s := range a.Next {
		fmt.Fprintf(b, "    %d. %s (saves ~%s)\n       evidence: %s\n", i+1, format.Escape(s.Action), format.Duration(s.SavesNS), format.Escape(s.Evidence))
	}
}

// writeTraps names, under the verdict, the costliest findings.
func writeTraps(b *strings.Builder, a advice.Advice) {
	for i, t := range advice.Traps(a) {
		if i == advice.MaxVerdictTraps {
			break
		}
		fmt.Fprintf(b, "  finding: %s\n", format.Escape(words.Finding(t.Finding)))
	}
}
