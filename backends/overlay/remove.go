package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"

	"github.com/capfs/capfs/vfs"
)

// Remove removes p: from the upper, and with a whiteout where the lower has it.
// A directory must be empty in the merged view. The lower entry's Base comes
// from its sight (see sight.go): a removal reads none of its contents.
func (o *Overlay) Remove(ctx context.Context, p vfs.Path) error {
	p, err := o.atEntry(ctx, "remove", p)
	if err != nil {
		return err
	}
	if p.IsRoot() {
		return vfs.NewError(vfs.CodeInvalidPath, "remove", p, "")
	}
	inUpper, info, err := o.layerResolved(ctx, "remove", p)
	if err != nil {
		return err
	}
	if info.Mode.IsDir() {
		ents, err := o.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		if len(ents) > 0 {
			return vfs.NewError(vfs.CodeNotEmpty, "remove", p, "")
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	low, lowInfo, err := o.lowerOf(ctx, p, inUpper, info)
	if err != nil {
		return err
	}
	if low {
		if _, ok := o.base[p.Raw()]; !ok {
			if err := o.recordBase(ctx, p, lowInfo); err != nil {
				return err
			}
		}
	}
	if _, err := o.upper.Lstat(ctx, p); err == nil {
		if err := o.removeUpper(ctx, p); err != nil {
			return err
		}
	} else if err := notAnswer(err); err != nil {
		return err
	}
	if low {
		o.whiteout[p.Raw()] = true
	}
	delete(o.opaque, p.Raw())
	return nil
}

// lowerOf reports whether the lower has a visible entry at p, with its
// Lstat when known: a lookup that served p from the lower (inUpper false,
// info its Lstat) answers, unless p was hidden since; else the lower is
// asked (its Lstat is then left for recordBase). o.mu is held.
func (o *Overlay) lowerOf(ctx context.Context, p vfs.Path, inUpper bool, info vfs.Info) (bool, *vfs.Info, error) {
	if !inUpper {
		if o.hidden(p) {
			return false, nil, notFound("remove", p) // removed meanwhile
		}
		return true, &info, nil
	}
	low, err := o.inLower(ctx, p)
	return low, nil, err
}

// removeUpper removes p from the upper, a directory with whatever the upper
// holds beneath it (entries the merged view already showed as removed).
func (o *Overlay) removeUpper(ctx context.Context, p vfs.Path) error {
	info, err := o.upper.Lstat(ctx, p)
	if err != nil {
		return err
	}
	if info.Mode.IsDir() {
		ents, err := o.upper.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			c, _ := p.Child(e.Name)
			if err := o.removeUpper(ctx, c); err != nil {
				return err
			}
		}
	}
	if err := o.upper.Remove(ctx, p); err != nil {
		return err
	}
	o.forgetLast(info)
	return nil
}

// recordBase records the Base of the lower entry at p (for a deletion, or a
// rename over it), as the process first saw it; info is its Lstat when the
// caller has it. A regular file's digest or a symlink's target is read now
// only when the process never saw the entry; else it is the sight's (see
// deferBase). o.mu is held.
func (o *Overlay) recordBase(ctx context.Context, p vfs.Path, info *vfs.Info) error {
	if info == nil {
		li, err := o.lower.Lstat(ctx, p.Unresolved())
		if err != nil {
			return err
		}
		info = &li
	}
	b := Base{Type: info.Mode.Type(), Mode: info.Mode.Perm(), ModTime: info.ModTime}
	if info.Mode.IsRegular() {
		b.Size = info.Size
	}
	if o.deferBase(p, *info, b) {
		return nil
	}
	switch {
	case info.Mode&fs.ModeSymlink != 0:
		b.Target, _ = o.lower.Readlink(ctx, p.Unresolved())
	case info.Mode.IsRegular():
		f, err := o.lower.OpenFile(ctx, p.Unresolved(), os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return vfs.Errno("remove", p, err)
		}
		b.Digest = hex.EncodeToString(h.Sum(nil))
	}
	o.setBase(p, *info, b)
	return nil
}
