package outfile

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// Output is an output path and the flag that named it ("--json", "-o"),
// for the error messages.
type Output struct {
	Flag string
	Path string
}

func (o Output) label() string {
	if o.Flag == "" {
		return "output"
	}
	return o.Flag
}

// fileID says when two output paths are one file: the inode of an
// existing file, or the directory inode and name of a file to come.
type fileID struct {
	stdout   bool
	dev, ino uint64
	name     string
}

// Check fails when an output could not be written at the end of a run,
// before the run: an empty path, a path that is not a regular file, a
// file or directory the acting user may not write, or one file named by
// two outputs (compared by inode, so a/x and b/x with b a link to a are
// one file; two "-" are one stdout). It creates and removes a temporary
// file where an output is still to be created, as the acting user.
func Check(a actor.Actor, outs ...Output) error {
	seen := map[fileID]Output{}
	for _, o := range outs {
		if o.Path == "" {
			return fmt.Errorf("%s: empty path (use - for stdout)", o.label())
		}
		id := fileID{stdout: true}
		if o.Path != Stdout {
			err := a.Do(func() error {
				var err error
				id, err = inspect(o.Path)
				return err
			})
			if err != nil {
				return explain(a, o, err)
			}
		}
		if prev, ok := seen[id]; ok {
			if id.stdout {
				return fmt.Errorf("%s and %s both write to stdout; give one of them a file", prev.label(), o.label())
			}
			return fmt.Errorf("%s %s and %s %s are the same file; give each output its own path",
				prev.label(), prev.Path, o.label(), o.Path)
		}
		seen[id] = o
	}
	return nil
}

// inspect checks one output path with the acting user's rights and says
// which file it is.
func inspect(path string) (fileID, error) {
	dir, err := openParent(path)
	if err != nil {
		return fileID{}, err
	}
	defer dir.close()
	var st unix.Stat_t
	err = unix.Fstatat(dir.fd, dir.base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		tmp, err := dir.createTemp()
		if err != nil {
			return fileID{}, fmt.Errorf("cannot create files in %s: %w", dir.name, err)
		}
		if err := dir.discard(tmp, nil); err != nil {
			return fileID{}, err
		}
		var dst unix.Stat_t
		if err := unix.Fstat(dir.fd, &dst); err != nil {
			return fileID{}, err
		}
		return fileID{dev: dst.Dev, ino: dst.Ino, name: dir.base}, nil
	case err != nil:
		return fileID{}, err
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fileID{}, &NotRegularError{Path: path, Kind: kindOf(st.Mode)}
	}
	if err := dir.mayWrite(); err != nil {
		return fileID{}, fmt.Errorf("cannot write the file: %w", err)
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// explain turns err into one line that names the output and, under sudo,
// whose rights were missing.
func explain(a actor.Actor, o Output, err error) error {
	var nr *NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("%s: %w", o.label(), err)
	}
	if a.Via != "" && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		return fmt.Errorf("%s %s: %w (as %s, who ran %s)", o.label(), o.Path, err, a.Name, a.Via)
	}
	return fmt.Errorf("%s %s: %w", o.label(), o.Path, err)
}
