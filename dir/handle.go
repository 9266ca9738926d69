package dir

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Handle is an open file or directory, obtained from Dir.Open or File.Open: a
// stream with its own offset. It implements io.Reader, io.ReaderAt, io.Writer,
// io.WriterAt, io.Seeker, io.Closer, fs.File and fs.ReadDirFile.
//
// Opening is the enforced, audited call. Every later call on the Handle checks
// revocation (revoked) and, for Write, WriteAt and Truncate, the capability's
// read-only bit and the host's write lock (read_only), at the moment of the call, so
// revoking or locking the capability stops a Handle that is already open. Refused
// calls are audited; successful reads and writes are not (the Open event covers
// them). Close always works, even after revocation, so resources can be released.
//
// A Handle is safe for concurrent use; concurrent Read and Write calls share the
// offset, as with *os.File.
type Handle struct {
	s      scope
	f      vfs.File
	name   string      // the path as the guest wrote it, for errors
	tree   string      // the path from the capability tree's root, for audit
	base   string      // the name Stat reports
	dir    vfs.Backend // the pinned directory, when the handle is a directory
	closed atomic.Bool

	mu      sync.Mutex // guards the directory listing below
	listed  bool
	entries []vfs.DirEntry
	off     int
}

// openFlagOp is the policy op an open with flag performs.
func openFlagOp(flag int) policy.Op {
	switch {
	case flag&os.O_CREATE != 0:
		return policy.OpCreate
	case flag&(os.O_WRONLY|os.O_RDWR|os.O_TRUNC|os.O_APPEND) != 0:
		return policy.OpWrite
	}
	return policy.OpRead
}

// Open opens path with os-style flags (os.O_RDONLY, os.O_WRONLY, os.O_RDWR,
// os.O_CREATE, os.O_EXCL, os.O_TRUNC, os.O_APPEND) and returns a streaming Handle;
// perm's permission bits are used when O_CREATE creates the file. Directories can be
// opened read-only, for ReadDir. Any write flag on a read-only Dir is read_only.
func (d *Dir) Open(ctx context.Context, path string, flag int, perm fs.FileMode) (*Handle, error) {
	var h *Handle
	err := d.do(ctx, &call{op: openFlagOp(flag), method: "Open", path: path}, func(ctx context.Context, c *call) error {
		var err error
		h, err = d.s.open(ctx, c, d.s.b, c.p, flag, perm&fs.ModePerm)
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// open opens p of b inside an enforced call c.
func (s *scope) open(ctx context.Context, c *call, b vfs.Backend, p vfs.Path, flag int, perm fs.FileMode) (*Handle, error) {
	f, err := b.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	h := &Handle{s: *s, f: f, name: printable(c.path), tree: c.req.Path, base: p.Base()}
	if p.IsRoot() {
		h.base = "."
	}
	if info.Mode.IsDir() {
		if h.dir, err = b.Sub(ctx, p); err != nil {
			f.Close()
			return nil, err
		}
	}
	return h, nil
}

// check refuses a call on a revoked capability, or a write on a read-only or locked
// one, recording the refusal in the audit trail.
func (h *Handle) check(method string, write bool) error {
	var code vfs.Code
	switch {
	case h.s.gate.isRevoked():
		code = vfs.CodeRevoked
	case write && (h.s.ro || !h.s.gate.writable()):
		code = vfs.CodeReadOnly
	default:
		return nil
	}
	op := policy.OpRead
	if write {
		op = policy.OpWrite
	}
	rule := "revoked"
	msg := "capability revoked"
	if code == vfs.CodeReadOnly {
		rule, msg = "read-only", "capability is read-only"
	}
	h.s.env.audit.Record(context.Background(), audit.Event{
		Time: time.Now(), RequestID: newRequestID(), Subject: h.s.env.subject, Op: string(op),
		Path: h.tree, GuestPath: h.name, Outcome: audit.Denied, Code: string(code), Rule: rule,
	})
	return errAt(code, method, h.name, "", msg)
}

// err gives a backend error the guest's path; io.EOF passes unchanged.
func (h *Handle) err(method string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return readdress(err, method, h.name, "")
}

// Name returns the path the Handle was opened with.
func (h *Handle) Name() string { return h.name }

// Read reads up to len(b) bytes at the offset; io.EOF at the end.
func (h *Handle) Read(b []byte) (int, error) {
	if err := h.check("Read", false); err != nil {
		return 0, err
	}
	n, err := h.f.Read(b)
	return n, h.err("Read", err)
}

// ReadAt reads len(b) bytes at offset off, without moving the offset.
func (h *Handle) ReadAt(b []byte, off int64) (int, error) {
	if err := h.check("ReadAt", false); err != nil {
		return 0, err
	}
	n, err := h.f.ReadAt(b, off)
	return n, h.err("ReadAt", err)
}

// Write writes b at the offset (at the end with O_APPEND).
func (h *Handle) Write(b []byte) (int, error) {
	if err := h.check("Write", true); err != nil {
		return 0, err
	}
	n, err := h.f.Write(b)
	return n, h.err("Write", err)
}

// WriteAt writes b at offset off, without moving the offset.
func (h *Handle) WriteAt(b []byte, off int64) (int, error) {
	if err := h.check("WriteAt", true); err != nil {
		return 0, err
	}
	n, err := h.f.WriteAt(b, off)
	return n, h.err("WriteAt", err)
}

// Seek sets the offset, as io.Seeker.
func (h *Handle) Seek(offset int64, whence int) (int64, error) {
	if err := h.check("Seek", false); err != nil {
		return 0, err
	}
	n, err := h.f.Seek(offset, whence)
	return n, h.err("Seek", err)
}

// Truncate changes the file's size; growth is zero-filled.
func (h *Handle) Truncate(size int64) error {
	if err := h.check("Truncate", true); err != nil {
		return err
	}
	return h.err("Truncate", h.f.Truncate(size))
}

// Sync commits the contents to stable storage where the backend has any.
func (h *Handle) Sync() error {
	if err := h.check("Sync", false); err != nil {
		return err
	}
	return h.err("Sync", h.f.Sync())
}

// Stat returns information on the open file; its Name is the last element of the
// path it was opened with.
func (h *Handle) Stat() (fs.FileInfo, error) {
	info, err := h.stat()
	if err != nil {
		return nil, err
	}
	return info.FileInfo(), nil
}

func (h *Handle) stat() (vfs.Info, error) {
	if err := h.check("Stat", false); err != nil {
		return vfs.Info{}, err
	}
	info, err := h.f.Stat()
	if err != nil {
		return vfs.Info{}, h.err("Stat", err)
	}
	info.Name = h.base
	return info, nil
}

// Close closes the Handle. It works even after revocation; a second Close fails with
// closed.
func (h *Handle) Close() error {
	h.closed.Store(true)
	return h.err("Close", h.f.Close())
}

// ReadDir reads the directory's entries in name order, as fs.ReadDirFile: with n >
// 0 at most n entries per call and io.EOF at the end; with n <= 0 all remaining
// entries and a nil error. The listing is taken at the first call. A Handle on a
// file fails with not_a_directory.
func (h *Handle) ReadDir(n int) ([]fs.DirEntry, error) {
	if err := h.check("ReadDir", false); err != nil {
		return nil, err
	}
	if h.closed.Load() {
		return nil, errAt(vfs.CodeClosed, "ReadDir", h.name, "", "")
	}
	if h.dir == nil {
		return nil, errAt(vfs.CodeNotDir, "ReadDir", h.name, "", "")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.listed {
		ents, err := h.dir.ReadDir(context.Background(), vfs.Root)
		if err != nil {
			return nil, h.err("ReadDir", err)
		}
		h.entries, h.listed = ents, true
	}
	rest := h.entries[h.off:]
	if n > 0 {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		rest = rest[:min(n, len(rest))]
	}
	h.off += len(rest)
	out := make([]fs.DirEntry, len(rest))
	for i, e := range rest {
		out[i] = &dirEntry{s: &h.s, b: h.dir, p: vfs.Path{}, name: e.Name, typ: e.Type & fs.ModeType, display: path.Join(h.name, e.Name)}
	}
	return out, nil
}

// dirEntry is an fs.DirEntry whose Info is fetched on demand, without following a
// symlink, through the capability it was listed from (so revocation still applies).
type dirEntry struct {
	s       *scope
	b       vfs.Backend
	p       vfs.Path // the directory holding the entry, relative to b
	name    string
	typ     fs.FileMode
	display string // the entry's path for errors
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.typ.IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.typ }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.info() }

func (e *dirEntry) info() (fs.FileInfo, error) {
	if e.s.gate.isRevoked() {
		return nil, errAt(vfs.CodeRevoked, "Info", e.display, "", "capability revoked")
	}
	p := e.p
	if e.name != "." || !p.IsRoot() {
		var err error
		if p, err = e.p.Child(e.name); err != nil {
			return nil, readdress(err, "Info", e.display, "")
		}
	}
	info, err := e.b.Lstat(context.Background(), p)
	if err != nil {
		return nil, readdress(err, "Info", e.display, "")
	}
	info.Name = e.name
	return info.FileInfo(), nil
}

// entries converts a listing of directory p of b.
func (s *scope) entries(b vfs.Backend, p vfs.Path, ents []vfs.DirEntry) []fs.DirEntry {
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = &dirEntry{s: s, b: b, p: p, name: e.Name, typ: e.Type & fs.ModeType, display: path.Join(p.String(), e.Name)}
	}
	return out
}

// entry returns the fs.DirEntry for the entry at p (whose listing said e).
func (s *scope) entry(b vfs.Backend, p vfs.Path, e vfs.DirEntry) fs.DirEntry {
	if p.IsRoot() {
		return &dirEntry{s: s, b: b, name: ".", typ: e.Type & fs.ModeType, display: "."}
	}
	return &dirEntry{s: s, b: b, p: p.Dir(), name: p.Base(), typ: e.Type & fs.ModeType, display: p.String()}
}
