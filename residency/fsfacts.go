package residency

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/internal/fstype"
)

// Survival says whether a cache directory outlives the machine's reboot
// or the container it is in: decided by its filesystem, not its path.
type Survival string

const (
	// Persistent: an ordinary disk filesystem, no ageing rule.
	Persistent Survival = "persistent"
	// LostAtReboot: tmpfs or ramfs.
	LostAtReboot Survival = "lost at reboot"
	// ContainerLayer: an overlay filesystem's upper directory, the
	// writable layer of a container, lost when the container is replaced.
	ContainerLayer Survival = "container layer"
	// Aged: a systemd-tmpfiles rule removes entries unused for a while.
	Aged Survival = "aged"
)

// FSFacts are the facts about a cache root's filesystem.
type FSFacts struct {
	// FS names the filesystem ("ext4", "tmpfs", "overlay").
	FS string `json:"fs"`
	// Missing is set when the root does not exist: the facts are those
	// of its nearest existing ancestor, where it would be created.
	Missing  bool     `json:"missing,omitempty"`
	Survival Survival `json:"survival"`
	// Age is the tmpfiles rule that ages the root, when Survival is Aged
	// (or when a volatile root has one too).
	Age *AgeRule `json:"age,omitempty"`
}

// Sentence says what the facts mean for the next run.
func (f FSFacts) Sentence() string {
	switch f.Survival {
	case LostAtReboot:
		return f.FS + ": lost at reboot"
	case ContainerLayer:
		return "overlay: a container's writable layer, lost when the container is replaced"
	case Aged:
		return fmt.Sprintf("%s: entries unused for %s are removed (systemd-tmpfiles, %s)", f.FS, f.Age.Age, f.Age.Source)
	}
	return f.FS + ": persistent"
}

// RootFacts describes the filesystem of root and whether a cache there
// survives.
func RootFacts(root string, rules TmpfilesRules) (FSFacts, error) {
	var f FSFacts
	magic, missing, err := fstype.Of(filepath.Clean(root))
	if err != nil {
		return f, err
	}
	f.FS, f.Missing = fstype.Name(magic), missing
	switch {
	case fstype.Volatile(magic):
		f.Survival = LostAtReboot
	case fstype.ContainerLayer(magic):
		f.Survival = ContainerLayer
	default:
		f.Survival = Persistent
	}
	if r, ok := rules.AgeOf(filepath.Clean(root)); ok {
		f.Age = &r
		if f.Survival == Persistent {
			f.Survival = Aged
		}
	}
	return f, nil
}

// DefaultTmpfilesDirs are systemd-tmpfiles' configuration directories,
// highest precedence first.
var DefaultTmpfilesDirs = []string{"/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/lib/tmpfiles.d"}

// AgeRule is one systemd-tmpfiles line that ages a directory's contents.
type AgeRule struct {
	Path   string `json:"path"`
	Age    string `json:"age"`
	Source string `json:"source"` // file:line
}

// TmpfilesRules are the ageing and exclusion rules of systemd-tmpfiles.
type TmpfilesRules struct {
	age     []AgeRule
	exclude []string // x and X globs
}

// LoadTmpfiles reads the *.conf files of dirs (highest precedence first:
// a file name in an earlier directory hides the same name in later ones),
// in the order systemd-tmpfiles reads them: sorted by file name. Lines
// with specifiers (%h, %t…) depend on a user session and are skipped.
func LoadTmpfiles(dirs []string) (TmpfilesRules, error) {
	byName := map[string]string{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return TmpfilesRules{}, fmt.Errorf("tmpfiles rules: %w", err)
		}
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".conf") {
				continue
			}
			if _, hidden := byName[e.Name()]; !hidden {
				byName[e.Name()] = filepath.Join(d, e.Name())
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var rules TmpfilesRules
	seenAge := map[string]bool{}
	for _, n := range names {
		file := byName[n]
		f, err := os.Open(file)
		if err != nil {
			return rules, fmt.Errorf("tmpfiles rules: %w", err)
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.Contains(fields[1], "%") {
				continue
			}
			typ := strings.TrimRight(fields[0], "!-+=~^")
			p := strings.Trim(fields[1], `"'`)
			switch typ {
			case "x", "X":
				rules.exclude = append(rules.exclude, p)
			case "d", "D", "e", "v", "q", "Q", "C":
				if len(fields) < 6 || fields[5] == "-" || seenAge[p] {
					continue
				}
				// The first rule for a path wins, as in systemd-tmpfiles.
				seenAge[p] = true
				rules.age = append(rules.age, AgeRule{Path: path.Clean(p), Age: strings.TrimPrefix(fields[5], "~"),
					Source: fmt.Sprintf("%s:%d", file, line)})
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return rules, fmt.Errorf("tmpfiles rules %s: %w", file, err)
		}
	}
	return rules, nil
}

// AgeOf returns the rule that ages dir: the deepest ageing rule whose
// path is dir or an ancestor of it, unless an x/X rule excludes dir or a
// directory between.
func (r TmpfilesRules) AgeOf(dir string) (AgeRule, bool) {
	var best AgeRule
	found := false
	for _, a := range r.age {
		if (dir == a.Path || strings.HasPrefix(dir, strings.TrimSuffix(a.Path, "/")+"/")) && len(a.Path) > len(best.Path) {
			best, found = a, true
		}
	}
	if !found {
		return AgeRule{}, false
	}
	for d := dir; len(d) >= len(best.Path); d = path.Dir(d) {
		for _, x := range r.exclude {
			if ok, _ := path.Match(x, d); ok {
				return AgeRule{}, false
			}
		}
		if d == "/" {
			break
		}
	}
	return best, true
}
