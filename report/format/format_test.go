package format

import (
	"strings"
	"testing"
)

func TestDuration(t *testing.T) {
	const ms = int64(1e6)
	for _, c := range []struct {
		ns   int64
		want string
	}{
		{0, "0s"},
		{850, "850ns"},
		{340 * 1e3, "340µs"},
		{999_600, "1ms"},
		{340 * ms, "340ms"},
		{999_700_000, "1.0s"},
		{8_210 * ms, "8.2s"},
		{8_249 * ms, "8.2s"},
		{8_250 * ms, "8.3s"},
		{9_960 * ms, "10s"},
		{42_400 * ms, "42s"},
		{59_600 * ms, "1m00s"},
		{210 * 1000 * ms, "3m30s"},
		{612 * 1000 * ms, "10m12s"},
		{(61*60 + 12) * 1000 * ms, "61m12s"},
		{(12*3600 + 5*60) * 1000 * ms, "12h05m"},
		{-1500 * ms, "-1.5s"},
	} {
		if got := Duration(c.ns); got != c.want {
			t.Errorf("Duration(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
	if got := Duration(-1 << 63); !strings.HasPrefix(got, "-") {
		t.Errorf("Duration(MinInt64) = %q", got)
	}
	if got := SignedDuration(1500 * ms); got != "+1.5s" {
		t.Errorf("SignedDuration = %q", got)
	}
}

func TestBytesAndCounts(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 512: "512 B", 1536: "1.5 KiB", 14 << 30: "14.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[uint64]string{0: "0", 999: "999", 1180: "1,180", 1234567: "1,234,567"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	if Times(1) != "once" || Times(1204) != "1,204 times" || Times(-3) != "0 times" {
		t.Errorf("Times: %q %q %q", Times(1), Times(1204), Times(-3))
	}
}

func TestPath(t *testing.T) {
	for in, want := range map[string]string{
		"models/x.safetensors": "models/x.safetensors",
		"/home/dev/.cache/huggingface/hub/models--Qwen--Qwen-Image/blobs/3f2a": "…/hub/models--Qwen--Qwen-Image/blobs/3f2a",
		"/" + strings.Repeat("a", 60):                                          "…/" + strings.Repeat("a", 60),
		"/ä/" + strings.Repeat("ö", 50) + "/x":                                 "…/x",
	} {
		if got := Path(in, PathWidth); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Path("/a/bb/ccc/dddd", 9); got != "…/dddd" {
		t.Errorf("Path width 10 = %q", got)
	}
	if got := Trim("python3 generate.py --steps 4", 10); got != "python3 g…" {
		t.Errorf("Trim = %q", got)
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain/path.bin":         "plain/path.bin",
		"modèle/ä.bin":           "modèle/ä.bin",
		"red\x1b[31mtext":        `red\x1b[31mtext`,
		"two\nlines":             `two\nlines`,
		"tab\there\rcr":          `tab\there\rcr`,
		"bad\xff\xfe.txt":        `bad\xff\xfe.txt`,
		`back\slash`:             `back\\slash`,
		"del\x7f":                `del\x7f`,
		"c1\u009b2J":             `c1\x9b2J`,
		"bidi\u202eevil":         `bidi\u{202e}evil`,
		"replacement\ufffd char": "replacement\ufffd char",
	} {
		got := Escape(in)
		if got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Errorf("Escape(%q) leaves control %U", in, r)
			}
		}
	}
	if got := EscapeAll([]string{"cat", "a\nb"}); got != `cat a\nb` {
		t.Errorf("EscapeAll = %q", got)
	}
}
