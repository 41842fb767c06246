package invariants_test

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

func storyViolations(r *record.Record) []string {
	var out []string
	for _, v := range invariants.Check(r) {
		if v.Rule == invariants.RuleOneStory {
			out = append(out, v.String())
		}
	}
	return out
}

// TestSectionsDisagreeingFail: each way the downloads, caches and
// persist sections of one record can contradict each other is caught.
func TestSectionsDisagreeingFail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(r *record.Record)
		msg     string
	}{
		{"download names an unlisted cache", func(r *record.Record) { r.Downloads[0].Cache = "torch_hub" },
			"names the torch_hub cache, which the caches table does not list"},
		{"download outside its cache", func(r *record.Record) { r.Downloads[0].Path = "/srv/elsewhere/model.bin" },
			"is outside its root"},
		{"fetched again from a cache the table says persists", func(r *record.Record) { k := hub(r); k.Survival, k.FS = "persistent", "tmpfs" },
			`the caches table says the huggingface cache is "persistent", but the download says "volatile"`},
		{"fetched again while its body went into the cache", func(r *record.Record) {
			d := &r.Downloads[0]
			r.Files = append(r.Files, record.File{ID: len(r.Files), Path: d.Path, PagesCreated: d.Bytes / 4096})
			d.Path, d.Name, d.Cache = "", "", ""
		}, "is said to be fetched again (memory), but"},
		{"download written to a file the files table lacks", func(r *record.Record) {
			d := &r.Downloads[0]
			d.Destination = record.DestFile
			d.Files = []record.DownloadFile{{Dev: 44, Ino: 9, Path: d.Path, WrittenPath: d.Path + ".incomplete"}}
		}, "was written to (dev 0:44 inode 9), which the files table does not list"},
		{"download and files table naming its file apart", func(r *record.Record) {
			d := &r.Downloads[0]
			d.Destination = record.DestFile
			d.Files = []record.DownloadFile{{Dev: 44, Ino: 9, Path: d.Path, WrittenPath: d.Path + ".incomplete"}}
			r.Files = append(r.Files, record.File{ID: len(r.Files), Dev: 44, Ino: 9, Path: "/dev/shm/other", FS: "tmpfs"})
		}, "the files table names its file /dev/shm/other"},
		{"export line that moves the cache", func(r *record.Record) {
			k := hub(r)
			k.Name, k.Root, k.MovedBy, k.EntriesWritten = "torch_hub", "/w/home/nothub", "TORCH_HOME", 1
			r.Downloads = nil
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fixtures.Record(t, "cold-ml")
			if len(r.Downloads) == 0 || hub(r) == nil {
				t.Fatal("cold-ml has no download into the huggingface cache")
			}
			if v := storyViolations(r); len(v) != 0 {
				t.Fatalf("the fixture itself: %v", v)
			}
			tc.corrupt(r)
			v := storyViolations(r)
			if tc.msg == "" {
				// No variable makes torch.hub's root …/nothub: persist
				// prints no export, so there is nothing to contradict.
				if len(v) != 0 {
					t.Errorf("violations %v, want none", v)
				}
				return
			}
			if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), tc.msg) {
				t.Errorf("violations %v, want one saying %q", v, tc.msg)
			}
		})
	}
}

// TestDownloadFileRowAgrees: a download's file listed in the files table
// under its final or its first name tells one story.
func TestDownloadFileRowAgrees(t *testing.T) {
	for _, name := range []string{"final", "first"} {
		r := fixtures.Record(t, "cold-ml")
		d := &r.Downloads[0]
		d.Destination = record.DestFile
		d.Files = []record.DownloadFile{{Dev: 44, Ino: 9, Path: d.Path, WrittenPath: d.Path + ".incomplete"}}
		row := record.File{ID: len(r.Files), Dev: 44, Ino: 9, Path: d.Path, PagesCreated: d.Bytes / 4096, FS: "tmpfs"}
		if name == "first" {
			row.Path = d.Path + ".incomplete"
		}
		r.Files = append(r.Files, row)
		if v := storyViolations(r); len(v) != 0 {
			t.Errorf("row under its %s name: %v", name, v)
		}
	}
}

func hub(r *record.Record) *record.Cache {
	if r.JIT == nil {
		return nil
	}
	for i := range r.JIT.Caches {
		if r.JIT.Caches[i].Name == "huggingface" {
			return &r.JIT.Caches[i]
		}
	}
	return nil
}
