package record

import (
	"fmt"
	"path"
)

// Name is how every consumer names the file: its path, or its device and
// inode when no path was resolved. It is also the key a comparison of two
// records matches files by.
func (f File) Name() string {
	if f.Path != "" {
		return f.Path
	}
	return fmt.Sprintf("(dev %d:%d inode %d)", f.Dev>>20, f.Dev&(1<<20-1), f.Ino)
}

// Name is how every consumer names the process: its comm, else the base
// name of its executable, else "?".
func (p Process) Name() string {
	if p.Comm != "" {
		return p.Comm
	}
	if p.Exe != "" {
		return path.Base(p.Exe)
	}
	return "?"
}

// FileByID finds a file by its ID: at its position when the record keeps
// the documented layout, else by search; nil when there is none.
func (r *Record) FileByID(id int) *File {
	if id >= 0 && id < len(r.Files) && r.Files[id].ID == id {
		return &r.Files[id]
	}
	for i := range r.Files {
		if r.Files[i].ID == id {
			return &r.Files[i]
		}
	}
	return nil
}
