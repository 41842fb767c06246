package main

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/report/format"
)

// Every string from outside coldtrace (file names another user planted,
// a record from another host, a process's comm, the environment) reaches
// the terminal through format.Escape, the one escaping function; these
// helpers apply it where a line is made.

// linef appends one line to b: layout filled in with args, escaped as a
// whole, then the newline that ends it. A newline inside an argument
// becomes `\n`, so no name can start a line of its own.
func linef(b *strings.Builder, layout string, args ...any) {
	b.WriteString(format.Escape(fmt.Sprintf(layout, args...)))
	b.WriteByte('\n')
}

// errorText is err's message, escaped for the terminal.
func errorText(err error) string {
	return format.Escape(err.Error())
}
