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
// the documented layout, else through the index Decode built (a record
// with its ids out of place: a search per lookup made report quadratic
// in the files); nil when there is none. A record built in memory with
// ids out of place, or whose files changed after decoding, is searched.
func (r *Record) FileByID(id int) *File {
	if id >= 0 && id < len(r.Files) && r.Files[id].ID == id {
		return &r.Files[id]
	}
	if r.fileIndex != nil && len(r.fileIndex) == len(r.Files) {
		if i, ok := r.fileIndex[id]; ok && r.Files[i].ID == id {
			return &r.Files[i]
		} else if !ok {
			return nil
		}
	}
	for i := range r.Files {
		if r.Files[i].ID == id {
			return &r.Files[i]
		}
	}
	return nil
}

// indexFiles refuses two files with the same id and, when some file is
// not at the position its id names, indexes the files by id for
// FileByID. Called once, by Decode, before the record is shared, so the
// index needs no lock.
func (r *Record) indexFiles() error {
	inPlace := true
	for i := range r.Files {
		if r.Files[i].ID != i {
			inPlace = false
			break
		}
	}
	if inPlace {
		return nil // ids are positions: unique, and found without an index
	}
	idx := make(map[int]int, len(r.Files))
	for i := range r.Files {
		id := r.Files[i].ID
		if j, dup := idx[id]; dup {
			return fmt.Errorf("corrupt record: files[%d] and files[%d] both have id %d; a file id names one file", j, i, id)
		}
		idx[id] = i
	}
	r.fileIndex = idx
	return nil
}
