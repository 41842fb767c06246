package pystack

import (
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"testing"
)

// TestLineTableMatchesInterpreter: for every interpreter present, the
// decoder gives, at every instruction of every code object of a sample
// module (loops, comprehensions, try blocks, multi-line calls, a line
// past 300, a long expression), the line the interpreter's own co_lines
// gives.
func TestLineTableMatchesInterpreter(t *testing.T) {
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			out, err := exec.Command(py.path, workload(t, "linetables.py")).Output()
			if err != nil {
				t.Fatalf("%s: %v", py.path, err)
			}
			var codes []struct {
				Name  string
				First int
				Table string
				Lines [][3]int
			}
			if err := json.Unmarshal(out, &codes); err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, c := range codes {
				table, err := hex.DecodeString(c.Table)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range c.Lines {
					for off := r[0]; off < r[1]; off += 2 {
						if got := lineAt(table, c.First, off); got != r[2] {
							t.Errorf("%s offset %d: line %d, want %d", c.Name, off, got, r[2])
						}
						checked++
					}
				}
			}
			if len(codes) < 5 || checked < 200 {
				t.Errorf("checked %d instructions of %d code objects, want ≥ 200 of ≥ 5", checked, len(codes))
			}
		})
	}
}

// TestLineTableRefusesMalformed: a table that does not start an entry,
// or ends inside a varint, gives 0 (no line), never a made-up one.
func TestLineTableRefusesMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table []byte
	}{
		{"no entry bit", []byte{0x01, 0x02}},
		{"truncated long form", []byte{0x80 | 14<<3, 0x40}},
		{"empty", nil},
	} {
		if got := lineAt(tc.table, 10, 0); got != 0 {
			t.Errorf("%s: line %d, want 0", tc.name, got)
		}
	}
}
