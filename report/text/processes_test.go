package text

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestProcessOffCPUSaysItSumsThreads: a process of 12 threads that each
// waited 4 s in a 4.4 s run shows 48 s off-CPU beside its 4.4 s wall and
// its 12 threads, and the table says its times sum threads.
func TestProcessOffCPUSaysItSumsThreads(t *testing.T) {
	r := &record.Record{Schema: record.Schema, WallNS: 4400e6, IntervalNS: 100e6,
		Processes: []record.Process{{PID: 7, Comm: "node", OffCPUNS: 48e9, CPUNS: 400e6}}}
	for i := int32(0); i < 12; i++ {
		r.Threads = append(r.Threads, record.Thread{PID: 7, TID: 7 + i, Comm: "node", OffCPUNS: 4e9})
	}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "7 ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 6 || f[2] != "4.4s" || f[3] != "12" || f[5] != "48s" {
		t.Errorf("process row %q: want wall 4.4s, 12 threads, off-CPU 48s\n%s", row, out)
	}
	if !strings.Contains(out, "sum the process's threads; wall is its lifetime") {
		t.Errorf("the table does not say its times sum threads:\n%s", out)
	}
}
