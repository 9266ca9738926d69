package gitree

import (
	"io"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/backends/gitree/internal/pack"
	"github.com/capfs/capfs/vfs"
)

// An open blob (or directory) of an FS is an rofile.File: a blob up to the FS's
// stream threshold is held in memory whole, and reads never touch the repository
// again; a larger one is streamed from the object store by a streamSource: from
// its pack ([pack.Store.Stream]) or, for an object in no pack, through go-git.

// readOnlyMsg is what writes to an open file fail with.
const readOnlyMsg = "git revision is read-only"

// streamSource reads a large blob from the object store, through the blob source
// chosen at the first read.
type streamSource struct {
	r    *repoState
	hash plumbing.Hash
	size int64
	path vfs.Path
	src  pack.Blob // nil until the first read
}

func (s *streamSource) ReadAt(b []byte, off int64) (int, error) {
	if s.src == nil {
		src, err := s.r.openStream(s.hash, s.size)
		if err != nil {
			return 0, vfs.Errno("read", s.path, err)
		}
		s.src = src
	}
	n, err := s.src.ReadAt(b, off)
	if err != nil {
		return n, vfs.Errno("read", s.path, err)
	}
	return n, nil
}

func (s *streamSource) Close() error {
	if s.src != nil {
		s.src.Close()
		s.src = nil
	}
	return nil
}

// openStream chooses how blob h, of the given size, is streamed: from its
// pack, or through go-git for a blob in no pack the reader knows.
func (r *repoState) openStream(h plumbing.Hash, size int64) (pack.Blob, error) {
	b, err := r.packs.Stream(h, size)
	if err == pack.ErrNotPacked {
		return &goGitBlob{r: r, hash: h}, nil
	}
	return b, err
}

// goGitBlob reads a blob through go-git's object reader.
type goGitBlob struct {
	r      *repoState
	hash   plumbing.Hash
	stream io.ReadCloser // positioned at spos; nil until needed
	spos   int64
}

// readAt fills b from the blob at off. A read at or after the stream's position
// skips forward; one before it reopens the object.
func (g *goGitBlob) ReadAt(b []byte, off int64) (int, error) {
	if err := g.r.lock(); err != nil {
		return 0, err
	}
	defer g.r.mu.Unlock()
	if g.stream == nil || off < g.spos {
		if g.stream != nil {
			g.stream.Close()
			g.stream = nil
		}
		o, err := g.r.store.EncodedObject(plumbing.BlobObject, g.hash)
		if err != nil {
			return 0, err
		}
		rd, err := o.Reader()
		if err != nil {
			return 0, err
		}
		g.stream, g.spos = rd, 0
	}
	if off > g.spos {
		k, err := io.CopyN(io.Discard, g.stream, off-g.spos)
		g.spos += k
		if err != nil {
			return 0, err
		}
	}
	n, err := io.ReadFull(g.stream, b)
	g.spos += int64(n)
	return n, err
}

func (g *goGitBlob) Close() {
	if g.stream != nil {
		g.r.mu.Lock() // the stream may read through descriptors the store shares
		g.stream.Close()
		g.r.mu.Unlock()
		g.stream = nil
	}
}
