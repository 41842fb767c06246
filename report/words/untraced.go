package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// Untraced says that a process left the trace at a secure exec:
// "not traced: /usr/bin/sudo (setuid), pid 4242, from +1.02s". The path
// comes from the traced program: it is escaped here.
func Untraced(u record.Untraced) string {
	return fmt.Sprintf("not traced: %s (%s), pid %d, from +%s", format.Escape(u.Path), format.Escape(u.Reason), u.PID, format.Duration(u.AtNS))
}
