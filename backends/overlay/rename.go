package overlay

import (
	"context"

	"github.com/capfs/capfs/vfs"
)

// Rename moves from to to, copying from up first (a directory with its
// subtree). RenameExchange copies both up and swaps them in the upper.
func (o *Overlay) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	src, dst, fi, ti, act, err := o.renameEnds(ctx, from, to, flags)
	switch {
	case err != nil:
		return err
	case act == vfs.RenameNone:
		return nil
	case act == vfs.RenameSwap:
		return o.exchange(ctx, src, dst)
	}
	return o.move(ctx, src, dst, fi, ti)
}

// renameEnds resolves a rename's two ends (neither final symlink followed)
// and applies the shared preconditions to them (vfs.CheckRename), with each
// end's status (zero where absent).
func (o *Overlay) renameEnds(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) (src, dst vfs.Path, fi, ti vfs.Info, act vfs.RenameAction, err error) {
	if err = vfs.CheckRenameFlags(from, to, flags); err != nil {
		return
	}
	if src, err = o.atEntry(ctx, "rename", from); err != nil {
		return
	}
	if dst, err = o.atEntry(ctx, "rename", to); err != nil {
		return
	}
	_, fi, ferr := o.layer(ctx, "rename", src)
	_, ti, terr := o.layer(ctx, "rename", dst)
	for _, e := range []error{ferr, terr} {
		if e != nil && vfs.CodeOf(e) != vfs.CodeNotFound {
			return src, dst, fi, ti, 0, e
		}
	}
	act, err = vfs.CheckRename(&vfs.RenameEnds{
		From: from, To: to, Flags: flags,
		SrcFound: ferr == nil, DstFound: terr == nil,
		SrcRoot: src.IsRoot(), DstRoot: dst.IsRoot(),
		SrcDir: fi.Mode.IsDir(), DstDir: ti.Mode.IsDir(),
		SameEntry: src.Equal(dst),
		SrcAbove:  func() bool { return dst.HasPrefix(src) && !dst.Equal(src) },
		DstAbove:  func() bool { return src.HasPrefix(dst) && !src.Equal(dst) },
		DstEmpty: func() (bool, error) {
			ents, err := o.ReadDir(ctx, dst)
			return len(ents) == 0, err
		},
	})
	return src, dst, fi, ti, act, err
}

// move renames from to to (a free or replaceable destination, see
// renameEnds), copying from up first (a directory with its subtree).
func (o *Overlay) move(ctx context.Context, from, to vfs.Path, fi, ti vfs.Info) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	fromLow, err := o.inLower(ctx, from)
	if err != nil {
		return err
	}
	toLow, err := o.replaced(ctx, to)
	if err != nil {
		return err
	}
	if err := o.copyUp(ctx, from, true); err != nil {
		return err
	}
	if err := o.parents(ctx, to); err != nil {
		return err
	}
	if err := o.clearDir(ctx, to, ti); err != nil {
		return err
	}
	old, oldErr := o.upper.Lstat(ctx, to) // a file the rename replaces
	if err := o.upper.Rename(ctx, from, to, 0); err != nil {
		return err
	}
	if oldErr == nil {
		o.forgetLast(old)
	}
	if !toLow {
		o.sawGone(to)
	}
	// Bases recorded beneath from now describe the lower entries at from: keep
	// them (sync-back compares the source's old paths), and mark from removed.
	if fromLow {
		o.whiteout[from.Raw()] = true
	}
	delete(o.opaque, from.Raw())
	if fi.Mode.IsDir() && (toLow || o.whiteout[to.Raw()]) {
		o.opaque[to.Raw()] = true
	}
	delete(o.whiteout, to.Raw())
	return nil
}

// replaced reports whether the lower has an entry at a rename's
// destination to, recording its Base first if none is. o.mu is held.
func (o *Overlay) replaced(ctx context.Context, to vfs.Path) (bool, error) {
	toLow, err := o.inLower(ctx, to)
	if err != nil || !toLow {
		return toLow, err
	}
	if _, ok := o.base[to.Raw()]; !ok {
		err = o.recordBase(ctx, to, nil)
	}
	return true, err
}

// clearDir removes from the upper the (empty in the merged view) directory
// a rename replaces at to, ti its status, with what the upper holds beneath
// it. o.mu is held.
func (o *Overlay) clearDir(ctx context.Context, to vfs.Path, ti vfs.Info) error {
	if !ti.Mode.IsDir() {
		return nil
	}
	if _, err := o.upper.Lstat(ctx, to); err != nil {
		return nil
	}
	return o.removeUpper(ctx, to)
}

// exchange swaps from and to, both of which must exist, after copying both up
// whole.
func (o *Overlay) exchange(ctx context.Context, from, to vfs.Path) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range []vfs.Path{from, to} {
		if there, err := o.exists(ctx, p); err != nil {
			return err
		} else if !there {
			return notFound("rename", p)
		}
	}
	if from.Equal(to) {
		return nil
	}
	for _, p := range []vfs.Path{from, to} {
		if err := o.copyUp(ctx, p, true); err != nil {
			return err
		}
	}
	if err := o.upper.Rename(ctx, from, to, vfs.RenameExchange); err != nil {
		return err
	}
	// Both places now hold complete upper trees: a directory there hides the
	// lower's entries.
	for _, p := range []vfs.Path{from, to} {
		delete(o.opaque, p.Raw())
		if info, err := o.upper.Lstat(ctx, p); err == nil && info.Mode.IsDir() {
			o.opaque[p.Raw()] = true
		}
	}
	return nil
}
