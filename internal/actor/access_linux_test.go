package actor

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenWithTheUsersRights(t *testing.T) {
	a, u := sudoActor(t)
	f := newFixture(t, u)
	if _, err := a.Open(f.rootOnly); !errors.Is(err, unix.EACCES) {
		t.Errorf("open root's 0600 file: err %v, want EACCES", err)
	}
	g, err := a.Open(f.groupOnly)
	if err != nil {
		t.Fatalf("open a file of the user's group: %v", err)
	}
	g.Close()

	// report <(...) passes /dev/fd/N: a pipe the user's shell made,
	// which the user's rights must open again. (A pipe root made is
	// root's 0600 inode: the user may not reopen it.)
	var r, w *os.File
	if err := a.Do(func() error {
		var err error
		r, w, err = os.Pipe()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.WriteString("record")
		w.Close()
	}()
	p, err := a.Open("/dev/fd/" + strconv.Itoa(int(r.Fd())))
	if err != nil {
		t.Fatalf("open /dev/fd of a pipe: %v", err)
	}
	defer p.Close()
	if b, _ := io.ReadAll(p); string(b) != "record" {
		t.Errorf("read %q from the pipe", b)
	}
}

func TestMayTraceOnlyTheUsersProcesses(t *testing.T) {
	a, u := sudoActor(t)
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := a.MayTrace(cmd.Process.Pid); err != nil {
		t.Errorf("the user's own process: %v", err)
	}
	for _, pid := range []int{1, os.Getpid()} {
		if err := a.MayTrace(pid); err == nil {
			t.Errorf("process %d (root's) may be traced by %s", pid, u.Name)
		}
	}
	root, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if err := root.MayTrace(1); err != nil {
		t.Errorf("root may not trace pid 1: %v", err)
	}
}
