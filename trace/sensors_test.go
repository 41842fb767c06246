package trace

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// The table's shared maps are the objects' own: a row creates maps its
// object has, and takes exactly the maps of its object that a row above
// it creates, so a map added to an object shows up here.
func TestSensorTableSharedMapsMatchTheObjects(t *testing.T) {
	created := map[string]string{} // map name: the row that creates it
	for _, row := range Sensors() {
		if row.Object == nil {
			if len(row.Creates)+len(row.Takes) > 0 {
				t.Errorf("%s: shares maps without a BPF object", row.Name)
			}
			continue
		}
		spec, err := row.Object()
		if err != nil {
			t.Fatalf("%s: %v", row.Name, err)
		}
		var takes []string
		for name := range spec.Maps {
			if created[name] != "" {
				takes = append(takes, name)
			}
		}
		slices.Sort(takes)
		want := slices.Sorted(slices.Values(row.Takes))
		if !slices.Equal(takes, want) {
			t.Errorf("%s takes %v in the table; its object has %v of the maps rows above create", row.Name, want, takes)
		}
		for _, name := range row.Creates {
			if spec.Maps[name] == nil {
				t.Errorf("%s creates %s in the table; its object has no such map", row.Name, name)
			}
			if by := created[name]; by != "" {
				t.Errorf("%s creates %s, which %s creates already", row.Name, name, by)
			}
			created[name] = row.Name
		}
	}
}

// Every sensor a run loads is a row of the table, and the session polls,
// finishes and checkpoints them in the table's order.
func TestSessionOrdersSensorsByTheTable(t *testing.T) {
	s := startTrue(t, Options{NoGPU: true})
	table := Sensors()
	var names []string
	last := -1
	for _, sn := range s.sensors {
		row := slices.IndexFunc(table, func(r SensorSpec) bool { return r.is(sn) })
		if row < 0 {
			t.Fatalf("a loaded %T is no row of the table", sn)
		}
		if row <= last {
			t.Errorf("%s comes after %s: the table's order is %v", table[row].Name, table[last].Name, names)
		}
		last = row
		names = append(names, table[row].Name)
	}
	// Everything but the GPU (off here) and the Python stacks (optional:
	// a kernel without bpf_loop has none).
	for _, row := range table {
		if row.Name != "GPU" && row.Name != "Python stacks" && !slices.Contains(names, row.Name) {
			t.Errorf("%s not loaded: sensors %v", row.Name, names)
		}
	}
	t.Logf("sensors in order: %v", names)
}

// docs/architecture.md lists the table's sensors, in its order.
func TestArchitectureListsTheSensorTable(t *testing.T) {
	b, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- sensors:begin -->")
	section, _, ok2 := strings.Cut(rest, "<!-- sensors:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/architecture.md has no sensors section")
	}
	var got []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(line, "|---") || strings.TrimSpace(cells[1]) == "sensor" {
			continue
		}
		got = append(got, strings.TrimSpace(cells[1])+" "+strings.TrimSpace(cells[2]))
	}
	var want []string
	for _, row := range Sensors() {
		want = append(want, row.Name+" `"+row.Package+"`")
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/architecture.md lists the sensors\n%q\nthe table is\n%q", got, want)
	}
}

// Every row says how its sensor is made, and the options that turn a
// sensor off leave its row out of the session while the rest still
// load: the loader reads both from the table.
func TestLoaderMakesTheTableRowsTheOptionsLeaveOn(t *testing.T) {
	for _, row := range Sensors() {
		if row.make == nil {
			t.Errorf("%s: no maker", row.Name)
		}
	}
	s := startTrue(t, Options{NoGPU: true, NoJIT: true, NoNetwork: true, NoStacks: true})
	var names []string
	for _, sn := range s.sensors {
		row := slices.IndexFunc(Sensors(), func(r SensorSpec) bool { return r.is(sn) })
		names = append(names, Sensors()[row].Name)
	}
	want := []string{"scheduler", "page cache", "eviction", "machine", "uprobe links"}
	if !slices.Equal(names, want) {
		t.Errorf("with the JIT, network, stacks and GPU off the session loaded %v, want %v", names, want)
	}
}

// startTrue loads a session's sensors for `true` with opts, released
// when the test ends (the command is never started).
func startTrue(t *testing.T, opts Options) *session {
	t.Helper()
	requireTracing(t)
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	opts.Command, opts.Actor = []string{"true"}, self
	s, err := start(ctx, opts.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.abortGated()
		s.close()
	})
	return s
}
