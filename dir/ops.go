package dir

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// tempPrefix starts the name of the temporary file an atomic write creates beside
// its target.
const tempPrefix = ".capfs-tmp-"

// source produces the bytes an atomic write stores.
type source func(w io.Writer) error

func bytesSource(b []byte) source {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// copyBufSize is the buffer for streaming copies.
const copyBufSize = 64 << 10

// streamSource copies file p of b, whose errors are reported at name (a path
// relative to the Dir) since the guest named it as the source.
func streamSource(ctx context.Context, b vfs.Backend, p vfs.Path, method, name string) source {
	return func(w io.Writer) error {
		f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
		if err != nil {
			return &addressed{readdress(err, method, name, "")}
		}
		defer f.Close()
		buf := make([]byte, copyBufSize)
		for {
			n, rerr := f.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
			}
			if rerr == io.EOF {
				return nil
			}
			if rerr != nil {
				return &addressed{readdress(rerr, method, name, "")}
			}
			if err := ctx.Err(); err != nil {
				return canceled(method, p, err)
			}
		}
	}
}

// readAll reads regular file p, refusing more than max bytes. It reads at most
// max+1 bytes whatever the file's reported size, so a file that grows while being
// read, or lies about its size, cannot make it allocate more.
func readAll(ctx context.Context, b vfs.Backend, p vfs.Path, max int64) ([]byte, error) {
	f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpen(f, p, max)
}

func readOpen(f vfs.File, p vfs.Path, max int64) ([]byte, error) {
	info, ok := vfs.OpenStat(f) // the status the open checked: no fstat
	if !ok {
		var err error
		if info, err = f.Stat(); err != nil {
			return nil, err
		}
	}
	switch {
	case info.Mode.IsDir():
		return nil, vfs.NewError(vfs.CodeIsDir, "read", p, "")
	case !info.Mode.IsRegular():
		return nil, vfs.NewError(vfs.CodeNotRegular, "read", p, "")
	case info.Size > max:
		return nil, tooLarge(p, max)
	}
	hint := info.Size + 1
	if hint < 512 {
		hint = 512
	}
	if hint > max+1 {
		hint = max + 1
	}
	buf := make([]byte, 0, hint)
	for {
		if len(buf) == cap(buf) {
			grow := int64(cap(buf))
			if room := max + 1 - int64(cap(buf)); grow > room {
				grow = room
			}
			buf = append(buf[:cap(buf)], make([]byte, grow)...)[:len(buf)]
		}
		n, rerr := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, tooLarge(p, max)
		}
		if rerr == io.EOF {
			return buf, nil
		}
		if rerr != nil {
			return nil, rerr
		}
	}
}

func tooLarge(p vfs.Path, max int64) error {
	return vfs.NewError(vfs.CodeTooLarge, "read", p, "file exceeds the read limit of "+formatSize(max)+"; use Open to stream it")
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// tempName returns a fresh, unpredictable temporary name.
func tempName() string {
	var b [8]byte
	v := rand.Uint64()
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return tempPrefix + hex.EncodeToString(b[:])
}

// atomicWrite replaces file p's contents with what src writes: it writes a temporary
// sibling and renames it over the target, removing it on any failure. A final
// symlink is followed (the link is kept and its target replaced). An existing file
// keeps its permission bits; a new one gets perm.
func atomicWrite(ctx context.Context, b vfs.Backend, p vfs.Path, src source, perm fs.FileMode) (err error) {
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeIsDir, "write", p, "")
	}
	if p.MustBeDir() {
		if _, err := b.Stat(ctx, p); err != nil {
			return err
		}
		return vfs.NewError(vfs.CodeIsDir, "write", p, "")
	}
	target, info, found, inPlace, err := finalTarget(ctx, b, p)
	if err != nil {
		return err
	}
	if inPlace {
		return writeInPlace(ctx, b, p, src, perm)
	}
	replacing := false
	if found {
		if info.Mode.IsDir() {
			return vfs.NewError(vfs.CodeIsDir, "write", p, "")
		}
		if !info.Mode.IsRegular() {
			return vfs.NewError(vfs.CodeNotRegular, "write", p, "")
		}
		perm = info.Mode & (fs.ModePerm | fs.ModeSticky)
		replacing = true
	}
	var tmp vfs.Path
	var f vfs.File
	for range 4 {
		tmp, err = target.Dir().Child(tempName())
		if err != nil {
			return err
		}
		f, err = b.OpenFile(ctx, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if codeOf(err) != vfs.CodeExists {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = b.Remove(context.WithoutCancel(ctx), tmp)
		}
	}()
	if err = src(f); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if replacing && b.Features().Chmod {
		if err = b.Chmod(ctx, tmp, perm); err != nil && codeOf(err) != vfs.CodeNotSupported {
			return err
		}
	}
	return b.Rename(ctx, tmp, target, 0)
}

// finalTarget follows final symlinks of p lexically, within the backend, to the path
// an atomic write must replace, and returns what is there (its Lstat, which is its
// Stat since it is not a symlink) if found. inPlace reports that the lexical answer
// cannot be trusted to match the backend's physical resolution (a ".." in a target,
// with no inode identity to confirm it): the caller then writes through p in place.
func finalTarget(ctx context.Context, b vfs.Backend, p vfs.Path) (target vfs.Path, info vfs.Info, found, inPlace bool, err error) {
	cur := p
	hops := 0
	dotdot := false
	for {
		info, err = b.Lstat(ctx, cur)
		if codeOf(err) == vfs.CodeNotFound {
			break
		}
		if err != nil {
			return vfs.Path{}, vfs.Info{}, false, false, err
		}
		if info.Mode&fs.ModeSymlink == 0 {
			found = true
			break
		}
		if cur.IsResolved() {
			// The call was decided on a location that held no link: one stands
			// there now, swapped in after the decision. Follow nothing.
			return vfs.Path{}, vfs.Info{}, false, false, vfs.NewError(vfs.CodeConflict, "write", p, "a symlink stands on a resolved path (it changed after the decision)")
		}
		if hops == vfs.MaxSymlinks {
			return vfs.Path{}, vfs.Info{}, false, false, vfs.NewError(vfs.CodeTooManyLinks, "write", p, "")
		}
		hops++
		t, err := b.Readlink(ctx, cur)
		if err != nil {
			return vfs.Path{}, vfs.Info{}, false, false, err
		}
		if strings.HasPrefix(t, "/") {
			return vfs.Path{}, vfs.Info{}, false, false, vfs.NewError(vfs.CodeOutside, "write", p, "symlink target is absolute")
		}
		if strings.Contains(t, "..") {
			dotdot = true
		}
		next, err := vfs.ParseGuest(cur.Dir().Raw() + "/" + t)
		if err != nil {
			return vfs.Path{}, vfs.Info{}, false, false, vfs.Readdress(err, "write", p.String(), "")
		}
		if next.MustBeDir() || next.IsRoot() {
			return p, vfs.Info{}, false, true, nil // let the backend report what writing there means
		}
		cur = next
	}
	if !found {
		info = vfs.Info{}
	}
	if hops == 0 || !dotdot {
		return cur, info, found, false, nil
	}
	a, errA := b.Stat(ctx, p)
	c, errC := b.Stat(ctx, cur)
	if errA == nil && errC == nil && a.ID != 0 && a.ID == c.ID {
		return cur, info, found, false, nil
	}
	return p, vfs.Info{}, false, true, nil
}

func writeInPlace(ctx context.Context, b vfs.Backend, p vfs.Path, src source, perm fs.FileMode) error {
	f, err := b.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if err := src(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func appendTo(ctx context.Context, b vfs.Backend, p vfs.Path, data []byte) error {
	f, err := b.OpenFile(ctx, p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mkdirAll creates p and its missing parents.
func mkdirAll(ctx context.Context, b vfs.Backend, p vfs.Path, perm fs.FileMode) error {
	if p.IsRoot() {
		return nil
	}
	info, err := b.Stat(ctx, p)
	if err == nil {
		if info.Mode.IsDir() {
			return nil
		}
		return vfs.NewError(vfs.CodeNotDir, "mkdir", p, "")
	}
	if c := codeOf(err); c != vfs.CodeNotFound {
		return err
	}
	cur := relRoot(p)
	for _, name := range p.Elems() {
		if cur, err = cur.Child(name); err != nil {
			return err
		}
		err := b.Mkdir(ctx, cur, perm)
		if err == nil {
			continue
		}
		if codeOf(err) != vfs.CodeExists {
			return err
		}
		info, serr := b.Stat(ctx, cur)
		switch {
		case serr == nil && info.Mode.IsDir():
			continue
		case serr == nil || codeOf(serr) == vfs.CodeNotFound:
			// A file, or a dangling symlink: never create the link's target.
			return vfs.NewError(vfs.CodeNotDir, "mkdir", cur, "")
		default:
			return serr
		}
	}
	return nil
}

// checkLive fails a long operation once the capability is revoked or ctx is done.
func (s *scope) checkLive(ctx context.Context, method string, p vfs.Path) error {
	if s.gate.isRevoked() {
		return &addressed{errAt(vfs.CodeRevoked, method, p.String(), "", "capability revoked")}
	}
	if err := ctx.Err(); err != nil {
		return &addressed{canceled(method, p, err)}
	}
	return nil
}

// at addresses a backend error about p (a path relative to the Dir) for the guest.
func at(err error, method string, p vfs.Path) error {
	if err == nil {
		return nil
	}
	var a *addressed
	if errors.As(err, &a) {
		return err
	}
	return &addressed{readdress(err, method, p.String(), "")}
}

// collectTree lists everything beneath directory p, without following symlinks:
// every entry once, parents before their children. Entries are relative to p.
type treeEntry struct {
	rel  vfs.Path
	typ  fs.FileMode
	perm fs.FileMode
}

func (s *scope) collectTree(ctx context.Context, method string, p vfs.Path, withInfo bool) ([]treeEntry, error) {
	var out []treeEntry
	var walk func(rel vfs.Path) error
	walk = func(rel vfs.Path) error {
		full := p.Join(rel)
		if err := s.checkLive(ctx, method, full); err != nil {
			return err
		}
		ents, err := s.b.ReadDir(ctx, full)
		if err != nil {
			return at(err, method, full)
		}
		for _, e := range ents {
			r, err := rel.Child(e.Name)
			if err != nil {
				return at(err, method, full)
			}
			te := treeEntry{rel: r, typ: e.Type & fs.ModeType}
			if withInfo && te.typ&fs.ModeSymlink == 0 {
				info, err := s.b.Lstat(ctx, p.Join(r))
				if err != nil {
					return at(err, method, p.Join(r))
				}
				te.typ = info.Mode & fs.ModeType
				te.perm = info.Mode & (fs.ModePerm | fs.ModeSticky)
			}
			out = append(out, te)
			if te.typ == fs.ModeDir {
				if err := walk(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(relRoot(p)); err != nil {
		return nil, err
	}
	return out, nil
}

// removeAll removes p and everything beneath it, never following a symlink: links
// are removed, not their targets. The policy is checked for every path before
// anything is removed.
func (s *scope) removeAll(ctx context.Context, c *call, p vfs.Path, checkInner bool) error {
	const method = "RemoveAll"
	if p.IsRoot() {
		return errAt(vfs.CodeInvalidPath, method, c.path, "", "cannot remove the root")
	}
	mustDir := p.MustBeDir()
	p = p.WithoutDirMark()
	info, err := s.b.Lstat(ctx, p)
	if codeOf(err) == vfs.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.Mode.IsDir() {
		if mustDir {
			return vfs.NewError(vfs.CodeNotDir, method, p, "")
		}
		return s.b.Remove(ctx, p)
	}
	tree, err := s.collectTree(ctx, method, p, false)
	if err != nil {
		return err
	}
	if checkInner {
		for _, te := range tree {
			q := p.Join(te.rel)
			if d, ok := s.allowInner(ctx, c, policy.OpRemove, q, nil); !ok {
				return innerDenied(method, q, d)
			}
		}
	}
	for i := len(tree) - 1; i >= 0; i-- {
		q := p.Join(tree[i].rel)
		if err := s.checkLive(ctx, method, q); err != nil {
			return err
		}
		if err := s.b.Remove(ctx, q); err != nil && codeOf(err) != vfs.CodeNotFound {
			return at(err, method, q)
		}
	}
	if err := s.b.Remove(ctx, p); err != nil && codeOf(err) != vfs.CodeNotFound {
		return err
	}
	return nil
}

// copyTree copies from to to within the scope's backend: a file's contents (written
// atomically, replacing a file at to), a symlink as a link (its target re-checked
// from its new place), or a directory recursively (to must not exist). op is the
// policy op for every inner path (OpCopy, or OpRename for a Move that copies).
// Nothing is changed if the policy refuses any path; if copying fails midway, what
// was created is removed.
func (s *scope) copyTree(ctx context.Context, c *call, method string, from, to vfs.Path, op policy.Op) error {
	if from.MustBeDir() {
		if info, err := s.b.Stat(ctx, from); err != nil {
			return err
		} else if !info.Mode.IsDir() {
			return vfs.NewError(vfs.CodeNotDir, method, from, "")
		}
	}
	from, to = from.WithoutDirMark(), to.WithoutDirMark()
	info, err := s.b.Lstat(ctx, from)
	if err != nil {
		return err
	}
	typ := info.Mode & fs.ModeType
	switch {
	case typ == fs.ModeSymlink:
		t, err := s.b.Readlink(ctx, from)
		if err != nil {
			return err
		}
		if err := s.allowLink(ctx, c, method, to, t); err != nil {
			return err
		}
		return s.b.Symlink(ctx, t, to)
	case typ == 0:
		if err := s.allowSize(ctx, c, method, op, to, info.Size); err != nil {
			return err
		}
		return atomicWrite(ctx, s.b, to, streamSource(ctx, s.b, from, method, from.String()), info.Mode&fs.ModePerm)
	case typ != fs.ModeDir:
		return vfs.NewError(vfs.CodeNotRegular, method, from, "")
	}
	if to.HasPrefix(from) {
		return vfs.NewError(vfs.CodeInvalidPath, method, from, "cannot copy a directory into itself")
	}
	tree, err := s.collectTree(ctx, method, from, true)
	if err != nil {
		return err
	}
	targets := make(map[int]string)
	for i, te := range tree {
		src, dst := from.Join(te.rel), to.Join(te.rel)
		if err := s.allowCopy(ctx, c, method, op, src, dst); err != nil {
			return err
		}
		if te.typ == fs.ModeSymlink {
			t, err := s.b.Readlink(ctx, src)
			if err != nil {
				return at(err, method, src)
			}
			if _, _, err := s.linkTarget(dst, t); err != nil {
				return at(vfs.Readdress(err, method, src.String(), dst.String()), method, src)
			}
			if err := s.allowLink(ctx, c, method, dst, t); err != nil {
				return err
			}
			targets[i] = t
		}
	}
	if err := s.b.Mkdir(ctx, to, info.Mode&(fs.ModePerm|fs.ModeSticky)); err != nil {
		return err
	}
	var created []vfs.Path
	created = append(created, to)
	fail := func(err error) error {
		bg := context.WithoutCancel(ctx)
		for i := len(created) - 1; i >= 0; i-- {
			_ = s.b.Remove(bg, created[i])
		}
		return err
	}
	for i, te := range tree {
		src, dst := from.Join(te.rel), to.Join(te.rel)
		if err := s.checkLive(ctx, method, src); err != nil {
			return fail(err)
		}
		var err error
		switch te.typ {
		case fs.ModeDir:
			err = s.b.Mkdir(ctx, dst, te.perm)
		case fs.ModeSymlink:
			err = s.b.Symlink(ctx, targets[i], dst)
		case 0:
			err = copyFile(ctx, s.b, src, dst, te.perm, method)
		default:
			err = vfs.NewError(vfs.CodeNotRegular, method, src, "")
		}
		if err != nil {
			if codeOf(err) != vfs.CodeExists {
				// Created, perhaps partly (a file): remove it on the way out.
				created = append(created, dst)
			}
			return fail(at(err, method, dst))
		}
		created = append(created, dst)
	}
	return nil
}

// allowCopy asks the policy about one path a copy touches: as a read of the source
// (for OpCopy) and as op from src to dst.
func (s *scope) allowCopy(ctx context.Context, c *call, method string, op policy.Op, src, dst vfs.Path) error {
	if op == policy.OpCopy {
		if d, ok := s.allowInner(ctx, c, policy.OpRead, src, nil); !ok {
			return innerDenied(method, src, d)
		}
	}
	if d, ok := s.allowInner(ctx, c, op, src, &dst); !ok {
		return innerDenied(method, src, d)
	}
	if s.env.customPolicy {
		if info, err := s.b.Lstat(ctx, src); err == nil && info.Mode.IsRegular() {
			return s.allowSize(ctx, c, method, op, dst, info.Size)
		}
	}
	return nil
}

// copyFile copies regular file src to a new file dst.
func copyFile(ctx context.Context, b vfs.Backend, src, dst vfs.Path, perm fs.FileMode, method string) error {
	w, err := b.OpenFile(ctx, dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := streamSource(ctx, b, src, method, src.String())(w); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
