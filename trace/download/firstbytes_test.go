package download

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// firstBytes is one connection's first send and the name it must give.
type firstBytes struct {
	what string
	// send writes the first bytes on the connection.
	send func(net.Conn) error
	host string // "": none
	from string
}

// A connection no lookup named (here: every one, the test's thread
// resolves nothing) is named by its first bytes: the server name of a
// TLS ClientHello or the Host header of an HTTP request. Generated
// shapes: methods, header case and spacing, the header's place among
// others, ports, names of every allowed byte and of lengths up to 255; ClientHellos
// from Go's TLS client and built here with the name behind up to 40
// other extensions. And what must not name a peer: addresses, names with
// other bytes, names too long to keep whole, a header past the scanned
// head or an extension past the walked ones, other protocols, a
// truncated or lying ClientHello.
func TestConnectionNamedByItsFirstBytes(t *testing.T) {
	testenv.RequireTracing(t)
	s, shared := startSensor(t)
	if !s.sendNames {
		t.Skip("this kernel has no tcp_sendmsg_locked tracepoint: names come from lookups only")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	cases := append(httpCases(rng), tlsCases(rng)...)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	untrack := trackThread(t, shared)
	defer untrack()
	for _, c := range cases {
		host, from := nameOfFirstBytes(t, s, c.send)
		if host != c.host || (c.host != "" && from != c.from) {
			t.Errorf("%s: named %q (%s), want %q (%s)", c.what, host, from, c.host, c.from)
		}
	}
	if pending := unnamedPending(t, s); pending != 0 {
		t.Errorf("%d connections still count as awaiting their first send after all closed", pending)
	}
}

// nameOfFirstBytes opens a connection from this (tracked) thread to a
// server of its own, sends, and reads the name the kernel side gave it
// before closing it.
func nameOfFirstBytes(t *testing.T, s *Sensor, send func(net.Conn) error) (host, from string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := send(conn); err != nil {
		t.Fatalf("send: %v", err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var key uint64
	var c bpfdl.DownloadConn
	for it := s.objs.Conns.Iterate(); it.Next(&key, &c); {
		if c.Dport == port {
			host := probe.CString(c.Host[:])
			return host, hostFrom(c.HostFrom, len(host))
		}
	}
	t.Fatalf("no tracked connection to port %d", port)
	return "", ""
}

func unnamedPending(t *testing.T, s *Sensor) int64 {
	t.Helper()
	var n int64
	if err := s.objs.UnnamedPending.Get(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func writeAll(b []byte) func(net.Conn) error {
	return func(c net.Conn) error { _, err := c.Write(b); return err }
}

// nameLength is a name's length: most as short as real hosts' names,
// one in four up to the longest kept (255 bytes).
func nameLength(rng *rand.Rand) int {
	if rng.IntN(4) == 0 {
		return 3 + rng.IntN(253)
	}
	return 3 + rng.IntN(60)
}

const nameBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// hostName is a random name of n bytes (n ≥ 3) with at least one letter:
// labels of every byte a host name may have, dots between.
func hostName(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 && b.Len() < n-1 && rng.IntN(6) == 0 && !strings.HasSuffix(b.String(), ".") {
			b.WriteByte('.')
			continue
		}
		b.WriteByte(nameBytes[rng.IntN(len(nameBytes))])
	}
	name := []byte(b.String())
	name[0] = "aBz"[rng.IntN(3)]
	return string(name)
}

func httpCases(rng *rand.Rand) []firstBytes {
	methods := []string{"GET", "HEAD", "POST", "PUT", "OPTIONS", "PATCH"}
	hostKeys := []string{"Host", "host", "HOST", "hOsT"}
	spaces := []string{"", " ", "  ", "\t", " \t "}
	var out []firstBytes
	for i := range 40 {
		name := hostName(rng, nameLength(rng))
		var req bytes.Buffer
		fmt.Fprintf(&req, "%s /models/%d/resolve/main/model.safetensors HTTP/1.1\r\n", methods[rng.IntN(len(methods))], i)
		// the Host header among others, anywhere in the first 900 bytes
		before := rng.IntN(10)
		for k := range before {
			fmt.Fprintf(&req, "X-Pad-%d: %s\r\n", k, strings.Repeat("v", rng.IntN(70)))
		}
		value := name
		if rng.IntN(2) == 0 {
			value += fmt.Sprintf(":%d", 1+rng.IntN(65535))
		}
		fmt.Fprintf(&req, "%s:%s%s\r\nAccept: */*\r\n\r\n", hostKeys[rng.IntN(len(hostKeys))], spaces[rng.IntN(len(spaces))], value)
		out = append(out, firstBytes{what: fmt.Sprintf("HTTP request %d (Host %q after %d headers)", i, value, before),
			send: writeAll(req.Bytes()), host: strings.ToLower(name), from: record.HostFromHTTP})
	}
	request := func(host string, pad int) []byte {
		return fmt.Appendf(nil, "GET / HTTP/1.1\r\nX-Pad: %s\r\nHost: %s\r\n\r\n", strings.Repeat("p", pad), host)
	}
	long := hostName(rng, 256)
	for _, c := range []struct {
		what string
		b    []byte
	}{
		{"an IPv6 address", request("[::1]:8080", 0)},
		{"an IPv4 address", request("10.1.2.3:80", 0)},
		{"a name of 256 bytes, too long to keep whole", request(long, 0)},
		{"a name with a slash", request("hub/evil", 0)},
		{"a name with a byte that is not ASCII", request("hub\xffexample", 0)},
		{"a Host header past the scanned head", request("late.example", 1100)},
		{"only an X-Host header", []byte("GET / HTTP/1.1\r\nX-Host: evil.example\r\n\r\n")},
		{"a request line in lower case", []byte("get / HTTP/1.1\r\nHost: lower.example\r\n\r\n")},
		{"another protocol", []byte("SSH-2.0-OpenSSH_9.6\r\n")},
		{"a Host header after the head's end", []byte("GET / HTTP/1.1\r\n\r\nHost: body.example\r\n")},
	} {
		out = append(out, firstBytes{what: c.what, send: writeAll(c.b)})
	}
	return out
}

func tlsCases(rng *rand.Rand) []firstBytes {
	var out []firstBytes
	// Go's own client: its ClientHello as sent to a real server.
	for i := range 5 {
		name := hostName(rng, nameLength(rng))
		out = append(out, firstBytes{what: fmt.Sprintf("Go TLS client %d (%s)", i, name), host: strings.ToLower(name), from: record.HostFromTLS,
			send: func(c net.Conn) error {
				_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
				_ = tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
				_ = c.SetDeadline(time.Time{})
				return nil // no server answers: only the ClientHello matters
			}})
	}
	// Built here: the name behind other extensions, up to 40 of them.
	for i := range 20 {
		name := hostName(rng, nameLength(rng))
		var exts [][]byte
		for range rng.IntN(41) {
			exts = append(exts, extension(0x0a0a+uint16(rng.IntN(0x100)), make([]byte, rng.IntN(60))))
		}
		exts = append(exts, sniExtension(0, name))
		out = append(out, firstBytes{what: fmt.Sprintf("ClientHello %d, the name behind %d extensions", i, len(exts)-1),
			send: writeAll(clientHello(32, exts)), host: strings.ToLower(name), from: record.HostFromTLS})
	}
	many := make([][]byte, 0, 61)
	for range 60 {
		many = append(many, extension(0x0a0a, nil))
	}
	far := [][]byte{extension(0x0015, make([]byte, 4200)), sniExtension(0, "far.example")}
	lying := clientHello(0, [][]byte{sniExtension(0, "lying.example")})
	lying[43] = 200 // a session id longer than the record
	truncated := clientHello(0, [][]byte{sniExtension(0, "cut.example")})
	for _, c := range []struct {
		what string
		b    []byte
	}{
		{"a name behind 60 extensions, past the walk", clientHello(0, append(many, sniExtension(0, "late.example")))},
		{"a name past the bytes read", clientHello(0, far)},
		{"a name of another type", clientHello(0, [][]byte{sniExtension(1, "other.example")})},
		{"an address as the server name", clientHello(0, [][]byte{sniExtension(0, "192.168.1.20")})},
		{"a session id longer than the record", lying},
		{"a ClientHello cut inside its name", truncated[:len(truncated)-5]},
		{"a server name with a byte that is not ASCII", clientHello(0, [][]byte{sniExtension(0, "caf\xc3\xa9.example")})},
	} {
		out = append(out, firstBytes{what: c.what, send: writeAll(c.b)})
	}
	return out
}

func extension(typ uint16, data []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// sniExtension is server_name with one name of type nameType.
func sniExtension(nameType byte, name string) []byte {
	entry := append([]byte{nameType}, binary.BigEndian.AppendUint16(nil, uint16(len(name)))...)
	entry = append(entry, name...)
	list := append(binary.BigEndian.AppendUint16(nil, uint16(len(entry))), entry...)
	return extension(0, list)
}

// clientHello is a TLS 1.2 record holding a ClientHello with a session
// id of sid bytes, two cipher suites, no compression and exts.
func clientHello(sid int, exts [][]byte) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, byte(sid))
	body = append(body, make([]byte, sid)...)
	body = append(body, 0, 4, 0x13, 0x01, 0x13, 0x02) // cipher suites
	body = append(body, 1, 0)                         // compression: null
	var all []byte
	for _, e := range exts {
		all = append(all, e...)
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(all)))
	body = append(body, all...)
	hs := append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	rec := []byte{0x16, 3, 1}
	rec = binary.BigEndian.AppendUint16(rec, uint16(len(hs)))
	return append(rec, hs...)
}
