package overlay

import (
	"context"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/capfs/capfs/vfs"
)

// Readers across copy-up. A lower file a process opened for reading is
// read through the lower's File. The first change to the file copies it up,
// and the change lands in the copy. A reader left on the lower file would
// keep the old contents and size for as long as it stays open (tail -f, a
// watcher, a language server): overlayfs's rule, which this overlay does
// not follow. Here the copy-up is the same file changing: each lower
// reader open on the path copied is given the copy, opened for reading,
// and reads it from then on at the offset it had (lowerReader). The overlay
// makes every copy-up itself, so it knows whom to tell: the readers open on
// each lower path, kept by path (readers). A reader opened while the copy
// was made, which the copy-up's telling missed, finds the copy itself (see
// openLower).

// readers holds the lower regular files open for reading, by path.
type readers struct {
	mu     sync.Mutex
	byPath map[string]*lowerReader // the first of each path's list
	// copies counts the copy-ups told (under mu): an open that sees it
	// move while it registers may have been missed.
	copies atomic.Uint64
}

// lowerReader is a lower regular file opened for reading, which reads the
// upper copy once the overlay makes one (see above). Its Stat is the
// file's it reads; its OpenStat and Type the lower file's at its open. It
// withholds the lower's host descriptor and [vfs.AttrFile] (see lowerFile).
type lowerReader struct {
	low vfs.File
	rs  *readers
	key string // the path it was opened by
	id  uint64 // the lower file's ID at open
	up  atomic.Pointer[upperCopy]

	mu     sync.Mutex // orders sequential reads, seeks, the switch and Close
	moved  bool       // the upper copy's offset is the reader's
	closed bool

	prev, next *lowerReader // the path's list, under readers.mu
}

// upperCopy is the upper copy a lowerReader was given.
type upperCopy struct{ f vfs.File }

// file is the File positional calls use: the upper copy once given, else
// the lower file.
func (r *lowerReader) file() vfs.File {
	if c := r.up.Load(); c != nil {
		return c.f
	}
	return r.low
}

// seq is the File sequential calls use: file, the upper copy taking the
// lower's offset at its first use. r.mu is held.
func (r *lowerReader) seq() vfs.File {
	c := r.up.Load()
	if c == nil {
		return r.low
	}
	if !r.moved {
		r.moved = true
		if off, err := r.low.Seek(0, io.SeekCurrent); err == nil {
			_, _ = c.f.Seek(off, io.SeekStart)
		}
	}
	return c.f
}

func (r *lowerReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq().Read(p)
}

func (r *lowerReader) Seek(off int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq().Seek(off, whence)
}

func (r *lowerReader) ReadAt(p []byte, off int64) (int, error) { return r.file().ReadAt(p, off) }

// Write, WriteAt, Truncate and Sync are the lower file's: it was opened for
// reading, and refuses a change.
func (r *lowerReader) Write(p []byte) (int, error)              { return r.low.Write(p) }
func (r *lowerReader) WriteAt(p []byte, off int64) (int, error) { return r.low.WriteAt(p, off) }
func (r *lowerReader) Truncate(size int64) error                { return r.low.Truncate(size) }
func (r *lowerReader) Sync() error                              { return r.low.Sync() }

// Stat describes the file as it is now: the upper copy once given.
func (r *lowerReader) Stat() (vfs.Info, error) {
	info, err := r.file().Stat()
	return ownerless(info), err
}

// OpenStat is the lower file's status at its open (see [vfs.OpenStater]).
func (r *lowerReader) OpenStat() (vfs.Info, bool) {
	info, ok := r.low.(vfs.OpenStater).OpenStat()
	return ownerless(info), ok
}

// Type forwards to the lower's file (see [vfs.TypedFile]).
func (r *lowerReader) Type() fs.FileMode { return r.low.(vfs.TypedFile).Type() }

// give hands r the upper copy f; f is closed if r was closed meanwhile.
func (r *lowerReader) give(f vfs.File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.up.Load() != nil {
		f.Close()
		return
	}
	r.up.Store(&upperCopy{f: f})
}

// Close closes the lower file and the upper copy; the overlay forgets r.
func (r *lowerReader) Close() error {
	r.rs.drop(r)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.low.Close()
	}
	r.closed = true
	if c := r.up.Load(); c != nil {
		c.f.Close()
	}
	return r.low.Close()
}

// add puts r on its path's list, and reports whether a copy-up was told
// since count gen (r may have missed it).
func (rs *readers) add(r *lowerReader, gen uint64) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byPath == nil {
		rs.byPath = map[string]*lowerReader{}
	}
	if head := rs.byPath[r.key]; head != nil {
		r.next, head.prev = head, r
	}
	rs.byPath[r.key] = r
	return rs.copies.Load() != gen
}

// drop takes r off its path's list.
func (rs *readers) drop(r *lowerReader) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case r.prev != nil:
		r.prev.next = r.next
	case rs.byPath[r.key] == r && r.next != nil:
		rs.byPath[r.key] = r.next
	case rs.byPath[r.key] == r:
		delete(rs.byPath, r.key)
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
}

// of lists the readers open on path key that read the lower file lowID and
// have no upper copy yet, counting a copy-up told.
func (rs *readers) of(key string, lowID uint64) []*lowerReader {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.copies.Add(1)
	var out []*lowerReader
	for r := rs.byPath[key]; r != nil; r = r.next {
		if r.id == lowID && r.up.Load() == nil {
			out = append(out, r)
		}
	}
	return out
}

// openLower opens lower entry p (info its Lstat, found in the lower after
// the count of copy-ups told was gen) for reading: a regular file as a
// lowerReader, which follows the copy-up of p. If a copy-up was told while
// it opened, the upper is asked whether p was copied from this file.
func (o *Overlay) openLower(ctx context.Context, p vfs.Path, info vfs.Info, gen uint64, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := o.lower.OpenFile(ctx, p.Unresolved(), flag, perm)
	if err != nil {
		return nil, err
	}
	if !info.Mode.IsRegular() {
		return lowerOf(f), nil
	}
	r := &lowerReader{low: f, rs: &o.readers, key: p.Raw(), id: info.ID}
	if o.readers.add(r, gen) {
		o.catchUp(ctx, r, p)
	}
	return vfs.WrapFile(r, f), nil
}

// catchUp gives r the upper copy of p if the upper holds one made from the
// lower file r reads (a copy-up that ran while r opened).
func (o *Overlay) catchUp(ctx context.Context, r *lowerReader, p vfs.Path) {
	info, err := o.upper.Lstat(ctx, p)
	if err != nil || !info.Mode.IsRegular() || o.origin.id(info.ID) != r.id {
		return
	}
	if f, err := o.upperFile(o.upper.OpenFile(ctx, p, os.O_RDONLY, 0)); err == nil {
		r.give(f)
	}
}

// tellReaders gives each reader open on lower file p (lowID its ID) the
// upper copy just made of it. o.mu is held.
func (o *Overlay) tellReaders(ctx context.Context, p vfs.Path, lowID uint64) {
	ctx = context.WithoutCancel(ctx) // the copy is made: its readers follow it
	for _, r := range o.readers.of(p.Raw(), lowID) {
		if f, err := o.upperFile(o.upper.OpenFile(ctx, p, os.O_RDONLY, 0)); err == nil {
			r.give(f)
		}
	}
}
