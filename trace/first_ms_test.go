package trace

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
)

// firstMsC connects to 127.0.0.1:argv[1], reads the file argv[2] whole
// and forks a child that exits, all before anything else: the sensors
// that see them must be attached when the command is released, not a
// moment later. Then it reads what the server sends until the end.
const firstMsC = `
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[1 << 16];

int main(int argc, char **argv) {
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0)
		return 2;
	int fd = open(argv[2], O_RDONLY);
	if (fd < 0)
		return 3;
	long file = 0, n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		file += n;
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	if (child < 0 || waitpid(child, NULL, 0) != child)
		return 4;
	long got = 0;
	while ((n = read(s, buf, sizeof buf)) > 0)
		got += n;
	printf("%ld %ld\n", file, got);
	return 0;
}
`

// TestFirstMillisecondIsSeen: a command that connects, reads a file and
// forks as the first things it does has all three in the record, counted
// exactly: the sensors that load in parallel (and the uprobe links made
// meanwhile) are all attached before the command is released.
func TestFirstMillisecondIsSeen(t *testing.T) {
	requireTracing(t)
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "firstms", firstMsC)

	const sent = 8 << 20 // twice record.DownloadMinBytes
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- serveOnce(ln, sent) }()
	port := ln.Addr().(*net.TCPAddr).Port

	const pages = 256
	data := filepath.Join(dir, "data")
	writeEvicted(t, data, pages*4096)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(dir, "out")
	stdout, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	rec, err := Run(ctx, Options{Command: []string{bin, strconv.Itoa(port), data}, NoGPU: true, Actor: self,
		Stdin: os.Stdin, Stdout: stdout, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	said, _ := os.ReadFile(out)
	if rec.ExitCode != 0 || string(said) != fmt.Sprintf("%d %d\n", pages*4096, sent) {
		t.Fatalf("command exited %d saying %q", rec.ExitCode, said)
	}
	checkFirstMsRecord(t, rec, port, data, pages, sent)
}

func checkFirstMsRecord(t *testing.T, rec *record.Record, port int, data string, pages, sent uint64) {
	t.Helper()
	if lost := rec.Lost.Total(); lost != 0 {
		t.Errorf("%d events lost: %+v", lost, rec.Lost)
	}
	// The command is the process whose parent is not in the record.
	var cmd int32
	var children []record.Process
	inRecord := map[int32]bool{}
	for _, p := range rec.Processes {
		inRecord[p.PID] = true
	}
	for _, p := range rec.Processes {
		if !inRecord[p.PPID] {
			cmd = p.PID
		}
	}
	for _, p := range rec.Processes {
		if p.PID != cmd && p.PPID == cmd {
			children = append(children, p)
		}
	}
	if cmd == 0 || len(rec.Processes) != 2 || len(children) != 1 || !children[0].Exited {
		t.Errorf("processes %+v: want the command and its one forked child, exited", rec.Processes)
	}
	peer := fmt.Sprintf("127.0.0.1:%d", port)
	if len(rec.Downloads) != 1 || rec.Downloads[0].Peer != peer || rec.Downloads[0].Bytes != sent || rec.Downloads[0].PID != cmd {
		t.Errorf("downloads %+v: want one of %d bytes from %s by pid %d", rec.Downloads, sent, peer, cmd)
	}
	var f *record.File
	for i := range rec.Files {
		if rec.Files[i].Path == data {
			f = &rec.Files[i]
		}
	}
	if f == nil {
		t.Fatalf("no row for %s among %d files", data, len(rec.Files))
	}
	if f.PagesAccessed != pages || f.PagesMissed != pages || f.BytesFromDisk != pages*4096 {
		t.Errorf("%s: accessed %d, missed %d pages, %d bytes from disk; want %d, %d, %d",
			data, f.PagesAccessed, f.PagesMissed, f.BytesFromDisk, pages, pages, pages*4096)
	}
}

// serveOnce accepts one connection, sends n bytes and closes it.
func serveOnce(ln net.Listener, n int64) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	zero, err := os.Open("/dev/zero")
	if err != nil {
		return err
	}
	defer zero.Close()
	if _, err := io.CopyN(c, zero, n); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// writeEvicted writes size bytes to path, on disk, and drops its pages
// from the page cache, checking with mincore that none is left.
func writeEvicted(t *testing.T, path string, size int) {
	t.Helper()
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+4095)/4096)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for i, v := range vec {
		if v&1 != 0 {
			t.Fatalf("%s: page %d still cached after fadvise", path, i)
		}
	}
}
