package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/vfs"
)

// parents makes p's parent directories exist in the upper (copying their modes
// from the lower). o.mu is held.
func (o *Overlay) parents(ctx context.Context, p vfs.Path) error {
	if p.Depth() <= 1 {
		return nil
	}
	return o.copyUpDir(ctx, p.Dir())
}

// copyUpDir makes directory p exist in the upper, with the lower's mode and
// time. o.mu is held.
func (o *Overlay) copyUpDir(ctx context.Context, p vfs.Path) error {
	if p.IsRoot() {
		return nil
	}
	if info, err := o.upper.Lstat(ctx, p); err == nil {
		if info.Mode.IsDir() {
			return nil
		}
		return notDir("copyup", p, info)
	}
	if err := o.parents(ctx, p); err != nil {
		return err
	}
	if o.hidden(p) {
		return notFound("copyup", p)
	}
	info, err := o.lower.Lstat(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	if !info.Mode.IsDir() {
		return notDir("copyup", p, info)
	}
	if err := o.upper.Mkdir(ctx, p, info.Mode.Perm()|0o700); err != nil && vfs.CodeOf(err) != vfs.CodeExists {
		return err
	}
	_ = o.upper.Chtimes(ctx, p, time.Time{}, info.ModTime)
	o.keepOrigin(ctx, p, info)
	if _, ok := o.base[p.Raw()]; !ok {
		o.setBase(p, info, Base{Type: fs.ModeDir, Mode: info.Mode.Perm(), ModTime: info.ModTime})
	}
	return nil
}

// copyUp copies the lower entry at p into the upper unless the upper has p
// already, recording its Base; a directory is copied with its whole subtree
// when deep is set, as an empty directory otherwise. not_found when the lower
// has nothing visible at p. o.mu is held.
func (o *Overlay) copyUp(ctx context.Context, p vfs.Path, deep bool) error {
	uinfo, err := o.upper.Lstat(ctx, p)
	switch {
	case err == nil:
		return o.completeDir(ctx, p, uinfo, deep)
	case vfs.CodeOf(err) != vfs.CodeNotFound:
		return err
	case o.hidden(p):
		return notFound("copyup", p)
	}
	info, err := o.lower.Lstat(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	if err := o.parents(ctx, p); err != nil {
		return err
	}
	switch {
	case info.Mode.IsDir():
		if err := o.copyUpDir(ctx, p); err != nil || !deep {
			return err
		}
		return o.copyUpChildren(ctx, p)
	case info.Mode&fs.ModeSymlink != 0:
		return o.copyUpLink(ctx, p, info)
	case info.Mode.IsRegular():
		return o.copyUpFile(ctx, p, info)
	}
	return vfs.NewError(vfs.CodeNotRegular, "copyup", p, "")
}

// completeDir brings the rest of directory p up for a deep copy-up, where
// the upper holds p (uinfo) only as the parent of an earlier change and the
// lower still has it. o.mu is held.
func (o *Overlay) completeDir(ctx context.Context, p vfs.Path, uinfo vfs.Info, deep bool) error {
	if !deep || !uinfo.Mode.IsDir() || o.opaque[p.Raw()] {
		return nil
	}
	low, err := o.inLower(ctx, p)
	if err != nil || !low {
		return err
	}
	return o.copyUpChildren(ctx, p)
}

// copyUpLink copies the lower symlink at p (info its Lstat) up, its target
// the Base's. o.mu is held.
func (o *Overlay) copyUpLink(ctx context.Context, p vfs.Path, info vfs.Info) error {
	t, err := o.lower.Readlink(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	if err := o.upper.Symlink(ctx, t, p); err != nil {
		return err
	}
	// The copy keeps the link's time where the upper can set it.
	_ = vfs.Lchtimes(ctx, o.upper, p, time.Time{}, info.ModTime)
	o.keepOrigin(ctx, p, info)
	o.setBase(p, info, Base{Type: fs.ModeSymlink, Target: t, ModTime: info.ModTime})
	return nil
}

// copyUpFile copies the lower file at p (info its Lstat) up, hashing what
// it copies for the Base: the digest is left unknown when the host changed
// the file during the copy. o.mu is held.
func (o *Overlay) copyUpFile(ctx context.Context, p vfs.Path, info vfs.Info) error {
	src, err := o.lower.OpenFile(ctx, p.Unresolved(), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := o.upper.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode.Perm())
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = o.upper.Remove(ctx, p)
		return vfs.Errno("copyup", p, err)
	}
	_ = o.upper.Chtimes(ctx, p, time.Time{}, info.ModTime)
	o.keepOrigin(ctx, p, info)
	o.tellReaders(ctx, p, info.ID)
	digest := hex.EncodeToString(h.Sum(nil))
	if after, err := src.Stat(); err != nil || !sightOf(info).same(after) {
		digest = "" // the host changed it during the copy: contents unknown, a conflict at sync-back
	}
	o.setBase(p, info, Base{Mode: info.Mode.Perm(), Size: n, ModTime: info.ModTime, Digest: digest})
	return nil
}

// copyUpChildren copies every visible lower entry beneath directory p up,
// whole, and marks p opaque: the upper then holds all of it. o.mu is held.
func (o *Overlay) copyUpChildren(ctx context.Context, p vfs.Path) error {
	ents, err := o.lower.ReadDir(ctx, p.Unresolved())
	if err != nil {
		return err
	}
	for _, e := range ents {
		c, cerr := p.Child(e.Name)
		if cerr != nil || o.whiteout[c.Raw()] {
			continue
		}
		if err := o.copyUp(ctx, c, true); err != nil {
			return err
		}
	}
	o.opaque[p.Raw()] = true
	return nil
}
