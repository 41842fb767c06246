package pagecache

import (
	"github.com/coldtrace/coldtrace/internal/filehandle"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// maxHandles bounds the file handles kept for files the run created: a
// build that writes a hundred thousand files costs no more than this
// many name_to_handle_at calls and handles.
const maxHandles = 16384

// followRename names rf, a file no longer at its path at the end of the
// run, by where its handle (taken when the run created it) finds it now:
// a file written under a temporary name and renamed, in any directory,
// is named by its final name, its first name in FirstPath. A file seen
// through another mount namespace (HostPath set) keeps its names.
func (s *Sensor) followRename(key probe.FileKey, rf *record.File) {
	if rf.HostPath != "" {
		return
	}
	path, gone, err := s.handles.Resolve(filehandle.Key{Dev: key.Dev, Ino: key.Ino})
	if err != nil || gone || path == rf.Path {
		return
	}
	rf.FirstPath, rf.Path = rf.Path, path
	if size, ok := statMatches(path, key.Ino); ok {
		rf.SizeBytes = size
	}
}
