package format

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Duration renders nanoseconds for people, at a precision that suits the
// size: "850ns", "340µs", "340ms", "8.2s", "42s", "3m30s", "61m12s", and
// hours past ten hours ("12h05m"). Rounding is half away from zero at the
// unit shown; a negative duration gets a leading "-".
func Duration(ns int64) string {
	if ns < 0 {
		if ns == -ns { // math.MinInt64
			ns++
		}
		return "-" + Duration(-ns)
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

// SignedDuration is Duration with a "+" on positive values, for deltas.
func SignedDuration(ns int64) string {
	if ns > 0 {
		return "+" + Duration(ns)
	}
	return Duration(ns)
}

// roundDiv is a/b rounded half up, for a ≥ 0, b > 0.
func roundDiv(a, b int64) int64 {
	q := a / b
	if a%b >= b-b/2 {
		q++
	}
	return q
}

// Bytes renders a byte count in binary units: "512 B", "1.5 KiB",
// "14.0 GiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Count renders n with thousands separators: "1,180".
func Count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Times renders a number of runs: "once", "3 times", "1,204 times".
func Times(n int) string {
	if n == 1 {
		return "once"
	}
	return Count(uint64(max(n, 0))) + " times"
}

// Plural picks one or many by n.
func Plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Counted renders n things: "1 file", "1,204 files".
func Counted(n uint64, one, many string) string {
	return Count(n) + " " + Plural(n, one, many)
}

// PathWidth is the width Path shortens to in sentences (verdicts, notes).
const PathWidth = 48

// Path shortens p to about width characters for people: a path that fits
// is kept whole; a longer one keeps as many of its last elements as fit
// after "…/", and always its last element whole, because the file name
// is what a reader needs (a table column then grows rather than losing
// it). It does not escape: see Escape.
func Path(p string, width int) string {
	if utf8.RuneCountInString(p) <= width {
		return p
	}
	if label, ok := bracketed(p); ok {
		return label
	}
	parts := strings.Split(strings.TrimRight(p, "/"), "/")
	keep := parts[len(parts)-1]
	n := utf8.RuneCountInString(keep)
	for i := len(parts) - 2; i >= 0; i-- {
		m := utf8.RuneCountInString(parts[i])
		if m+1+n > width-2 {
			break
		}
		keep = parts[i] + "/" + keep
		n += m + 1
	}
	return "…/" + keep
}

// bracketed shortens a row that names no file ("[filesystem metadata of
// 254:0, mounted on /]"): cutting it at its slashes would leave "…/]".
// Its words are kept whole and only a mount path in it is shortened, its
// last element kept, so the label still says what the row is.
func bracketed(p string) (string, bool) {
	if !strings.HasPrefix(p, "[") || !strings.HasSuffix(p, "]") {
		return "", false
	}
	inner := p[1 : len(p)-1]
	i := strings.Index(inner, " /")
	if i < 0 {
		return p, true
	}
	head, mount := inner[:i+1], inner[i+1:]
	if mount == "/" {
		return p, true
	}
	return "[" + head + Path(mount, max(utf8.RuneCountInString(mount)/2, 12)) + "]", true
}

// Trim cuts s to at most n characters, ending in "…" when cut.
func Trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// Escape makes a string that came from the traced program safe to print
// on a terminal: printable characters pass unchanged; a backslash
// becomes `\\`; newline, carriage return and tab become `\n`, `\r`, `\t`;
// every other control or format character (escape sequences, bidi
// overrides) becomes `\xNN` or `\u{NNNN}`; and each byte of invalid
// UTF-8 becomes `\xNN`. A file named "a\x1b[31mb" prints as `a\x1b[31mb`
// and cannot colour, move or clear root's terminal.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r == '\\' || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u{%04x}`, r)
		}
		i += size
	}
	return b.String()
}

// EscapeAll escapes each string of ss (argv) and joins them with spaces.
func EscapeAll(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Escape(s)
	}
	return strings.Join(out, " ")
}

// ProcessLabel names a process in stacks and tracks: "comm[pid]", with
// "?" for an unknown comm.
func ProcessLabel(pid int32, comm string) string {
	if comm == "" {
		comm = "?"
	}
	return fmt.Sprintf("%s[%d]", comm, pid)
}

// Files names one or two paths (shortened), or the first and a count of
// the others: "a and b", "a and 3 other files".
func Files(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = Path(p, PathWidth)
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	case 2:
		return names[0] + " and " + names[1]
	}
	return fmt.Sprintf("%s and %d other files", names[0], len(names)-1)
}
