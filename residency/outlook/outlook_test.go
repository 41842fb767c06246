package outlook

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// The caches a recorded run used are surveyed at their recorded roots,
// but not an in-tree cache (no one root) nor a cold run's fresh cache
// (removed after it); each surveyed cache the run used is named once.
func TestRecordRootsAndCaches(t *testing.T) {
	rec := &record.Record{
		MadeCold: &record.MadeCold{CacheDirs: []record.ColdCacheDir{{Cache: "numba", Env: "NUMBA_CACHE_DIR", Dir: "/var/tmp/coldtrace-cold-1/numba"}}},
		JIT: &record.JIT{Caches: []record.Cache{
			{Name: "triton", Root: "/h/.triton/cache"},
			{Name: "python", Root: "**/__pycache__"},
			{Name: "numba", Root: "/var/tmp/coldtrace-cold-1/numba"},
		}},
	}
	roots, byName := RecordRoots(rec)
	if len(roots) != 1 || roots[0].Path != "/h/.triton/cache" || roots[0].Via != "record" || roots[0].Spec.Name != "triton" {
		t.Fatalf("roots %+v", roots)
	}
	caches := []kcache.Cache{
		{Name: "triton", Root: "/h/.triton/cache"},
		{Name: "triton", Root: "/h/.triton/cache"},
		{Name: "triton", Root: "/other"},
		{Name: "inductor", Root: "/tmp/torchinductor_u"},
	}
	if got := RecordCaches(caches, byName); len(got) != 1 || got[0].Root != "/h/.triton/cache" {
		t.Errorf("record caches %+v", got)
	}
	if roots, byName := RecordRoots(nil); roots != nil || len(byName) != 0 {
		t.Errorf("no record: %v %v", roots, byName)
	}
}

// Totals count what this user cannot see apart, and the prediction
// judges only what it can.
func TestPredictJudgesWhatTheUserSees(t *testing.T) {
	files := []residency.File{
		{Size: 100 << 20, CachedBytes: 100 << 20, Known: true},
		{Size: 50 << 20, Known: false},
	}
	tot := Sum(files)
	if tot.Files != 2 || tot.SizeBytes != 150<<20 || tot.UnknownFiles != 1 || tot.UnknownBytes != 50<<20 {
		t.Fatalf("totals %+v", tot)
	}
	if p := Predict(tot, 0); p.State != Warm || p.MissingBytes != 0 {
		t.Errorf("prediction %+v, want warm", p)
	}
	tot.CachedBytes = 0
	if p := Predict(tot, 100<<20); p.State != Cold || p.MissingBytes != 100<<20 || p.ETANS != 1e9 {
		t.Errorf("prediction %+v, want cold, 1 s to read", p)
	}
}
