package registry

import "testing"

func TestMatch(t *testing.T) {
	m := NewCompilerNames([]string{"mycc"})
	for name, want := range map[string]bool{
		"gcc": true, "gcc-13": true, "clang++-18.1": true, "x86_64-linux-gnu-g++-13": true,
		"x86_64-linux-gnu-ld": true, "ptxas": true, "mycc": true, "lto1": true,
		"python3": false, "my-ld": false, "": false, "bash": false, "gcc-x": false,
	} {
		if got := m.Match(name); got != want {
			t.Errorf("Match(%q) = %v, want %v", name, got, want)
		}
	}
}
