package abrun

import (
	"fmt"
	"strings"
)

// SplitArgs splits a command line into arguments the way a POSIX shell
// would split words, and nothing more: whitespace separates, '…' keeps
// everything literally, "…" keeps everything but \" \\ \$ \` literally,
// and a backslash outside quotes escapes the next character. There is no
// expansion, no redirection and no pipe: `coldtrace bench` runs the
// command itself, so those characters are plain arguments.
func SplitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	const (
		plain = iota
		single
		double
	)
	state := plain
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch state {
		case single:
			if r == '\'' {
				state = plain
			} else {
				cur.WriteRune(r)
			}
		case double:
			switch {
			case r == '"':
				state = plain
			case r == '\\' && i+1 < len(rs) && strings.ContainsRune("\"\\$`", rs[i+1]):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(r)
			}
		default:
			switch {
			case r == ' ' || r == '\t' || r == '\n':
				if inWord {
					out = append(out, cur.String())
					cur.Reset()
					inWord = false
				}
			case r == '\'':
				state, inWord = single, true
			case r == '"':
				state, inWord = double, true
			case r == '\\':
				if i+1 == len(rs) {
					return nil, fmt.Errorf("command line %q ends in a backslash", s)
				}
				i++
				cur.WriteRune(rs[i])
				inWord = true
			default:
				cur.WriteRune(r)
				inWord = true
			}
		}
	}
	if state != plain {
		return nil, fmt.Errorf("command line %q has an unclosed quote", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// ArgsFromFile reads a command from a file's content: one argument per
// line, taken as is (no quoting), a final newline ignored.
func ArgsFromFile(content string) []string {
	content = strings.TrimSuffix(content, "\n")
	if content == "" {
		return nil
	}
	return strings.Split(content, "\n")
}
