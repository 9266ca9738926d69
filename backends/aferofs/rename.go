package aferofs

import (
	"context"
	"errors"
	"io/fs"
	"strconv"

	"github.com/capfs/capfs/vfs"
)

// Rename implements vfs.Backend.
func (b *Backend) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	if err := b.mutation(ctx, op, from); err != nil {
		return err
	}
	defer b.s.mu.Unlock()
	return b.rename(ctx, from, to, flags)
}

func (b *Backend) rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	const op = "rename"
	if err := vfs.CheckRenameFlags(from, to, flags); err != nil {
		return err
	}
	rf, err := b.lookupEntry(ctx, from, op)
	if err != nil {
		return vfs.Readdress(err, op, from.String(), to.String())
	}
	rt, err := b.lookupEntry(ctx, to, op)
	if err != nil {
		return vfs.Readdress(err, op, from.String(), to.String())
	}
	src, dst, ends := b.renameEnds(rf, rt, from, to, flags)
	switch act, err := vfs.CheckRename(&ends); {
	case err != nil:
		return err
	case act == vfs.RenameNone:
		return nil
	case act == vfs.RenameSwap:
		return b.exchange(src, dst, rf.Parent.p, from, to)
	}
	err = b.s.fs.Rename(src, dst)
	if err != nil && rt.Found && errors.Is(err, fs.ErrExist) {
		// Filesystems whose Rename will not replace: remove the (checked) destination.
		if err = b.s.fs.Remove(dst); err == nil {
			err = b.s.fs.Rename(src, dst)
		}
	}
	if err != nil {
		return vfs.Readdress(errOf(op, from, err), op, from.String(), to.String())
	}
	return nil
}

// renameEnds describes a rename's two ends, looked up as rf and rt, for
// vfs.CheckRename, with their afero paths.
func (b *Backend) renameEnds(rf, rt vfs.Resolution[node], from, to vfs.Path, flags vfs.RenameFlags) (src, dst string, ends vfs.RenameEnds) {
	dst = where(rt)
	tr := tree{b.s}
	ends = vfs.RenameEnds{From: from, To: to, Flags: flags,
		SrcFound: rf.Found, DstFound: rt.Found, SrcRoot: rf.Name == "", DstRoot: rt.Name == ""}
	if rf.Found {
		src = rf.Node.p
		ends.SrcDir = tr.Type(rf.Node).IsDir()
	}
	if rt.Found {
		ends.DstDir = tr.Type(rt.Node).IsDir()
	}
	ends.SameEntry = rf.Found && src == dst
	ends.SrcAbove = func() bool { return under(dst, src) }
	ends.DstAbove = func() bool { return under(src, dst) }
	ends.DstEmpty = func() (bool, error) {
		empty, err := b.s.isEmptyDir(dst)
		if err != nil {
			return false, vfs.Readdress(errOf("rename", to, err), "rename", from.String(), to.String())
		}
		return empty, nil
	}
	return src, dst, ends
}

// under reports whether afero path p lies strictly beneath directory dir.
func under(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// exchange swaps src and dst through a temporary name in src's directory.
func (b *Backend) exchange(src, dst, srcParent string, from, to vfs.Path) error {
	const op = "rename"
	addr := func(err error) error {
		return vfs.Readdress(errOf(op, from, err), op, from.String(), to.String())
	}
	var tmp string
	for {
		tmp = join(srcParent, ".capfs-exchange-"+strconv.FormatUint(b.s.tmpN.Add(1), 36))
		if _, err := b.s.lstat(tmp); errors.Is(err, fs.ErrNotExist) {
			break
		} else if err != nil {
			return addr(err)
		}
	}
	if err := b.s.fs.Rename(src, tmp); err != nil {
		return addr(err)
	}
	if err := b.s.fs.Rename(dst, src); err != nil {
		_ = b.s.fs.Rename(tmp, src)
		return addr(err)
	}
	if err := b.s.fs.Rename(tmp, dst); err != nil {
		if b.s.fs.Rename(src, dst) == nil {
			_ = b.s.fs.Rename(tmp, src)
		}
		return addr(err)
	}
	return nil
}
