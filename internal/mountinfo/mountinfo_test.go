package mountinfo

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		line string
		want Mount
		ok   bool
	}{
		{"35 25 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory",
			Mount{Major: 0, Minor: 31, Root: "/", MountPoint: "/sys/fs/cgroup/memory", FSType: "cgroup", SuperOptions: "rw,memory"}, true},
		{`99 1 254:1 /home/a\040b /mnt/with\040space\134x rw - ext4 /dev/vda1 rw,relatime`,
			Mount{Major: 254, Minor: 1, Root: "/home/a b", MountPoint: `/mnt/with space\x`, FSType: "ext4", SuperOptions: "rw,relatime"}, true},
		{"35 25 0:31 / /mnt rw cgroup cgroup rw", Mount{}, false}, // no separator
		{"35 25 031 / /mnt rw - ext4 /dev/x rw", Mount{}, false},  // no major:minor
		{"35 25 0:x / /mnt rw - ext4 /dev/x rw", Mount{}, false},  // bad minor
		{"35 25 0:31 / /mnt rw - ext4", Mount{}, false},           // no source, options
		{"", Mount{}, false},
	} {
		got, ok := Parse(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"/plain":        "/plain",
		`/a\040b`:       "/a b",
		`/tab\011end`:   "/tab\tend",
		`/short\04`:     `/short\04`, // too short to be an escape
		`/not\999octal`: `/not\999octal`,
		`\134\134`:      `\\`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
