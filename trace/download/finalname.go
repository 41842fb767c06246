package download

import "github.com/coldtrace/coldtrace/internal/filehandle"

// Final names: a downloader writes under a temporary name and renames
// into place, often into another directory (a Hugging Face blob's
// ".incomplete" in a staging directory, then blobs/<sha256>). While a
// download runs, every regular file its process has open gets a file
// handle (internal/filehandle); at the end the kernel says where each
// is now, or that it was deleted. Files that got no handle fall back to
// a scan of the directory they were written in.

// maxHandles bounds the handles kept: a process with thousands of files
// open costs no more than this many.
const maxHandles = 4096

func newHandles() *filehandle.Store { return filehandle.New(maxHandles) }

func handleKey(k FileKey) filehandle.Key { return filehandle.Key{Dev: k.Dev, Ino: k.Ino} }

// finalNames opens every handle in hs to find where each file is now.
func finalNames(hs *filehandle.Store) map[FileKey]finalName {
	out := make(map[FileKey]finalName, hs.Len())
	for _, k := range hs.Keys() {
		path, gone, err := hs.Resolve(k)
		if err != nil {
			continue
		}
		out[FileKey{Dev: k.Dev, Ino: k.Ino}] = finalName{path: path, first: hs.First(k), gone: gone}
	}
	return out
}
