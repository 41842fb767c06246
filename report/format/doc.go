// Package format is the one place where coldtrace turns numbers and names
// into text for people: durations, signed durations, byte counts, counts
// with thousands separators, shortened paths, and the escaping of every
// string that came from the traced program (paths, comm, argv) before it
// reaches a terminal. Every renderer under report/ uses it, so one value
// reads the same in the header, the verdict, the tables and the diff.
package format
