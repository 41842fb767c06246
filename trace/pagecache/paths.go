package pagecache

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/coldtrace/coldtrace/internal/mountinfo"
)

// kernelDev encodes major:minor the way the kernel stores s_dev
// (MINORBITS = 20), which is what the BPF side reports.
func kernelDev(major, minor uint32) uint32 { return major<<20 | minor }

func devMajorMinor(dev uint32) (uint32, uint32) { return dev >> 20, dev & (1<<20 - 1) }

// userDevToKernel converts a stat(2) st_dev to the kernel encoding.
func userDevToKernel(dev uint64) uint32 {
	major := uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff)
	minor := uint32(dev&0xff) | uint32((dev>>12)&^0xff)
	return kernelDev(major, minor)
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	dev        uint32
	root       string // path inside the filesystem that is mounted
	mountPoint string
	fsType     string
}

// mountTable maps devices to where their filesystems are mounted.
type mountTable map[uint32][]mount

func readMountTable(file string) (mountTable, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	return parseMountTable(f)
}

// parseMountTable parses a mountinfo file.
func parseMountTable(f io.Reader) (mountTable, error) {
	mt := mountTable{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m, ok := parseMountInfoLine(sc.Text())
		if ok {
			mt[m.dev] = append(mt[m.dev], m)
		}
	}
	return mt, sc.Err()
}

func parseMountInfoLine(line string) (mount, bool) {
	m, ok := mountinfo.Parse(line)
	if !ok {
		return mount{}, false
	}
	return mount{dev: kernelDev(m.Major, m.Minor), root: m.Root, mountPoint: m.MountPoint, fsType: m.FSType}, true
}

// fsType is the type of the filesystem of dev, "" when no mount shows it.
func (mt mountTable) fsType(dev uint32) string {
	for _, m := range mt[dev] {
		if m.fsType != "" {
			return m.fsType
		}
	}
	return ""
}

// resolve turns a path inside the filesystem of dev into an absolute path,
// preferring the mount that shows the most of the filesystem.
func (mt mountTable) resolve(dev uint32, fsPath string) (string, bool) {
	best, bestLen := "", -1
	for _, m := range mt[dev] {
		if !strings.HasPrefix(fsPath+"/", strings.TrimSuffix(m.root, "/")+"/") {
			continue
		}
		rest := strings.TrimPrefix(fsPath, strings.TrimSuffix(m.root, "/"))
		p := path.Join(m.mountPoint, rest)
		// Shorter mount roots show more of the filesystem; among equals
		// the shortest mount point is the canonical one.
		score := 1<<20 - len(m.root)*1024 - len(m.mountPoint)
		if score > bestLen {
			best, bestLen = p, score
		}
	}
	return best, bestLen >= 0
}

// boundTwice are the devices of which one mount's root holds another's
// (a directory bind-mounted elsewhere on the same filesystem): a file
// under the inner root has a name through each, and only its reader's
// path says which it used. Mounts of distinct, unnested roots (the single
// files a container runtime binds: /etc/hosts, /etc/resolv.conf) name
// each file once.
func (mt mountTable) boundTwice() []uint32 {
	var devs []uint32
	for dev, ms := range mt {
	pairs:
		for i, a := range ms {
			for _, b := range ms[i+1:] {
				ra, rb := strings.TrimSuffix(a.root, "/")+"/", strings.TrimSuffix(b.root, "/")+"/"
				if a.mountPoint == b.mountPoint && ra == rb {
					continue // one mount stacked on its like: one name
				}
				if strings.HasPrefix(ra, rb) || strings.HasPrefix(rb, ra) {
					devs = append(devs, dev)
					break pairs
				}
			}
		}
	}
	slices.Sort(devs)
	return devs
}

// fsPathFromNames joins dentry names reported leaf first.
func fsPathFromNames(names []string, truncated bool) string {
	var b strings.Builder
	if truncated {
		b.WriteString("…")
	}
	for i := len(names) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(names[i])
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// findInProc looks for (dev, ino) among the open files and mappings of pid,
// the fallback for files whose dentry could not be walked.
func findInProc(pid int32, dev uint32, ino uint64) string {
	dir := fmt.Sprintf("/proc/%d", pid)
	if entries, err := os.ReadDir(dir + "/fd"); err == nil {
		for _, e := range entries {
			link := dir + "/fd/" + e.Name()
			var st syscall.Stat_t
			if syscall.Stat(link, &st) != nil {
				continue
			}
			if st.Ino == ino && userDevToKernel(st.Dev) == dev {
				if target, err := os.Readlink(link); err == nil {
					return target
				}
			}
		}
	}
	f, err := os.Open(dir + "/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		maj, min, _ := strings.Cut(fields[3], ":")
		ma, _ := strconv.ParseUint(maj, 16, 32)
		mi, _ := strconv.ParseUint(min, 16, 32)
		in, _ := strconv.ParseUint(fields[4], 10, 64)
		if in == ino && kernelDev(uint32(ma), uint32(mi)) == dev {
			return strings.Join(fields[5:], " ")
		}
	}
	return ""
}

// statMatches reports the size of path when it is still the same inode.
// Only the inode number is compared: overlay and similar filesystems
// report their own st_dev, not the s_dev the kernel side saw.
func statMatches(p string, ino uint64) (int64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, false
	}
	if st.Ino != ino {
		return 0, false
	}
	return st.Size, true
}
