package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/words"
)

const (
	// stallHalf is each half of the stalling server's body, sent in
	// stallChunk writes stallPace apart (about 0.8 s a half), so that
	// most polls see data and the median gap is one poll.
	stallHalf  = 8 << 20
	stallChunk = 256 << 10
	stallPace  = 25 * time.Millisecond
	// stallPause is the server's silence mid-body: above the 5 s floor.
	stallPause = 6 * time.Second
)

// stallClock is the stalling server's own account: its response header,
// when it wrote the first byte of the body, and when it paused and
// resumed.
type stallClock struct {
	mu                    sync.Mutex
	header                string
	first, paused, resumd time.Time
}

// stallServer serves one raw HTTP response on 127.0.0.1: half the body,
// pause (0: none), the other half.
func stallServer(t *testing.T, pause time.Duration) (string, *stallClock) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	clock := &stallClock{header: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", 2*stallHalf)}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// Read the request before answering.
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		chunk := make([]byte, stallChunk)
		clock.mu.Lock()
		defer clock.mu.Unlock()
		if _, err := c.Write([]byte(clock.header)); err != nil {
			return
		}
		clock.first = time.Now()
		for half := 0; half < 2; half++ {
			for n := 0; n < stallHalf; n += stallChunk {
				if _, err := c.Write(chunk); err != nil {
					return
				}
				time.Sleep(stallPace)
			}
			if half == 0 {
				clock.paused = time.Now()
				time.Sleep(pause)
				clock.resumd = time.Now()
			}
		}
	}()
	return "http://" + ln.Addr().String() + "/model.bin", clock
}

// TestDownloadStallIsReported: a server sends half a 16 MiB body, goes
// silent for 6 s and sends the rest. coldtrace reports one stall whose
// start (from the first byte) and length match the server's own clock
// within 0.3 s, with the bytes before and after exact, and names it
// under the verdict; the same download without the pause has no stall.
func TestDownloadStallIsReported(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script, err := filepath.Abs("../../testdata/workloads/fetchmany.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, pause := range []time.Duration{stallPause, 0} {
		t.Run(pause.String(), func(t *testing.T) {
			url, clock := stallServer(t, pause)
			out := filepath.Join(t.TempDir(), "run.rec")
			code, _, stderr := coldtrace(t, nil, "-o", out, "--", python, script, "threads", url)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			if len(rec.Downloads) != 1 {
				t.Fatalf("%d downloads, want 1", len(rec.Downloads))
			}
			stalls := advice.Stalls(rec)
			if pause == 0 {
				if len(stalls) != 0 {
					t.Errorf("stalls without a pause: %+v", stalls)
				}
				return
			}
			clock.mu.Lock()
			defer clock.mu.Unlock()
			checkStall(t, stalls, rec.Downloads[0].StartNS, clock)
			if !strings.Contains(stderr, "finding: "+words.Finding(stalls[0])) {
				t.Errorf("the verdict does not name the stall %q:\n%s", words.Finding(stalls[0]), stderr)
			}
		})
	}
}

// checkStall compares the one stall found with the server's clock,
// both measured from the body's first byte.
func checkStall(t *testing.T, stalls []advice.DownloadStall, firstNS int64, clock *stallClock) {
	t.Helper()
	if len(stalls) != 1 {
		t.Fatalf("stalls = %+v, want one", stalls)
	}
	s := stalls[0]
	wantStart, wantLen := clock.paused.Sub(clock.first), clock.resumd.Sub(clock.paused)
	gotStart, gotLen := time.Duration(s.StartNS-firstNS), time.Duration(s.LengthNS)
	t.Logf("stall: %s; server paused at +%v for %v, coldtrace says +%v for %v", words.Finding(s), wantStart, wantLen, gotStart, gotLen)
	const tol = 300 * time.Millisecond
	if d := gotStart - wantStart; d < -tol || d > tol {
		t.Errorf("stall starts at +%v from the first byte, the server paused at +%v", gotStart, wantStart)
	}
	if d := gotLen - wantLen; d < -tol || d > tol {
		t.Errorf("stall lasts %v, the server paused for %v", gotLen, wantLen)
	}
	if want := uint64(len(clock.header) + stallHalf); s.BytesBefore != want {
		t.Errorf("%d bytes before the stall, want %d", s.BytesBefore, want)
	}
	if s.BytesAfter != stallHalf {
		t.Errorf("%d bytes after the stall, want %d", s.BytesAfter, stallHalf)
	}
}
