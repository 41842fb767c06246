package actor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
)

// sudoActor creates a user and resolves the actor as sudo would leave the
// environment for them.
func sudoActor(t *testing.T) (Actor, testuser.User) {
	t.Helper()
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	a, err := Resolve("", u.SudoEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	if a.UID != uint32(u.UID) || a.GID != uint32(u.GID) || a.Name != u.Name || a.Home != u.Home || a.Via != "sudo" {
		t.Fatalf("Resolve under sudo = %+v; want %s (%d:%d) home %s", a, u.Name, u.UID, u.GID, u.Home)
	}
	if len(a.Groups) != 2 || a.Groups[0] != u.GID || a.Groups[1] != u.GroupGID {
		t.Fatalf("groups %v; want [%d %d]", a.Groups, u.GID, u.GroupGID)
	}
	return a, u
}

// fixture is a world-searchable directory holding files only some may
// read.
type fixture struct {
	dir, rootOnly, groupOnly, rootGroup, private string
}

func newFixture(t *testing.T, u testuser.User) fixture {
	t.Helper()
	dir := searchableTempDir(t, 0o755)
	f := fixture{dir: dir, rootOnly: filepath.Join(dir, "root-only"), groupOnly: filepath.Join(dir, "group-only"),
		rootGroup: filepath.Join(dir, "root-group"), private: filepath.Join(dir, "private")}
	must(t, os.WriteFile(f.rootOnly, []byte("secret"), 0o600))
	must(t, os.WriteFile(f.groupOnly, []byte("team"), 0o640))
	must(t, os.Chown(f.groupOnly, 0, u.GroupGID))
	must(t, os.WriteFile(f.rootGroup, []byte("wheel"), 0o640))
	must(t, os.Mkdir(f.private, 0o700))
	must(t, os.WriteFile(filepath.Join(f.private, "model.bin"), []byte("weights"), 0o644))
	return f
}

func TestDoHasOnlyTheUsersRights(t *testing.T) {
	a, u := sudoActor(t)
	f := newFixture(t, u)
	err := a.Do(func() error {
		if _, err := os.ReadFile(f.rootOnly); !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("read root's 0600 file: err %v, want EACCES (CAP_DAC_OVERRIDE kept?)", err)
		}
		if _, err := os.ReadFile(f.rootGroup); !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("read root:root 0640 file: err %v, want EACCES (root's groups kept?)", err)
		}
		if _, err := os.ReadFile(f.groupOnly); err != nil {
			return fmt.Errorf("read a file of the user's supplementary group: %w", err)
		}
		if _, err := os.ReadDir(f.private); !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("list root's 0700 directory: err %v, want EACCES (CAP_DAC_READ_SEARCH kept?)", err)
		}
		if _, err := os.Stat(filepath.Join(f.private, "model.bin")); !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("stat under root's 0700 directory: err %v, want EACCES", err)
		}
		if err := os.Chmod(f.rootOnly, 0o666); !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("chmod root's file: err %v, want EPERM (CAP_FOWNER kept?)", err)
		}
		if fi, err := os.Stat("/root"); err == nil && fi.Mode().Perm()&0o005 == 0 {
			if _, err := os.ReadDir("/root"); !errors.Is(err, unix.EACCES) {
				return fmt.Errorf("list /root: err %v, want EACCES", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same calls with root's rights, to show the fixture is not
	// simply unreadable.
	if _, err := os.ReadFile(f.rootOnly); err != nil {
		t.Fatalf("root reads its own file: %v", err)
	}
}

func TestDoCreatesFilesOwnedByTheUser(t *testing.T) {
	a, u := sudoActor(t)
	dir := searchableTempDir(t, 0o777)
	p := filepath.Join(dir, "new")
	if err := a.Do(func() error { return os.WriteFile(p, nil, 0o600) }); err != nil {
		t.Fatal(err)
	}
	st := stat(t, p)
	if int(st.Uid) != u.UID || int(st.Gid) != u.GID {
		t.Errorf("new file owned by %d:%d; want %d:%d", st.Uid, st.Gid, u.UID, u.GID)
	}
}

func TestDoReturnsTheWorksError(t *testing.T) {
	a, _ := sudoActor(t)
	want := errors.New("work failed")
	if err := a.Do(func() error { return want }); !errors.Is(err, want) {
		t.Errorf("err = %v; want the work's error", err)
	}
}

// TestDoChangesOneThread holds the user's rights while it looks at every
// thread of the process, some of them started during the work: exactly
// one has the user's fsuid and no capabilities, and afterwards none.
func TestDoChangesOneThread(t *testing.T) {
	a, _ := sudoActor(t)
	// Starting a process with SysProcAttr.Credential (an earlier test)
	// clears dumpable: the vforked child shares the mm while it setuids.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	var userThreads []string
	err := a.Do(func() error {
		// Blocking system calls on other goroutines make the runtime start
		// threads now, while this one has the user's rights.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				var ts unix.Timespec = unix.NsecToTimespec(int64(20 * time.Millisecond))
				_ = unix.Nanosleep(&ts, nil)
			})
		}
		wg.Wait()
		var err error
		userThreads, err = threadsWithFSUID(a.UID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(userThreads) != 1 {
		t.Fatalf("%d threads had the user's fsuid during the work, want 1: %v", len(userThreads), userThreads)
	}
	after, err := threadsWithFSUID(a.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 0 {
		t.Fatalf("threads %v keep the user's fsuid after Do", after)
	}
	// The kernel marks the process not dumpable when a thread's fsuid
	// changes; Do gives back what it found.
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 1 {
		t.Errorf("dumpable %d (%v) after Do, want 1", d, err)
	}
}

// TestDoLeavesRootsGoroutinesAlone runs many Do calls while other
// goroutines read a root-only file: no read may fail, during the work or
// after it on a thread the work gave back.
func TestDoLeavesRootsGoroutinesAlone(t *testing.T) {
	a, u := sudoActor(t)
	f := newFixture(t, u)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var failures sync.Map
	reads := make([]int, 4)
	for i := range reads {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := os.ReadFile(f.rootOnly); err != nil {
					failures.Store(err.Error(), true)
				}
				reads[i]++
			}
		})
	}
	var dos sync.WaitGroup
	for range 4 {
		dos.Go(func() {
			for range 100 {
				err := a.Do(func() error {
					if _, err := os.ReadFile(f.rootOnly); !errors.Is(err, unix.EACCES) {
						return fmt.Errorf("user read root's file: %v", err)
					}
					return nil
				})
				if err != nil {
					failures.Store(err.Error(), true)
				}
			}
		})
	}
	dos.Wait()
	close(stop)
	readers.Wait()
	failures.Range(func(k, _ any) bool {
		t.Error(k)
		return true
	})
	total := 0
	for _, n := range reads {
		total += n
	}
	if total == 0 {
		t.Fatal("the root readers never ran")
	}
	t.Logf("400 Do calls beside %d reads as root", total)
}

// threadsWithFSUID lists the threads whose fsuid is uid, checking that
// each of them has no effective capabilities.
func threadsWithFSUID(uid uint32) ([]string, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var found []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return nil, err
		}
		fields := statusFields(string(b))
		ids := strings.Fields(fields["Uid"])
		if len(ids) != 4 {
			return nil, fmt.Errorf("task %s: Uid line %q", task.Name(), fields["Uid"])
		}
		if ids[3] != strconv.FormatUint(uint64(uid), 10) {
			continue
		}
		if eff := fields["CapEff"]; strings.Trim(eff, "0") != "" {
			return nil, fmt.Errorf("task %s has the user's fsuid and capabilities %s", task.Name(), eff)
		}
		found = append(found, task.Name())
	}
	return found, nil
}

func statusFields(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func stat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}

// searchableTempDir is t.TempDir with mode perm, under a parent that
// other users may search (the testing package makes that one 0700).
func searchableTempDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.Chmod(filepath.Dir(dir), 0o711))
	must(t, os.Chmod(dir, perm))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCommandActorUnderUserFlag(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	a, err := Resolve(u.Name, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if !a.IsRoot() || a.Command.UID != uint32(u.UID) || !a.SwitchCommand {
		t.Fatalf("--user %s on a root login: acts for %d, command %d", u.Name, a.UID, a.Command.UID)
	}
	f := newFixture(t, u)
	if err := a.Do(func() error { _, err := os.ReadFile(f.rootOnly); return err }); err != nil {
		t.Errorf("root login reads root's file: %v", err)
	}
	c := a.CommandActor()
	if err := c.Do(func() error { _, err := os.ReadFile(f.rootOnly); return err }); !errors.Is(err, unix.EACCES) {
		t.Errorf("the command's rights read root's file: err %v, want EACCES", err)
	}
}

// BenchmarkDo is the cost of taking and giving back a user's rights.
func BenchmarkDo(b *testing.B) {
	testenv.RequireRoot(b)
	u := testuser.Create(b)
	a, err := Resolve("", u.SudoEnv(os.Getenv))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := a.Do(func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
