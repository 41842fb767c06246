package record

import "testing"

// TestSiteNameOfPythonAndNativeStacks: a Python stack's call site is its
// innermost frame of the user's own code, a native leaf's its function
// in its module, and a stack of library frames only has none.
func TestSiteNameOfPythonAndNativeStacks(t *testing.T) {
	for _, c := range []struct {
		st   PyStack
		want string
	}{
		{PyStack{Frames: []PyFrame{{File: "/usr/lib/python3.11/subprocess.py", Line: 9, Func: "run"}, {File: "/src/main.py", Line: 12, Func: "load"}}},
			"load (main.py:12)"},
		{PyStack{Frames: []PyFrame{{File: "/usr/lib/x86_64-linux-gnu/libc.so.6", Func: "__read", Native: true}}}, "__read (libc.so.6, native)"},
		{PyStack{Frames: []PyFrame{{File: "/usr/lib/python3.11/json/decoder.py", Line: 3, Func: "decode"}}}, ""},
		// python -m pip: pip's own frames, not what it vendors.
		{PyStack{Frames: []PyFrame{
			{File: "/v/lib/python3.12/site-packages/pip/_vendor/urllib3/connection.py", Line: 174, Func: "_new_conn"},
			{File: "/v/lib/python3.12/site-packages/pip/_internal/network/download.py", Line: 117, Func: "_http_get_download"},
			{File: "/v/lib/python3.12/site-packages/pip/__main__.py", Line: 31, Func: "<module>"},
			{File: "<frozen runpy>", Line: 88, Func: "_run_code"}}}, "_http_get_download (download.py:117)"},
		// A user's frame outermost: installed packages stay libraries.
		{PyStack{Frames: []PyFrame{
			{File: "/v/lib/python3.12/site-packages/pip/_internal/network/download.py", Line: 117, Func: "_http_get_download"},
			{File: "/src/main.py", Line: 3, Func: "<module>"}}}, "<module> (main.py:3)"},
	} {
		if got := c.st.SiteName(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.st.Frames, got, c.want)
		}
	}
}
