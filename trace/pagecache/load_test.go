package pagecache

import (
	"strings"
	"testing"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/sched"
)

// TestLoadWithSharedMaps loads the page-cache probes with the scheduler
// object's maps in place of their own, polls and closes both.
func TestLoadWithSharedMaps(t *testing.T) {
	testenv.RequireTracing(t)
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s, err := New(Options{Shared: sc.Shared().Replacements(), Waiting: sc.Waiting})
	if err != nil {
		t.Fatal(err)
	}
	var sample record.Sample
	if err := s.Poll(probe.MonotonicNS(), &sample); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// The record says how fills ended; on a kernel that refuses task works
// the read exits end them unless the run asked not to. Either way no
// syscall tracepoint of this object is attached before a fill needs it
// (none here), so every process of the machine keeps the syscall fast
// path.
func TestFillEndFollowsKernelAndReadExitsOption(t *testing.T) {
	testenv.RequireTracing(t)
	taskWorks, err := TaskWorksAllowed(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, noExits := range []bool{false, true} {
		sc, err := sched.New(sched.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Options{Shared: sc.Shared().Replacements(), Waiting: sc.Waiting, NoReadExits: noExits})
		if err != nil {
			sc.Close()
			t.Fatal(err)
		}
		// A checkpoint says the same as the final record.
		var cp, rec record.Record
		cp.Host.PageSize, rec.Host.PageSize = 4096, 4096
		if err := s.Snapshot(&cp); err != nil {
			t.Error(err)
		}
		if err := s.Finish(&rec); err != nil {
			t.Error(err)
		}
		want, wantLinks := record.FillEndReadExit, 5
		if s.p.uringSubmits {
			wantLinks++ // io_uring's submissions: no syscall tracepoint
		}
		switch {
		case taskWorks:
			want = record.FillEndTaskWork
		case noExits:
			want = record.FillEndNextLook
		}
		if rec.FillEnd != want {
			t.Errorf("task works %v, no read exits %v: fill_end %q, want %q", taskWorks, noExits, rec.FillEnd, want)
		}
		if got := len(s.p.links); got != wantLinks || rec.ReadExitsFromNS != nil {
			t.Errorf("fill_end %q: %d links, read exits from %v; want %d links and none", want, got, rec.ReadExitsFromNS, wantLinks)
		}
		for _, r := range []struct {
			name string
			rec  *record.Record
		}{{"checkpoint", &cp}, {"record", &rec}} {
			if r.rec.FillEnd != want {
				t.Errorf("%s: fill_end %q, want %q", r.name, r.rec.FillEnd, want)
			}
			warned := false
			for _, w := range r.rec.Warnings {
				warned = warned || strings.Contains(w, "--no-read-exits")
			}
			if warned != (want == record.FillEndNextLook) {
				t.Errorf("%s, fill_end %q: warnings %q", r.name, want, r.rec.Warnings)
			}
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		sc.Close()
	}
}

// On a kernel built without io_uring (no io_uring_submit_req to verify
// the submission program against, and none of the types it reads), the
// program is replaced by one that does nothing and the rest of the
// object loads as before.
func TestObjectLoadsWithoutIOUringSubmissions(t *testing.T) {
	testenv.RequireTracing(t)
	has, err := probe.HasTracepoint(nil, "io_uring_submit_req")
	if err != nil {
		t.Fatal(err)
	}
	if none, err := probe.HasTracepoint(nil, "no_such_tracepoint"); err != nil || none {
		t.Errorf("a tracepoint no kernel has: found %v, %v", none, err)
	}
	t.Logf("this kernel has io_uring_submit_req: %v", has)
	spec, err := bpfpc.LoadPagecache()
	if err != nil {
		t.Fatal(err)
	}
	probe.StubProgram(spec.Programs[bpfpc.PagecacheProgOnUringSubmit])
	var objs bpfpc.PagecacheObjects
	if err := loadInLanes(spec, &objs, nil, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	info, err := objs.OnUringSubmit.Info()
	if err != nil {
		t.Fatal(err)
	}
	if insns, err := info.Instructions(); err != nil || len(insns) != 2 {
		t.Errorf("stubbed program: %d instructions (%v), want 2", len(insns), err)
	}
	if objs.OnGetPages == nil || objs.OnAddToCache == nil {
		t.Error("the object's other programs did not load")
	}
}
