package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/words"
)

// silentPause is how long the silent server holds an accepted request
// before it answers: past the 10 s floor, with room for the polls.
const silentPause = 10500 * time.Millisecond

// silentServer answers one HTTP request on 127.0.0.1 with a 4 KiB body,
// after holding it for pause; accepted is when it accepted.
func silentServer(t *testing.T, pause time.Duration) (string, chan time.Time) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan time.Time, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		accepted <- time.Now()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		time.Sleep(pause)
		body := strings.Repeat("x", 4096)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	}()
	return "http://" + ln.Addr().String() + "/config.json", accepted
}

// TestSilentConnectionIsReported: a server accepts, holds the request
// 10.5 s and then answers. coldtrace reports one connection that received
// nothing for that long (within 0.5 s of the server's own clock) and
// names it under the verdict; the same fetch answered at once has none.
func TestSilentConnectionIsReported(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script, err := filepath.Abs("../../testdata/workloads/fetchmany.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, pause := range []time.Duration{silentPause, 0} {
		t.Run(pause.String(), func(t *testing.T) {
			url, accepted := silentServer(t, pause)
			out := filepath.Join(t.TempDir(), "run.rec")
			code, _, stderr := coldtrace(t, nil, "-o", out, "--", python, script, "threads", url)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			waits := advice.SilentWaits(rec)
			if pause == 0 {
				if len(waits) != 0 {
					t.Errorf("silent connections without a pause: %+v", waits)
				}
				return
			}
			if len(waits) != 1 {
				t.Fatalf("silent connections = %+v, want one", rec.Silent)
			}
			<-accepted
			w, c := waits[0], rec.Silent[0]
			t.Logf("%s (thread waited %.1f s of it)", words.Finding(w), float64(c.WaitNS)/1e9)
			if d := time.Duration(w.LengthNS) - pause; d < -500*time.Millisecond || d > 500*time.Millisecond {
				t.Errorf("silence of %v, the server held the request %v", time.Duration(w.LengthNS), pause)
			}
			if !w.Received || c.Bytes < 4096 {
				t.Errorf("the answer after the silence is not counted: %+v", c)
			}
			if !strings.Contains(stderr, "finding: "+words.Finding(w)) {
				t.Errorf("the verdict does not name the wait %q:\n%s", words.Finding(w), stderr)
			}
		})
	}
}

// slowHost is the name the slow resolver answers (with 127.0.0.1), and
// dnsAddr where it listens: a loopback address of its own, so that no
// other resolver on the machine is in the way.
const (
	slowHost    = "weights.coldtrace.test"
	dnsAddr     = "127.0.0.77:53"
	lookupDelay = 1500 * time.Millisecond
)

// slowResolver answers every A query with 127.0.0.1 and every other with
// no address, each after delay.
func slowResolver(t *testing.T, delay time.Duration) {
	pc, err := net.ListenPacket("udp", dnsAddr)
	if err != nil {
		t.Skipf("cannot run a resolver on %s: %v", dnsAddr, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := append([]byte(nil), buf[:n]...)
			go func() {
				time.Sleep(delay)
				if a := dnsAnswer(q); a != nil {
					pc.WriteTo(a, from)
				}
			}()
		}
	}()
}

// dnsAnswer is the answer to query q: its header and question, and for
// type A one record, 127.0.0.1.
func dnsAnswer(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	end := 12
	for end < len(q) && q[end] != 0 {
		end += int(q[end]) + 1
	}
	end += 5 // the root label, type, class
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[end-4:])
	a := append([]byte(nil), q[:end]...)
	a[2], a[3] = 0x81, 0x80 // a response, recursion available, no error
	binary.BigEndian.PutUint16(a[4:], 1)
	binary.BigEndian.PutUint16(a[8:], 0)
	binary.BigEndian.PutUint16(a[10:], 0)
	if qtype != 1 {
		binary.BigEndian.PutUint16(a[6:], 0)
		return a
	}
	binary.BigEndian.PutUint16(a[6:], 1)
	// The name by pointer to the question, type A, class IN, TTL 0, 4 bytes.
	return append(a, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 127, 0, 0, 1)
}

// TestSlowNameLookupIsReported: the download's host name is resolved by
// a resolver that answers after 1.5 s (the client runs in a mount
// namespace of its own whose resolv.conf names it and whose
// nsswitch.conf skips /etc/hosts). coldtrace says how long DNS took
// before the download, within 0.3 s; answered at once, no finding.
func TestSlowNameLookupIsReported(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux) for a private resolv.conf")
	}
	script, err := filepath.Abs("../../testdata/workloads/fetchmany.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, delay := range []time.Duration{lookupDelay, 0} {
		t.Run(delay.String(), func(t *testing.T) {
			slowResolver(t, delay)
			dir := t.TempDir()
			resolv, nss := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "nsswitch.conf")
			host, _, _ := strings.Cut(dnsAddr, ":")
			if err := os.WriteFile(resolv, []byte("nameserver "+host+"\noptions timeout:5 attempts:1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(nss, []byte("hosts: dns\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			url, _ := stallServer(t, 0)
			url = strings.Replace(url, "127.0.0.1", slowHost, 1)
			sh := fmt.Sprintf("mount --bind %s /etc/resolv.conf && mount --bind %s /etc/nsswitch.conf && exec %s %s threads %s", resolv, nss, python, script, url)
			out := filepath.Join(dir, "run.rec")
			code, stdout, stderr := coldtrace(t, nil, "-o", out, "--", "unshare", "-m", "sh", "-c", sh)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s\n%s", code, stdout, stderr)
			}
			rec := readRecord(t, out)
			if len(rec.Downloads) != 1 || rec.Downloads[0].Host != slowHost {
				t.Fatalf("downloads = %+v, want one from %s", rec.Downloads, slowHost)
			}
			slow := advice.SlowLookups(rec)
			if delay == 0 {
				if len(slow) != 0 {
					t.Errorf("slow lookups with a fast resolver: %+v", slow)
				}
				return
			}
			if len(slow) != 1 {
				t.Fatalf("slow lookups = %+v (lookup %+v), want one", slow, rec.Downloads[0].Lookup)
			}
			t.Log(words.Finding(slow[0]))
			if d := time.Duration(slow[0].LengthNS) - delay; d < -300*time.Millisecond || d > 300*time.Millisecond {
				t.Errorf("the lookup took %v, the resolver answered after %v", time.Duration(slow[0].LengthNS), delay)
			}
			if !strings.Contains(stderr, "finding: "+words.Finding(slow[0])) {
				t.Errorf("the verdict does not name the lookup %q:\n%s", words.Finding(slow[0]), stderr)
			}
		})
	}
}
