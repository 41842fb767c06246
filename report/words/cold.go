package words

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// MadeCold says how coldtrace made a run cold on purpose (run --cold),
// in one sentence; "" for a run left as it was.
func MadeCold(m *record.MadeCold) string {
	if m == nil {
		return ""
	}
	var parts []string
	if m.HasClass("page-cache") {
		s := fmt.Sprintf("%d %s evicted, %s dropped from the page cache", m.EvictedFiles,
			format.Plural(uint64(m.EvictedFiles), "file", "files"), format.Bytes(uint64(max(m.EvictedBytes, 0))))
		if m.KeptBytes > 0 {
			s += fmt.Sprintf(" (%s stayed: dirty or in use)", format.Bytes(uint64(m.KeptBytes)))
		}
		if m.UnverifiedFiles > 0 {
			s += fmt.Sprintf(" (%d not verified: the kernel would not say)", m.UnverifiedFiles)
		}
		if n := len(m.EvictProblems); n > 0 {
			s += fmt.Sprintf(", %d not evicted", n)
		}
		parts = append(parts, s)
	}
	if n := len(m.CacheDirs); n > 0 {
		names := make([]string, 0, n)
		for _, d := range m.CacheDirs {
			names = append(names, d.Cache)
		}
		const shown = 4
		list := strings.Join(names[:min(n, shown)], ", ")
		if n > shown {
			list += fmt.Sprintf(" and %d more", n-shown)
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s) started empty", n, format.Plural(uint64(n), "cache", "caches"), list))
	}
	s := "made cold on purpose (--cold=" + strings.Join(m.Classes, ",") + ")"
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	return s + "; the user's own caches were not touched"
}
