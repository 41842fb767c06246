package words

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

func TestComparisonSaysTheMachine(t *testing.T) {
	thrash, once, shared := fixtures.Record(t, "cat-thrash"), fixtures.Record(t, "cat-cold"), fixtures.Record(t, "cat-shared")
	for _, c := range []struct {
		name string
		got  string
		want []string
	}{
		{"thrash-A", Comparison(compare.New(thrash, once, nil, nil).Verdict), []string{
			"A read /tmp/ctrec/big.bin from disk 3.0× (192.0 MiB), under its memory cgroup limit of 32.0 MiB; B once.",
			"A waited 6ms for a CPU (2 other processes (sh) used 160ms); B 6ms."}},
		{"thrash-B", Comparison(compare.New(once, thrash, nil, nil).Verdict), []string{
			"B read /tmp/ctrec/big.bin from disk 3.0× (192.0 MiB), under its memory cgroup limit of 32.0 MiB; A once.",
			"B waited 6ms for a CPU (2 other processes (sh) used 160ms); A 6ms."}},
		{"shared", Comparison(compare.New(shared, once, nil, nil).Verdict), []string{
			"In A, 48.0 MiB of /tmp/ctrec/big.bin came from disk through pid 4121 (cat, not traced) while it waited; not in B.",
			"During A, pid 4200 (python3, not traced, fadvise64) evicted 16.0 MiB of /tmp/ctrec/big.bin; not during B."}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%s: %q lacks %q", c.name, c.got, w)
			}
		}
	}
	if got := Comparison(compare.New(once, once, nil, nil).Verdict); strings.Contains(got, "waited") || strings.Contains(got, "from disk") {
		t.Errorf("no machine cause, yet: %q", got)
	}
}

func TestMachineChangeOtherRun(t *testing.T) {
	for _, c := range []struct {
		ch   compare.MachineChange
		want string
	}{
		{compare.MachineChange{Kind: compare.MachineReread, Side: "A", File: "/m/x", ABytesFromDisk: 3 << 20, AFactor: 3}, "B not at all."},
		{compare.MachineChange{Kind: compare.MachineReread, Side: "B", File: "/m/x", BBytesFromDisk: 4 << 20, BFactor: 4, ABytesFromDisk: 2 << 20, AFactor: 2}, "A 2.0×."},
		{compare.MachineChange{Kind: compare.MachineContention, Side: "B", ARunQueueNS: 2e6, BRunQueueNS: 363e6}, "B waited 363ms for a CPU; A 2ms."},
	} {
		if got := MachineChange(c.ch); !strings.HasSuffix(got, c.want) {
			t.Errorf("%+v: %q, want suffix %q", c.ch, got, c.want)
		}
	}
}
