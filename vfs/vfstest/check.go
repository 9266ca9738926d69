package vfstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// knownCodes are the codes vfs defines; a backend must not invent others.
var knownCodes = map[vfs.Code]bool{
	vfs.CodeOutside: true, vfs.CodeInvalidPath: true, vfs.CodePermission: true,
	vfs.CodeReadOnly: true, vfs.CodeRevoked: true, vfs.CodeNotFound: true,
	vfs.CodeExists: true, vfs.CodeNotDir: true, vfs.CodeIsDir: true,
	vfs.CodeNotEmpty: true, vfs.CodeTooLarge: true, vfs.CodeQuota: true,
	vfs.CodeTooManyLinks: true, vfs.CodeNotRegular: true, vfs.CodeCrossMount: true,
	vfs.CodeConflict: true, vfs.CodeClosed: true, vfs.CodeNotSupported: true,
	vfs.CodeIO: true, vfs.CodeCanceled: true,
}

// sentinelFor is the io/fs sentinel errors.Is must match for a code, if any.
func sentinelFor(c vfs.Code) error {
	switch c {
	case vfs.CodeNotFound:
		return fs.ErrNotExist
	case vfs.CodeExists, vfs.CodeNotEmpty:
		return fs.ErrExist
	case vfs.CodeOutside, vfs.CodePermission, vfs.CodeReadOnly, vfs.CodeRevoked:
		return fs.ErrPermission
	case vfs.CodeInvalidPath, vfs.CodeNotDir, vfs.CodeIsDir, vfs.CodeTooManyLinks, vfs.CodeNotRegular:
		return fs.ErrInvalid
	case vfs.CodeClosed:
		return fs.ErrClosed
	case vfs.CodeNotSupported:
		return errors.ErrUnsupported
	}
	return nil
}

// hostMarkers are substrings no error of a virtual backend may contain.
func hostMarkers(b vfs.Backend) []string {
	m := []string{"/tmp/"}
	if d := filepath.Clean(os.TempDir()); d != "/tmp" && d != "." && d != "/" {
		m = append(m, d)
	}
	if hp, ok := b.(vfs.HostPather); ok {
		if p, ok := hp.HostPath(); ok && p != "" && p != "/" {
			m = append(m, filepath.Clean(p))
		}
	}
	return m
}

// contractViolation returns why err breaks the error contract, or "". call names the
// call for the message.
func contractViolation(err error, markers []string) string {
	e, ok := err.(*vfs.Error)
	if !ok {
		var inner *vfs.Error
		if errors.As(err, &inner) {
			return fmt.Sprintf("returned %T wrapping a *vfs.Error (%v); return the *vfs.Error itself", err, err)
		}
		return fmt.Sprintf("returned %T (%v), not a *vfs.Error", err, err)
	}
	if e == nil {
		return "returned a nil *vfs.Error as a non-nil error"
	}
	var problems []string
	if e.Code == "" {
		problems = append(problems, "empty Code")
	} else if !knownCodes[e.Code] {
		problems = append(problems, fmt.Sprintf("unknown Code %q", e.Code))
	}
	if e.Op == "" {
		problems = append(problems, "empty Op")
	}
	if s := sentinelFor(e.Code); s != nil && !errors.Is(err, s) {
		problems = append(problems, fmt.Sprintf("errors.Is(err, %v) is false", s))
	}
	if !errors.Is(err, &vfs.Error{Code: e.Code}) {
		problems = append(problems, "errors.Is(err, &vfs.Error{Code: its code}) is false")
	}
	for _, p := range []string{e.Path, e.Dest} {
		if strings.HasPrefix(p, "/") {
			problems = append(problems, fmt.Sprintf("absolute path %q in the error", p))
		}
	}
	text := err.Error()
	for c := errors.Unwrap(err); c != nil; c = errors.Unwrap(c) {
		text += "\n" + c.Error()
	}
	for _, m := range markers {
		if strings.Contains(text, m) {
			problems = append(problems, fmt.Sprintf("host path %q in the error text", m))
		}
	}
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprintf("%v: %s", err, strings.Join(problems, "; "))
}

// checked wraps a Backend and reports, on t, every error that breaks the error
// contract and every File that breaks the io contracts. Reporting uses t.Errorf,
// which is safe from any goroutine.
type checked struct {
	b       vfs.Backend
	t       testing.TB
	markers []string
}

func newChecked(t testing.TB, b vfs.Backend) *checked {
	return &checked{b: b, t: t, markers: hostMarkers(b)}
}

func (c *checked) check(call string, err error) error {
	if err != nil {
		if v := contractViolation(err, c.markers); v != "" {
			c.t.Errorf("error contract: %s: %s", call, v)
		}
	}
	return err
}

func (c *checked) Features() vfs.Features { return c.b.Features() }

func (c *checked) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	i, err := c.b.Stat(ctx, p)
	return i, c.check("Stat("+p.String()+")", err)
}

func (c *checked) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	i, err := c.b.Lstat(ctx, p)
	return i, c.check("Lstat("+p.String()+")", err)
}

func (c *checked) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	d, err := c.b.ReadDir(ctx, p)
	return d, c.check("ReadDir("+p.String()+")", err)
}

// ReadDirInfo is the backend's own ([vfs.DirInfoReader]) where it has one, else
// the fallback [vfs.ReadDirInfo] takes: the checked backend is always one.
func (c *checked) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	infos, err := vfs.ReadDirInfo(ctx, c.b, p)
	return infos, c.check("ReadDirInfo("+p.String()+")", err)
}

func (c *checked) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	call := fmt.Sprintf("OpenFile(%s, %#x)", p, flag)
	f, err := c.b.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, c.check(call, err)
	}
	if f == nil {
		c.t.Errorf("%s returned a nil File and no error", call)
		return nil, vfs.NewError(vfs.CodeIO, "open", p, "nil file")
	}
	return c.file(f, p), nil
}

// file is f, opened at p, checked, with the optional File interfaces f has
// (see [vfs.WrapFile]).
func (c *checked) file(f vfs.File, p vfs.Path) vfs.File {
	return vfs.WrapFile(&checkedFile{f: f, c: c, name: p.String()}, f)
}

func (c *checked) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return c.check("Mkdir("+p.String()+")", c.b.Mkdir(ctx, p, perm))
}

func (c *checked) Remove(ctx context.Context, p vfs.Path) error {
	return c.check("Remove("+p.String()+")", c.b.Remove(ctx, p))
}

func (c *checked) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	return c.check(fmt.Sprintf("Rename(%s, %s, %d)", from, to, flags), c.b.Rename(ctx, from, to, flags))
}

func (c *checked) Symlink(ctx context.Context, target string, p vfs.Path) error {
	return c.check(fmt.Sprintf("Symlink(%q, %s)", target, p), c.b.Symlink(ctx, target, p))
}

func (c *checked) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	s, err := c.b.Readlink(ctx, p)
	return s, c.check("Readlink("+p.String()+")", err)
}

func (c *checked) Link(ctx context.Context, oldp, newp vfs.Path) error {
	return c.check(fmt.Sprintf("Link(%s, %s)", oldp, newp), c.b.Link(ctx, oldp, newp))
}

func (c *checked) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return c.check(fmt.Sprintf("Chmod(%s, %v)", p, mode), c.b.Chmod(ctx, p, mode))
}

func (c *checked) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return c.check("Chtimes("+p.String()+")", c.b.Chtimes(ctx, p, atime, mtime))
}

func (c *checked) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	s, err := c.b.Sub(ctx, p)
	if err != nil {
		return nil, c.check("Sub("+p.String()+")", err)
	}
	if s == nil {
		c.t.Errorf("Sub(%s) returned a nil Backend and no error", p)
		return nil, vfs.NewError(vfs.CodeIO, "sub", p, "nil backend")
	}
	return &checked{b: s, t: c.t, markers: c.markers}, nil
}

// checkedFile wraps a File: errors must be [*vfs.Error] (io.EOF where io allows it),
// and counts must respect the io.Reader, io.ReaderAt and io.Writer contracts. It
// keeps the optional File interfaces of the File it wraps (see [vfs.WrapFile]).
type checkedFile struct {
	f    vfs.File
	c    *checked
	name string
}

func (f *checkedFile) fail(format string, args ...any) {
	f.c.t.Errorf("file %s: "+format, append([]any{f.name}, args...)...)
}

func (f *checkedFile) checkErr(call string, err error, eofOK bool) error {
	if err == nil || (eofOK && err == io.EOF) {
		return err
	}
	if v := contractViolation(err, f.c.markers); v != "" {
		f.fail("error contract: %s: %s", call, v)
	}
	return err
}

func (f *checkedFile) Read(p []byte) (int, error) {
	n, err := f.f.Read(p)
	if n < 0 || n > len(p) {
		f.fail("Read returned n=%d for a %d-byte buffer", n, len(p))
	}
	return n, f.checkErr("Read", err, true)
}

func (f *checkedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	if n < 0 || n > len(p) {
		f.fail("ReadAt returned n=%d for a %d-byte buffer", n, len(p))
	}
	if n < len(p) && err == nil {
		f.fail("ReadAt(len %d, off %d) returned n=%d and a nil error (io.ReaderAt requires an error)", len(p), off, n)
	}
	return n, f.checkErr("ReadAt", err, true)
}

func (f *checkedFile) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	if n < 0 || n > len(p) || (n < len(p) && err == nil) {
		f.fail("Write of %d bytes returned n=%d, err=%v (io.Writer requires an error for a short write)", len(p), n, err)
	}
	return n, f.checkErr("Write", err, false)
}

func (f *checkedFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if n < 0 || n > len(p) || (n < len(p) && err == nil) {
		f.fail("WriteAt of %d bytes returned n=%d, err=%v (io.WriterAt requires an error for a short write)", len(p), n, err)
	}
	return n, f.checkErr("WriteAt", err, false)
}

func (f *checkedFile) Seek(offset int64, whence int) (int64, error) {
	n, err := f.f.Seek(offset, whence)
	return n, f.checkErr("Seek", err, false)
}

func (f *checkedFile) Close() error { return f.checkErr("Close", f.f.Close(), false) }

func (f *checkedFile) Stat() (vfs.Info, error) {
	i, err := f.f.Stat()
	return i, f.checkErr("Stat", err, false)
}

func (f *checkedFile) Truncate(size int64) error {
	return f.checkErr("Truncate", f.f.Truncate(size), false)
}

func (f *checkedFile) Sync() error { return f.checkErr("Sync", f.f.Sync(), false) }

// OpenStat forwards to the wrapped File ([vfs.OpenStater]).
func (f *checkedFile) OpenStat() (vfs.Info, bool) { return f.f.(vfs.OpenStater).OpenStat() }

// Type forwards to the wrapped File ([vfs.TypedFile]).
func (f *checkedFile) Type() fs.FileMode { return f.f.(vfs.TypedFile).Type() }

// HostFd forwards to the wrapped File (see package hostfd).
func (f *checkedFile) HostFd(t hostfd.Token) (int, bool) { return f.f.(hostfd.Filer).HostFd(t) }

// ResolveOpen and ResolveReadDir reach the wrapped backend's own ([vfs.OpenResolver],
// [vfs.ListResolver]), or the vfs fallbacks over it, and check their errors, except
// the decision's own, which they must return unchanged.
func (c *checked) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	var derr error
	h, loc, err := vfs.ResolveOpen(ctx, c.b, p, func(l vfs.Location) error { derr = decide(l); return derr })
	if err != nil && err != derr {
		c.check("ResolveOpen("+p.String()+")", err)
	}
	if h != nil {
		h = c.file(h, p)
	}
	return h, loc, err
}

func (c *checked) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	var derr error
	ents, loc, err := vfs.ResolveReadDir(ctx, c.b, p, func(l vfs.Location) error { derr = decide(l); return derr })
	if err != nil && err != derr {
		c.check("ResolveReadDir("+p.String()+")", err)
	}
	return ents, loc, err
}

func (c *checked) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	loc, err := c.b.Resolve(ctx, p, follow)
	if err == nil && !loc.Path.IsResolved() {
		c.t.Errorf("Resolve(%s) returned %s without the Resolved mark", p, loc.Path)
	}
	return loc, c.check("Resolve("+p.String()+")", err)
}
