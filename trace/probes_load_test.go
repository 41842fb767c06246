package trace

import "testing"

func TestLoadAttach(t *testing.T) {
	requireTracing(t)
	p, err := loadProbes()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.attach(); err != nil {
		t.Fatal(err)
	}
}
