package advice

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// runWith is a record of user home /home/u (4 KiB pages) touching files.
func runWith(files ...record.File) *record.Record {
	r := &record.Record{Files: files}
	r.User.Home = "/home/u"
	r.Host.PageSize = 4096
	return r
}

// created is a file a run wrote n new pages into.
func created(p string, pages uint64) record.File {
	return record.File{Path: p, PagesCreated: pages, PagesAccessed: pages}
}

// readBack is a file a run read n pages of without writing it.
func readBack(p string, pages uint64) record.File {
	return record.File{Path: p, PagesAccessed: pages}
}

// halfOf2MiB is 1 MiB in 4 KiB pages: two such files make 2 MiB.
const halfOf2MiB = 256

func TestCacheCandidateReadBackWithoutRewrite(t *testing.T) {
	a := runWith(created("/home/u/.cache/mytool/v1/blob-a", halfOf2MiB), created("/home/u/.cache/mytool/v1/sub/blob-b", halfOf2MiB))
	b := runWith(readBack("/home/u/.cache/mytool/v1/blob-a", halfOf2MiB), readBack("/home/u/.cache/mytool/v1/sub/blob-b", halfOf2MiB))
	got := CacheCandidates(a, b)
	if len(got) != 1 {
		t.Fatalf("candidates %+v, want one", got)
	}
	c := got[0]
	if c.Dir != "/home/u/.cache/mytool/v1" || c.CreatedBytes != 2<<20 || c.Files != 2 || !c.Reused {
		t.Errorf("candidate %+v, want /home/u/.cache/mytool/v1, 2 MiB in 2 files, reused", c)
	}
	if act := c.Action(); act.Kind != "cache_candidate" || act.SavesNS != 0 {
		t.Errorf("action %+v: want kind cache_candidate, no saving claimed", act)
	}
}

func TestCacheCandidateNoneInVolatileTrees(t *testing.T) {
	for _, dir := range []string{"/tmp/mytool", "/dev/shm/mytool", "/run/user/1000/mytool"} {
		a := runWith(created(dir+"/x/blob", 2*halfOf2MiB))
		a.User.Home = "/tmp" // a home on tmpfs still names no cache there
		b := runWith(readBack(dir+"/x/blob", 2*halfOf2MiB))
		if got := CacheCandidates(a, b); len(got) != 0 {
			t.Errorf("%s: candidates %+v, want none", dir, got)
		}
	}
	a := runWith(created("/tmp/mytool/blob", 2*halfOf2MiB))
	if got := CacheCandidates(a, runWith(readBack("/tmp/mytool/blob", 2*halfOf2MiB))); len(got) != 0 {
		t.Errorf("/tmp with home /home/u: candidates %+v, want none", got)
	}
}

func TestCacheCandidateNeedsOneMiB(t *testing.T) {
	under := uint64(CandidateMinBytes/4096 - 1)
	a := runWith(created("/home/u/.cache/mytool/blob", under))
	b := runWith(readBack("/home/u/.cache/mytool/blob", under))
	if got := CacheCandidates(a, b); len(got) != 0 {
		t.Errorf("%d bytes: candidates %+v, want none", under*4096, got)
	}
	a = runWith(created("/home/u/.cache/mytool/blob", under+1))
	b = runWith(readBack("/home/u/.cache/mytool/blob", under+1))
	if got := CacheCandidates(a, b); len(got) != 1 || got[0].CreatedBytes != CandidateMinBytes {
		t.Errorf("exactly 1 MiB: candidates %+v, want one of 1 MiB", got)
	}
}

func TestCacheCandidateNoneWhenRewritten(t *testing.T) {
	a := runWith(created("/home/u/.cache/mytool/blob", 2*halfOf2MiB))
	b := runWith(created("/home/u/.cache/mytool/blob", 2*halfOf2MiB))
	if got := CacheCandidates(a, b); len(got) != 0 {
		t.Errorf("rewritten: candidates %+v, want none", got)
	}
	// Not read at all by B: nothing shows the directory was reused.
	if got := CacheCandidates(a, runWith()); len(got) != 0 {
		t.Errorf("unread: candidates %+v, want none", got)
	}
	// Half rewritten: the half read back alone is 1 MiB, still a cache.
	a = runWith(created("/home/u/.cache/mytool/a", halfOf2MiB), created("/home/u/.cache/mytool/b", halfOf2MiB))
	b = runWith(readBack("/home/u/.cache/mytool/a", halfOf2MiB), created("/home/u/.cache/mytool/b", halfOf2MiB))
	if got := CacheCandidates(a, b); len(got) != 1 || got[0].CreatedBytes != 1<<20 || got[0].Files != 1 {
		t.Errorf("half rewritten: candidates %+v, want one of 1 MiB in 1 file", got)
	}
}

func TestCacheCandidateSkipsKnownCachesAndHomeItself(t *testing.T) {
	a := runWith(created("/home/u/.cache/huggingface/hub/models--x/blobs/abc", 2*halfOf2MiB),
		created("/home/u/big.bin", 2*halfOf2MiB), created("/home/u/.cache/loose.bin", 2*halfOf2MiB))
	a.JIT = &record.JIT{Caches: []record.Cache{{Name: "huggingface", Root: "/home/u/.cache/huggingface/hub"}}}
	if got := MayBeCaches(a); len(got) != 0 {
		t.Errorf("candidates %+v, want none: a known cache, and files directly in the home and cache home", got)
	}
}

func TestMayBeCachesSingleRun(t *testing.T) {
	a := runWith(created("/home/u/.cache/tool1/k/1", 2*halfOf2MiB), created("/home/u/.cache/tool2/2", 3*halfOf2MiB),
		created("/home/u/project/build/out.o", 2*halfOf2MiB), created("/home/u/.cache/small/s", 10),
		readBack("/home/u/.cache/tool3/r", 4*halfOf2MiB))
	got := MayBeCaches(a)
	want := []struct {
		dir   string
		bytes int64
	}{{"/home/u/.cache/tool2", 3 << 20}, {"/home/u/.cache/tool1/k", 2 << 20}, {"/home/u/project/build", 2 << 20}}
	if len(got) != len(want) {
		t.Fatalf("candidates %+v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].Dir != w.dir || got[i].CreatedBytes != w.bytes || got[i].Reused {
			t.Errorf("candidate %d: %+v, want %s of %d bytes, not reused", i, got[i], w.dir, w.bytes)
		}
	}
	adv := Of(a, nil)
	if len(adv.Candidates) != 3 {
		t.Errorf("Of: %d candidates, want 3", len(adv.Candidates))
	}
	kinds := 0
	for _, n := range adv.Next {
		if n.Kind == "cache_candidate" {
			kinds++
		}
	}
	if kinds != 3 {
		t.Errorf("Of: %d cache_candidate actions in %+v, want 3", kinds, adv.Next)
	}
}
