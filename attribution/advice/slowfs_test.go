package advice

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// randomFUSE is 1 MiB filled by 256 scattered 4 KiB faults in 0.5 s.
func randomFUSE(dev uint32) record.File {
	return record.File{Path: "/m/w.bin", Dev: dev, FS: "fuse", BytesFromDisk: 1 << 20, PagesMissed: 256, FillWaitNS: 500e6,
		Order: &record.ReadOrder{Misses: 256, FaultPages: 256, Jumps: [5]uint64{0, 10, 100, 0, 145}}}
}

func TestSlowFilesystemQuotesOnlyASequentialReadOfTheSameFilesystem(t *testing.T) {
	r := &record.Record{Files: []record.File{randomFUSE(7)}}
	s := SlowFS(r)
	if len(s) != 1 || s[0].Fills != 256 || s[0].FillBytes != 4096 || s[0].FillNS != 500e6/256 || s[0].Speedup != 0 || s[0].Action != nil ||
		!s[0].Faults || s[0].FS != "fuse" {
		t.Fatalf("no sequential read: %+v", s)
	}
	seq := record.File{Path: "/m/a.bin", Dev: 7, FS: "fuse", BytesFromDisk: 4 << 20, IOWaitNS: 80e6,
		Order: &record.ReadOrder{Misses: 1024, ReadPages: 1024, Jumps: [5]uint64{1023}}}
	other := seq
	other.Dev = 8
	if s := SlowFS(&record.Record{Files: []record.File{randomFUSE(7), other}}); len(s) != 1 || s[0].Speedup != 0 {
		t.Errorf("sequential read of another filesystem: %+v", s)
	}
	s = SlowFS(&record.Record{Files: []record.File{randomFUSE(7), seq}})
	if len(s) != 1 || s[0].Speedup < 24 || s[0].Speedup > 26 || s[0].Action == nil || s[0].SequentialPath != "/m/a.bin" {
		t.Fatalf("with a sequential read: %+v", s)
	}
	local := randomFUSE(7)
	local.FS = "ext4"
	if s := SlowFS(&record.Record{Files: []record.File{local}}); len(s) != 0 {
		t.Errorf("ext4: %+v", s)
	}
}
