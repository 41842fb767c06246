package pagecache

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A file whose change time lies in a second before the load was born
// before it; one changed in the load's second or after, or whose change
// time is unknown, is asked of statx.
func TestChangedBeforeTellsBirthsBeforeTheLoad(t *testing.T) {
	loaded := time.Unix(1_800_000_000, 500_000_000)
	for _, c := range []struct {
		ctime uint32
		want  bool
	}{
		{0, false},
		{1_799_999_999, true},
		{1_800_000_000, false}, // the same second: maybe after
		{1_800_000_001, false},
	} {
		if got := changedBefore(c.ctime, loaded); got != c.want {
			t.Errorf("change time %d, load %v: %v, want %v", c.ctime, loaded, got, c.want)
		}
	}
}

// What changedBefore assumes of the filesystems here: a file's birth is
// never after its change time, so a file created after a moment has a
// change time at or after it, and statx agrees on both.
func TestABirthIsNotAfterTheChangeTime(t *testing.T) {
	before := time.Now()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_BTIME|unix.STATX_CTIME, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mask&unix.STATX_BTIME == 0 {
		t.Skip("this filesystem keeps no birth time")
	}
	if changedBefore(uint32(st.Ctime.Sec), before) {
		t.Errorf("a file made after %v has change time %d: taken as born before", before, st.Ctime.Sec)
	}
	if st.Btime.Sec > st.Ctime.Sec || (st.Btime.Sec == st.Ctime.Sec && st.Btime.Nsec > st.Ctime.Nsec) {
		t.Errorf("birth %d.%09d after change %d.%09d", st.Btime.Sec, st.Btime.Nsec, st.Ctime.Sec, st.Ctime.Nsec)
	}
}
