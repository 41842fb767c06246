package format

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestCallSiteShowsUsersFramesAndLeafPackage: a call site starts at the
// innermost frame of the user's own code (standard library, installed
// packages and frozen modules passed over), shortens a frame in the same
// file to ":LINE func", keeps at most four of the user's frames, names the
// installed package's leaf frame, names a native leaf when there is no
// Python frame, and escapes hostile names.
func TestCallSiteShowsUsersFramesAndLeafPackage(t *testing.T) {
	st := func(fr ...record.PyFrame) *record.PyStack { return &record.PyStack{Frames: fr} }
	sub := record.PyFrame{File: "/usr/lib/python3.11/subprocess.py", Line: 1901, Func: "Popen._execute_child"}
	frozen := record.PyFrame{File: "<frozen importlib._bootstrap>", Line: 241, Func: "_call_with_frames_removed"}
	lib := record.PyFrame{File: "/venv/lib/python3.12/site-packages/safetensors/torch.py", Line: 311, Func: "load_file"}
	u := func(file string, line int, fn string) record.PyFrame {
		return record.PyFrame{File: file, Line: line, Func: fn}
	}
	for _, tc := range []struct {
		name string
		st   *record.PyStack
		want string
	}{
		{"stdlib leaf", st(sub, u("/src/spawn.py", 4, "run_compiler"), u("/src/spawn.py", 7, "compile_kernel"), u("/src/spawn.py", 19, "<module>")),
			"spawn.py:4 run_compiler ← :7 compile_kernel ← :19 <module>"},
		{"package leaf", st(lib, u("/src/main.py", 12, "load"), frozen, u("/src/app/run.py", 3, "<module>")),
			"main.py:12 load ← run.py:3 <module> (in safetensors/torch.py:311 load_file)"},
		{"four frames at most", st(u("/a.py", 1, "a"), u("/a.py", 2, "b"), u("/a.py", 3, "c"), u("/a.py", 4, "d"), u("/a.py", 5, "e")),
			"a.py:1 a ← :2 b ← :3 c ← :4 d"},
		{"hostile name", st(u("/src/x.py", 1, "f\x1b[31m")), `x.py:1 f\x1b[31m`},
		{"library only", st(sub, frozen), ""},
		// python -m pip: no frame of the user's own; pip's frames name
		// it, not the urllib3 it vendors nor the stdlib's runpy.
		{"a package run as the program", st(
			u("/usr/lib/python3/dist-packages/pip/_vendor/urllib3/util/connection.py", 85, "create_connection"),
			u("/usr/lib/python3/dist-packages/pip/_internal/network/session.py", 518, "PipSession.request"),
			u("/usr/lib/python3/dist-packages/pip/_vendor/requests/sessions.py", 600, "Session.get"),
			u("/usr/lib/python3/dist-packages/pip/_internal/network/download.py", 117, "_http_get_download"),
			u("/usr/lib/python3/dist-packages/pip/_internal/network/download.py", 134, "Downloader.__call__"),
			u("/usr/lib/python3/dist-packages/pip/__main__.py", 31, "<module>"),
			record.PyFrame{File: "<frozen runpy>", Line: 88, Func: "_run_code"}),
			"pip/_internal/network/session.py:518 PipSession.request ← pip/_internal/network/download.py:117 _http_get_download ← :134 Downloader.__call__ ← pip/__main__.py:31 <module> (in pip/_vendor/urllib3/util/connection.py:85 create_connection)"},
		{"native leaf", st(record.PyFrame{File: "/usr/lib/x86_64-linux-gnu/libc.so.6", Func: "vfork", Native: true}), "libc.so.6 vfork (native)"},
		{"native without symbol", st(record.PyFrame{File: "/opt/x/prog", Func: "prog+0x1139", Native: true}), "prog prog+0x1139 (native)"},
		{"nil", nil, ""},
	} {
		if got := CallSite(tc.st); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
