package memory

import (
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"

	"github.com/capfs/capfs/vfs"
)

// handle is an open file or directory. Its offset is its own; the inode is shared.
//
// The offset is guarded by the node's mu: Write and Seek change it holding mu for
// writing; Read holds mu for reading only, so it advances the offset with a
// compare-and-swap and starts over if a concurrent Read on the same handle moved
// it first. Closing needs no lock (see Close).
//
// A handle is 48 bytes, one small size class, since every open allocates one: it
// keeps its path as the raw string (a vfs.Path is rebuilt only for errors).
type handle struct {
	st     *store
	n      *node
	path   string // vfs.Path.Raw of the path it was opened by
	off    atomic.Int64
	closed atomic.Bool
	read   bool
	write  bool
	append bool
}

var _ vfs.TypedFile = (*handle)(nil)

func newHandle(st *store, n *node, p vfs.Path, acc, flag int) *handle {
	return &handle{
		st:     st,
		n:      n,
		path:   p.Raw(),
		read:   acc != os.O_WRONLY,
		write:  acc != os.O_RDONLY,
		append: flag&os.O_APPEND != 0,
	}
}

func (h *handle) fail(code vfs.Code, op, msg string) error {
	p := vfs.Root
	if h.path != "" {
		p, _ = vfs.ParseGuest(h.path) // a Path's raw form parses back to itself
	}
	return vfs.NewError(code, op, p, msg)
}

// readable returns the error for reading through h, or nil. The closed flag is
// atomic and the rest immutable, but a data operation checks it under n.mu, so a
// racing Close cannot free the data under it (see Close).
func (h *handle) readable(op string) error {
	switch {
	case h.closed.Load():
		return h.fail(vfs.CodeClosed, op, "")
	case h.n.typ == fs.ModeDir:
		return h.fail(vfs.CodeIsDir, op, "")
	case !h.read:
		return h.fail(vfs.CodePermission, op, "file not open for reading")
	}
	return nil
}

// writable returns the error for writing through h, or nil. The caller holds n.mu.
func (h *handle) writable(op string) error {
	switch {
	case h.closed.Load():
		return h.fail(vfs.CodeClosed, op, "")
	case h.n.typ == fs.ModeDir:
		return h.fail(vfs.CodeIsDir, op, "")
	case !h.write:
		return h.fail(vfs.CodePermission, op, "file not open for writing")
	}
	return nil
}

// Read reads from the handle's offset and advances it.
func (h *handle) Read(b []byte) (int, error) {
	if err := h.readable("read"); err != nil {
		return 0, err
	}
	n := h.n
	if len(b) > 0 && h.atEOF() {
		return 0, io.EOF // the second call of every read-to-the-end loop
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if h.closed.Load() { // again under mu: a Close racing this Read cannot free the data under it
		return 0, h.fail(vfs.CodeClosed, "read", "")
	}
	for {
		off := h.off.Load()
		if off >= int64(len(n.data)) {
			if len(b) == 0 {
				return 0, nil
			}
			return 0, io.EOF
		}
		c := copy(b, n.data[off:])
		if h.off.CompareAndSwap(off, off+int64(c)) {
			return c, nil
		}
	}
}

// atEOF reports, without locking, that the offset was at or past the end of the
// file at one instant. The size only changes inside the node's seqlock bracket, so
// an unchanged even seq around the two loads means the size held still while the
// offset was loaded. False means "unknown" as well as "not at the end".
func (h *handle) atEOF() bool {
	n := h.n
	s := n.seq.Load()
	if s&1 != 0 {
		return false
	}
	off, size := h.off.Load(), n.size.Load()
	return n.seq.Load() == s && off >= size
}

// ReadAt reads at off without moving the offset; a short read returns io.EOF.
func (h *handle) ReadAt(b []byte, off int64) (int, error) {
	n := h.n
	n.mu.RLock()
	defer n.mu.RUnlock()
	if err := h.readable("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "read", "negative offset")
	}
	if off >= int64(len(n.data)) {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	c := copy(b, n.data[off:])
	if c < len(b) {
		return c, io.EOF
	}
	return c, nil
}

// Write writes at the handle's offset (at the end of the file, atomically, for an
// O_APPEND handle) and advances it. A write that would exceed the quota or the
// maximum file size writes nothing.
func (h *handle) Write(b []byte) (int, error) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := h.writable("write"); err != nil {
		return 0, err
	}
	off := h.off.Load()
	if h.append {
		off = int64(len(n.data))
	}
	if err := h.writeLocked(b, off); err != nil {
		return 0, err
	}
	h.off.Store(off + int64(len(b)))
	return len(b), nil
}

// WriteAt writes at off without moving the offset. It fails on an O_APPEND handle,
// as in package os.
func (h *handle) WriteAt(b []byte, off int64) (int, error) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := h.writable("write"); err != nil {
		return 0, err
	}
	if h.append {
		return 0, h.fail(vfs.CodeInvalidPath, "write", "WriteAt on a file opened with O_APPEND")
	}
	if off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "write", "negative offset")
	}
	if err := h.writeLocked(b, off); err != nil {
		return 0, err
	}
	return len(b), nil
}

// writeLocked writes b at off. The caller holds n.mu for writing.
func (h *handle) writeLocked(b []byte, off int64) error {
	if len(b) == 0 {
		return nil
	}
	switch code := h.st.writeAt(h.n, b, off); code {
	case "":
		return nil
	case vfs.CodeQuota:
		return h.fail(code, "write", "storage quota exceeded")
	default:
		return h.fail(code, "write", "")
	}
}

// Seek sets the offset for the next Read or Write; seeking past the end is allowed.
func (h *handle) Seek(offset int64, whence int) (int64, error) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if h.closed.Load() {
		return 0, h.fail(vfs.CodeClosed, "seek", "")
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = h.off.Load()
	case io.SeekEnd:
		base = int64(len(n.data))
	default:
		return 0, h.fail(vfs.CodeInvalidPath, "seek", "invalid whence")
	}
	off := base + offset
	if (offset > 0 && off < base) || off < 0 {
		return 0, h.fail(vfs.CodeInvalidPath, "seek", "invalid offset")
	}
	h.off.Store(off)
	return off, nil
}

// Stat describes the open file under the name it was opened by. It keeps working
// after the file is removed (Nlink is then 0).
// Type returns the type of the node h opened (vfs.TypedFile): fs.ModeDir, or
// 0 for a regular file. A node's type never changes.
func (h *handle) Type() fs.FileMode { return h.n.typ }

func (h *handle) Stat() (vfs.Info, error) {
	if h.closed.Load() {
		return vfs.Info{}, h.fail(vfs.CodeClosed, "stat", "")
	}
	name := "."
	if i := strings.LastIndexByte(h.path, '/'); i >= 0 {
		name = h.path[i+1:]
	} else if h.path != "" {
		name = h.path
	}
	return h.n.info(name), nil
}

// Truncate changes the file's size, zero-filling growth. The offset is unchanged.
func (h *handle) Truncate(size int64) error {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := h.writable("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return h.fail(vfs.CodeInvalidPath, "truncate", "negative size")
	}
	switch code := h.st.resize(n, size); code {
	case "":
		return nil
	case vfs.CodeQuota:
		return h.fail(code, "truncate", "storage quota exceeded")
	default:
		return h.fail(code, "truncate", "")
	}
}

// Sync does nothing but report a closed handle: memory has no stable storage.
func (h *handle) Sync() error {
	if h.closed.Load() {
		return h.fail(vfs.CodeClosed, "sync", "")
	}
	return nil
}

// Close releases the handle. If the file has no name left and this was its last
// handle, its data is freed and returned to the quota.
//
// Close takes no lock unless it may be the one to free the data: the open count
// and the link count are atomics, and whichever of Close and the last unlink
// (store.unlinked) comes second sees both at zero and frees the data under the
// node's mu. An operation already past its closed check, under mu, completes
// before any freeing.
func (h *handle) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		return h.fail(vfs.CodeClosed, "close", "")
	}
	n := h.n
	if n.typ == 0 && n.opens.Add(-1) == 0 && n.nlink.Load() <= 0 {
		n.mu.Lock()
		h.st.releaseIfUnused(n)
		n.mu.Unlock()
	}
	return nil
}
