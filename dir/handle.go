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
	s      *scope // the capability it was opened through (scopes are immutable)
	f      vfs.File
	name   string   // the path as the guest wrote it, for errors
	p      vfs.Path // the path opened, relative to s.b (for Stat's name and the audit trail)
	closed atomic.Bool
	dir    *dirHandle // non-nil when the handle is a directory
}

// dirHandle is the directory state of a Handle on a directory.
type dirHandle struct {
	b       vfs.Backend // the directory, pinned
	mu      sync.Mutex  // guards the listing below
	listed  bool
	entries []vfs.DirEntry
	off     int
	l       listing // what the entries ReadDir returns share
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
// os.O_CREATE, os.O_EXCL, os.O_TRUNC, os.O_APPEND) and returns a streaming Handle.
// When O_CREATE creates the file it gets perm's permission bits and sticky bit;
// setuid and setgid (fs.ModeSetuid, fs.ModeSetgid, 0o4000, 0o2000) are dropped.
// Directories can be opened read-only, for ReadDir. Any write flag on a read-only
// Dir is read_only.
func (d *Dir) Open(ctx context.Context, path string, flag int, perm fs.FileMode) (*Handle, error) {
	var h *Handle
	c := &call{sp: specDirOpen.of(flag), path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		var err error
		h, err = d.s.openAs(ctx, c, path, flag, perm)
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// openAs is the backend work of open call c (see makeOpenSpecs): a fused read
// resolves, decides and opens in one backend call (openRead); any other open
// opens c.rp. name is the path as the guest wrote it.
func (s *scope) openAs(ctx context.Context, c *call, name string, flag int, perm fs.FileMode) (*Handle, error) {
	if !c.sp.fused {
		return s.open(ctx, name, c.rp, flag, createPerm(perm))
	}
	f, err := s.openRead(ctx, c)
	if err != nil {
		return nil, err
	}
	return s.handle(ctx, name, c.rp, f, flag)
}

// open opens p of the scope's backend inside an enforced call; name is the path as
// the guest wrote it.
func (s *scope) open(ctx context.Context, name string, p vfs.Path, flag int, perm fs.FileMode) (*Handle, error) {
	f, err := s.b.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	return s.handle(ctx, name, p, f, flag)
}

// handle makes the Handle of f, opened at p with flag; on failure it closes f.
func (s *scope) handle(ctx context.Context, name string, p vfs.Path, f vfs.File, flag int) (*Handle, error) {
	h := &Handle{s: s, f: f, name: printable(name), p: p.WithoutDirMark()}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return h, nil // directories open read-only only
	}
	var typ fs.FileMode
	if tf, ok := f.(vfs.TypedFile); ok {
		typ = tf.Type()
	} else {
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		typ = info.Mode.Type()
	}
	if typ.IsDir() {
		sub, err := s.b.Sub(ctx, p)
		if err != nil {
			f.Close()
			return nil, err
		}
		h.dir = &dirHandle{b: sub}
	}
	return h, nil
}

// check refuses a call on a revoked capability, or a write on a read-only or locked
// one, recording the refusal in the audit trail.
func (h *Handle) check(method string, write bool) error {
	st := h.s.gate.state()
	if st&revokedBit == 0 && (!write || (!h.s.ro && st&lockedBit == 0)) {
		return nil
	}
	return h.refuse(method, write, st)
}

func (h *Handle) refuse(method string, write bool, st uint32) error {
	code, rule, msg := vfs.CodeRevoked, "revoked", "capability revoked"
	if st&revokedBit == 0 {
		code, rule, msg = vfs.CodeReadOnly, "read-only", "capability is read-only"
	}
	if e := h.s.env; e.audited {
		op := policy.OpRead
		if write {
			op = policy.OpWrite
		}
		e.audit.Record(context.Background(), audit.Event{
			Time: time.Now(), RequestID: newRequestID(), Subject: e.subject, Op: string(op),
			Path: h.s.treePath(h.p), GuestPath: h.name, Outcome: audit.Denied, Code: string(code), Rule: rule,
		})
	}
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
	return fileInfoOf(info), nil
}

func (h *Handle) stat() (vfs.Info, error) {
	if err := h.check("Stat", false); err != nil {
		return vfs.Info{}, err
	}
	info, err := h.f.Stat()
	if err != nil {
		return vfs.Info{}, h.err("Stat", err)
	}
	info.Name = h.p.Base()
	if h.p.IsRoot() {
		info.Name = "."
	}
	return info, nil
}

// OpenStat returns information on the open file as it was when opened, without a
// call to the backend, where the backend recorded it at the open (the physical
// backend does: it examines what it opens before opening it; see
// vfs.OpenStater); ok is false otherwise, and on a revoked capability or a
// closed Handle (then Stat reports why). A write since the open may have changed
// the size and times, which Stat reports: a reader uses it to check the type
// and size and to size its buffer, and still reads to the end. Its Name is that
// of Stat.
func (h *Handle) OpenStat() (info fs.FileInfo, ok bool) {
	i, ok := h.openStat()
	if !ok {
		return nil, false
	}
	return fileInfoOf(i), true
}

// openStat is OpenStat as a vfs.Info.
func (h *Handle) openStat() (vfs.Info, bool) {
	if h.closed.Load() || h.check("OpenStat", false) != nil {
		return vfs.Info{}, false
	}
	i, ok := vfs.OpenStat(h.f)
	if !ok {
		return vfs.Info{}, false
	}
	i.Name = h.p.Base()
	if h.p.IsRoot() {
		i.Name = "."
	}
	return i, true
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
	dh := h.dir
	dh.mu.Lock()
	defer dh.mu.Unlock()
	if !dh.listed {
		ents, err := dh.b.ReadDir(context.Background(), vfs.Root)
		if err != nil {
			return nil, h.err("ReadDir", err)
		}
		dh.entries, dh.listed = ents, true
		dh.l = listing{s: h.s, b: dh.b, display: h.name, base: h.p}
	}
	rest := dh.entries[dh.off:]
	if n > 0 {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		rest = rest[:min(n, len(rest))]
	}
	dh.off += len(rest)
	return dh.l.entries(rest), nil
}

// listing is what the entries of one directory listing share: the capability they
// were listed through (so revocation still applies to Info) and the directory.
type listing struct {
	s       *scope
	b       vfs.Backend
	p       vfs.Path // the directory holding the entries, relative to b
	display string   // the directory's path for errors
	// base is b's root relative to s.b, so that Info can ask the policy about an
	// entry by the path it has from the capability tree's root.
	base vfs.Path
}

// dirEntry is an fs.DirEntry whose Info is fetched on demand, without following a
// symlink, through the capability it was listed from. It points into the listing
// the backend returned, which nothing modifies.
type dirEntry struct {
	l *listing
	e *vfs.DirEntry
}

func (e *dirEntry) Name() string               { return e.e.Name }
func (e *dirEntry) IsDir() bool                { return e.Type().IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.e.Type & fs.ModeType }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.info() }

// display is the entry's path for errors.
func (e *dirEntry) display() string { return path.Join(e.l.display, e.e.Name) }

func (e *dirEntry) info() (fs.FileInfo, error) {
	if e.l.s.gate.isRevoked() {
		return nil, errAt(vfs.CodeRevoked, "Info", e.display(), "", "capability revoked")
	}
	p := e.l.p
	if e.e.Name != "." || !p.IsRoot() {
		var err error
		if p, err = p.Child(e.e.Name); err != nil {
			return nil, readdress(err, "Info", e.display(), "")
		}
	}
	if err := e.l.s.allowInfo(e.l.base.Join(p), e.display()); err != nil {
		return nil, err
	}
	info, err := e.l.b.Lstat(context.Background(), p)
	if err != nil {
		return nil, readdress(err, "Info", e.display(), "")
	}
	info.Name = e.e.Name
	return fileInfoOf(info), nil
}

// entries returns ents, listed in l, as fs.DirEntry values: two allocations
// whatever their number.
func (l *listing) entries(ents []vfs.DirEntry) []fs.DirEntry {
	des := make([]dirEntry, len(ents))
	out := make([]fs.DirEntry, len(ents))
	for i := range ents {
		des[i] = dirEntry{l: l, e: &ents[i]}
		out[i] = &des[i]
	}
	return out
}

// entries converts a listing of directory p of b.
func (s *scope) entries(b vfs.Backend, p vfs.Path, ents []vfs.DirEntry) []fs.DirEntry {
	l := &listing{s: s, b: b, p: p, display: p.String()}
	return l.entries(ents)
}

// oneEntry is a dirEntry with its listing and entry, in one allocation.
type oneEntry struct {
	d dirEntry
	l listing
	e vfs.DirEntry
}

// entry returns the fs.DirEntry for the entry at p (whose listing said e).
func (s *scope) entry(b vfs.Backend, p vfs.Path, e vfs.DirEntry) fs.DirEntry {
	o := &oneEntry{l: listing{s: s, b: b, p: p.Dir(), display: p.Dir().String()}, e: vfs.DirEntry{Name: p.Base(), Type: e.Type}}
	if p.IsRoot() {
		o.e.Name = "."
	}
	o.d = dirEntry{l: &o.l, e: &o.e}
	return &o.d
}

// allowInfo asks a custom policy whether the metadata of p (relative to s.b) may be
// read, as a Stat of p would: a listing shows every name the policy lets it show,
// but an entry's Info is the same information Stat gives, so a path whose Stat is
// refused has its Info refused too (fs_permission_denied). The decision is not
// audited: the listing it comes from was. With the default policy it costs nothing.
func (s *scope) allowInfo(p vfs.Path, display string) error {
	if !s.env.customPolicy {
		return nil
	}
	ctx := context.Background()
	r := policy.Request{
		ID:        newRequestID(),
		Subject:   s.env.subject,
		Op:        policy.OpStat,
		Path:      s.base.Join(p).String(),
		GuestPath: p.String(),
		Size:      -1,
	}
	if d, ok := s.env.decide(ctx, &r); !ok {
		return errAt(vfs.CodePermission, "Info", display, "", denyReason(d))
	}
	return nil
}
