package gitree

import (
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/vfs"
)

// An open blob (or directory) of an FS is an rofile.File: a blob up to the FS's
// stream threshold is held in memory whole, and reads never touch the repository
// again; a larger one is streamed from the object store by a streamSource (see
// blobSource).

// readOnlyMsg is what writes to an open file fail with.
const readOnlyMsg = "git revision is read-only"

// streamSource reads a large blob from the object store, through the blob source
// chosen at the first read (see blobSource).
type streamSource struct {
	r    *repoState
	hash plumbing.Hash
	size int64
	path vfs.Path
	src  blobSource // nil until the first read
}

func (s *streamSource) ReadAt(b []byte, off int64) (int, error) {
	if s.src == nil {
		src, err := s.r.openStream(s.hash, s.size)
		if err != nil {
			return 0, vfs.Errno("read", s.path, err)
		}
		s.src = src
	}
	n, err := s.src.readAt(b, off)
	if err != nil {
		return n, vfs.Errno("read", s.path, err)
	}
	return n, nil
}

func (s *streamSource) Close() error {
	if s.src != nil {
		s.src.close()
		s.src = nil
	}
	return nil
}
