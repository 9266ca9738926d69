package sqlite

import (
	"database/sql"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/capfs/capfs/vfs"
)

// maxSize is the largest file the chunk keys can address.
func (s *store) maxSize() int64 {
	m := s.chunk << chunkBits
	if s.cfg.maxFile > 0 {
		m = min(m, s.cfg.maxFile)
	}
	return m
}

// handle is an open file or directory: its own offset over a shared node.
type handle struct {
	st     *store
	n      *node
	path   string
	mu     sync.Mutex // guards off and closed
	off    int64
	closed bool
	read   bool
	write  bool
	append bool
	cache  chunkCache // guarded by mu
	// pending is the batch of the file's creation, not waited for by OpenFile
	// (see OpenFile); Write, Truncate, Sync and Close see it committed.
	pending *batch // guarded by mu
}

// chunkCache is the last chunk a handle read, valid while the node's data
// version (node.dirty) is unchanged: small sequential reads cost one query per
// chunk, not one per read.
type chunkCache struct {
	ok   bool
	id   int64
	ver  uint64
	data []byte
}

var _ vfs.File = (*handle)(nil)

// newHandle counts an open on n. The caller holds the tree lock.
func (s *store) newHandle(n *node, p vfs.Path, acc, flag int) *handle {
	n.mu.Lock()
	n.opens++
	n.mu.Unlock()
	return &handle{
		st: s, n: n, path: p.Raw(),
		read:   acc != os.O_WRONLY,
		write:  acc != os.O_RDONLY,
		append: flag&os.O_APPEND != 0,
	}
}

func (h *handle) p() vfs.Path {
	if h.path == "" {
		return vfs.Root
	}
	p, _ := vfs.ParseGuest(h.path)
	return p
}

func (h *handle) fail(code vfs.Code, op, msg string) error {
	return vfs.NewError(code, op, h.p(), msg)
}

// check returns the error for op through h: closed, a directory, the wrong
// access mode, or an unusable store. The caller holds h.mu.
func (h *handle) check(op string, write bool) error {
	switch {
	case h.closed:
		return h.fail(vfs.CodeClosed, op, "")
	case h.n.typ == fs.ModeDir:
		return h.fail(vfs.CodeIsDir, op, "")
	case write && !h.write:
		return h.fail(vfs.CodePermission, op, "file not open for writing")
	case !write && !h.read:
		return h.fail(vfs.CodePermission, op, "file not open for reading")
	}
	return h.st.usable(op, h.p(), write)
}

// Read reads from the handle's offset and advances it.
func (h *handle) Read(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check("read", false); err != nil {
		return 0, err
	}
	n, err := h.st.readAt(h.n, b, h.off, h.p, &h.cache)
	h.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads at off without moving the offset; a short read returns io.EOF.
func (h *handle) ReadAt(b []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "read", "negative offset")
	}
	return h.st.readAt(h.n, b, off, h.p, &h.cache)
}

// readAt reads n's data at off: from the reader pool when n has no uncommitted
// change, else through the write connection, which sees the open batch. A read
// within one chunk goes through cache (nil for none).
func (s *store) readAt(n *node, b []byte, off int64, p func() vfs.Path, cache *chunkCache) (int, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	size := n.size
	if off >= size {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	end := min(off+int64(len(b)), size)
	want := b[:end-off]
	clear(want)
	if len(want) > 0 {
		if err := s.readRange(n, want, off, end, cache); err != nil {
			return 0, storageError("read", p(), err)
		}
	}
	if int64(len(b)) > end-off {
		return len(want), io.EOF
	}
	return len(want), nil
}

// readRange reads n's bytes [off, end) into want (holes stay zero): a read
// within one chunk from cache or the shared data cache when either holds
// it, else from the database, filling both with the chunk read.
func (s *store) readRange(n *node, want []byte, off, end int64, cache *chunkCache) error {
	lo := n.ino<<chunkBits | off/s.chunk
	hi := n.ino<<chunkBits | (end-1)/s.chunk
	fill := func(id int64, data []byte) {
		cstart := (id & (1<<chunkBits - 1)) * s.chunk
		// The part of this chunk that falls in [off, end).
		from := max(off, cstart)
		to := min(end, cstart+int64(len(data)))
		if to > from {
			copy(want[from-off:], data[from-cstart:to-cstart])
		}
	}
	if cache != nil && lo == hi && cache.ok && cache.id == lo && cache.ver == n.dirty {
		fill(lo, cache.data)
		return nil
	}
	if lo == hi && s.cache.get(lo, n.dirty, fill) {
		return nil // from the shared data cache
	}
	if cache == nil || lo != hi {
		err := s.scanRange(n, lo, hi, fill)
		if err != nil && cache != nil {
			cache.ok = false
		}
		return err
	}
	// Fill the cache with the chunk (or nothing, for a hole), then copy from
	// it.
	cache.ok, cache.id, cache.ver, cache.data = false, lo, n.dirty, cache.data[:0]
	err := s.scanRange(n, lo, hi, func(id int64, data []byte) {
		cache.data = append(cache.data, data...)
		fill(id, cache.data)
	})
	if err != nil {
		cache.ok = false
		return err
	}
	cache.ok = true
	s.cache.put(lo, n.dirty, cache.data)
	return nil
}

// scanRange reads n's chunks lo to hi: through the write connection, which
// sees the open batch, when n has an uncommitted change, else from the
// reader pool.
func (s *store) scanRange(n *node, lo, hi int64, fill func(id int64, data []byte)) error {
	if s.w != nil && n.dirty > s.w.committed.Load() {
		return s.w.readRange(lo, hi, fill)
	}
	return scanChunks(s.rdChunk, lo, hi, fill)
}

// Write writes at the handle's offset (at the end, for O_APPEND) and advances
// it. Each Write is one committed operation: all of b or nothing.
func (h *handle) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check("write", true); err != nil {
		return 0, err
	}
	off := h.off
	if h.append {
		off = -1
	}
	end, err := h.st.writeAt(h.n, b, off, h.p())
	if err != nil {
		return 0, err
	}
	h.donePending(len(b) > 0)
	h.off = end
	return len(b), nil
}

// WriteAt writes at off without moving the offset; it fails on an O_APPEND
// handle, as in package os. It is one committed operation.
func (h *handle) WriteAt(b []byte, off int64) (int, error) {
	h.mu.Lock()
	err := h.check("write", true)
	h.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if h.append {
		return 0, h.fail(vfs.CodeInvalidPath, "write", "WriteAt on a file opened with O_APPEND")
	}
	if off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "write", "negative offset")
	}
	if _, err := h.st.writeAt(h.n, b, off, h.p()); err != nil {
		return 0, err
	}
	h.mu.Lock()
	h.donePending(len(b) > 0)
	h.mu.Unlock()
	return len(b), nil
}

// writeAt writes b into n at off (at the end if off < 0) as one operation and
// returns the offset after it. Chunks wholly overwritten are written as is; a
// chunk partly overwritten is read, patched and written back.
func (s *store) writeAt(n *node, b []byte, off int64, p vfs.Path) (int64, error) {
	const op = "write"
	var end int64
	err := s.mutateNode(op, p, func() (*batch, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		size := n.size
		if off < 0 {
			off = size
		}
		end = off + int64(len(b))
		if len(b) == 0 {
			return nil, nil
		}
		if end < off || end > s.maxSize() {
			return nil, vfs.NewError(vfs.CodeTooLarge, op, p, "")
		}
		grow := max(end-size, 0)
		if !n.freed && !s.reserve(grow) {
			return nil, quotaError(op, p)
		}
		now := s.now()
		var written []cachedChunk
		bt, err := s.exec(op, p, func() error {
			written = written[:0]
			return s.putRange(n, b, off, end, size, now, &written)
		})
		if err != nil {
			if !n.freed {
				s.reserve(-grow)
			}
			return nil, err
		}
		n.size = max(size, end)
		n.mtime = now
		n.dirty = s.w.execSeq.Load()
		// Write-through: the chunks as now stored, at the new version (a
		// chunk this write did not touch is refetched at the new version).
		for _, c := range written {
			s.cache.put(c.id, n.dirty, c.data)
		}
		return bt, nil
	})
	return end, err
}

// putRange stores the chunks the write of b at off (to end) into n, of
// size bytes, touches (noting them in written for the data cache), then
// n's new size and time.
func (s *store) putRange(n *node, b []byte, off, end, size int64, now time.Time, written *[]cachedChunk) error {
	w := s.w
	for idx := off / s.chunk; idx*s.chunk < end; idx++ {
		data, err := s.chunkData(n, b, idx, off, end, size)
		if err != nil {
			return err
		}
		if err := w.x(w.putChunk, n.ino<<chunkBits|idx, data); err != nil {
			return err
		}
		if s.cache != nil {
			*written = append(*written, cachedChunk{n.ino<<chunkBits | idx, data})
		}
	}
	return w.x(w.setSize, max(size, end), now.Unix(), now.Nanosecond(), n.ino)
}

// chunkData is chunk idx of n as the write of b at off (to end) leaves it:
// b's bytes when they cover all the chunk holds, else the chunk read back
// and patched.
func (s *store) chunkData(n *node, b []byte, idx, off, end, size int64) ([]byte, error) {
	cstart := idx * s.chunk
	lo := max(off, cstart) - cstart
	hi := min(end, cstart+s.chunk) - cstart
	have := min(max(size-cstart, 0), s.chunk) // bytes of this chunk in the file now
	src := b[cstart+lo-off : cstart+hi-off]
	if lo == 0 && hi >= have {
		return src, nil
	}
	data := make([]byte, max(have, hi))
	if have > 0 {
		var old []byte
		if err := s.w.getChunk.QueryRow(n.ino<<chunkBits | idx).Scan(&old); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		copy(data, old)
	}
	copy(data[lo:], src)
	return data, nil
}

// cachedChunk is a chunk a write stored, for the data cache.
type cachedChunk struct {
	id   int64
	data []byte
}

// mutateNode is mutate for a data operation through a handle (no context).
func (s *store) mutateNode(op string, p vfs.Path, fn func() (*batch, error)) error {
	if err := s.usable(op, p, true); err != nil {
		return err
	}
	s.w.enter()
	b, err := fn()
	if lerr := s.w.leave(b); lerr != nil && err == nil {
		s.failed.Store(true)
		err = storageError(op, p, lerr)
	}
	return err
}

// truncate sets n's size as one operation's statements: chunks past the end
// are deleted and the last one cut, so no byte past the size is ever stored
// (growth reads as zeros). The caller holds n.mu, inside mutate.
func (s *store) truncate(n *node, size int64, op string, p vfs.Path) (*batch, error) {
	if size > s.maxSize() {
		return nil, vfs.NewError(vfs.CodeTooLarge, op, p, "")
	}
	old := n.size
	delta := size - old
	if !n.freed && !s.reserve(delta) {
		return nil, quotaError(op, p)
	}
	now := s.now()
	w := s.w
	b, err := s.exec(op, p, func() error {
		if size < old {
			keep := (size + s.chunk - 1) / s.chunk // chunks that keep data
			if err := w.x(w.delChunks, n.ino<<chunkBits|keep, (n.ino+1)<<chunkBits-1); err != nil {
				return err
			}
			if rem := size % s.chunk; rem != 0 {
				if err := w.x(w.trimChunk, rem, n.ino<<chunkBits|(size/s.chunk), rem); err != nil {
					return err
				}
			}
		}
		return w.x(w.setSize, size, now.Unix(), now.Nanosecond(), n.ino)
	})
	if err != nil {
		if !n.freed {
			s.reserve(-delta)
		}
		return nil, err
	}
	n.size = size
	n.mtime = now
	n.dirty = w.execSeq.Load()
	return b, nil
}

// donePending forgets the creation's batch once an operation of this handle
// committed after it (batches commit in order). The caller holds h.mu.
func (h *handle) donePending(committed bool) {
	if committed {
		h.pending = nil
	}
}

// Seek sets the offset for the next Read or Write.
func (h *handle) Seek(offset int64, whence int) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, h.fail(vfs.CodeClosed, "seek", "")
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = h.off
	case io.SeekEnd:
		h.n.mu.RLock()
		base = h.n.size
		h.n.mu.RUnlock()
	default:
		return 0, h.fail(vfs.CodeInvalidPath, "seek", "invalid whence")
	}
	off := base + offset
	if (offset > 0 && off < base) || off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "seek", "invalid offset")
	}
	h.off = off
	return off, nil
}

// Stat describes the open file under the name it was opened by; it keeps
// working after the file is removed (Nlink 0).
func (h *handle) Stat() (vfs.Info, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return vfs.Info{}, h.fail(vfs.CodeClosed, "stat", "")
	}
	name := "."
	if i := strings.LastIndexByte(h.path, '/'); i >= 0 {
		name = h.path[i+1:]
	} else if h.path != "" {
		name = h.path
	}
	h.st.mu.RLock()
	defer h.st.mu.RUnlock()
	i := h.n.info(name)
	if h.n.typ != fs.ModeDir && i.Nlink < 0 {
		i.Nlink = 0
	}
	return i, nil
}

// Truncate changes the file's size, zero-filling growth, as one operation.
func (h *handle) Truncate(size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return h.fail(vfs.CodeInvalidPath, "truncate", "negative size")
	}
	return h.st.mutateNode("truncate", h.p(), func() (*batch, error) {
		h.n.mu.Lock()
		defer h.n.mu.Unlock()
		if size == h.n.size {
			return nil, nil
		}
		return h.st.truncate(h.n, size, "truncate", h.p())
	})
}

// Sync waits until every write made through any handle is committed and makes
// it durable on stable storage (see FS.Sync).
func (h *handle) Sync() error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return h.fail(vfs.CodeClosed, "sync", "")
	}
	// flush below commits the open batch, the creation's included.
	if err := h.st.usable("sync", h.p(), false); err != nil {
		return err
	}
	if h.st.w == nil {
		return nil
	}
	if err := h.st.w.flush(h.st.cfg.sync != SyncOff); err != nil {
		return storageError("sync", h.p(), err)
	}
	return nil
}

// Close releases the handle; the last handle on a file with no name left
// deletes its inode and data.
func (h *handle) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return h.fail(vfs.CodeClosed, "close", "")
	}
	h.closed = true
	pending := h.pending
	h.pending = nil
	h.mu.Unlock()
	n, s := h.n, h.st
	var perr error
	if pending != nil {
		if perr = s.w.waitFor(pending); perr != nil {
			s.failed.Store(true)
			perr = storageError("close", h.p(), perr)
		}
	}
	n.mu.Lock()
	n.opens--
	last := n.opens == 0 && n.nlink <= 0 && !n.freed && n.typ == 0
	n.mu.Unlock()
	if !last || s.closed.Load() || s.w == nil {
		return perr
	}
	return s.mutateNode("close", h.p(), func() (*batch, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.opens != 0 || n.nlink > 0 || n.freed {
			return nil, nil
		}
		b, err := s.exec("close", h.p(), func() error { return s.deleteInodeSQL(n.ino) })
		if err != nil {
			return nil, err
		}
		n.freed = true
		s.reserve(-nodeCharge(n) - n.size)
		return b, nil
	})
}
