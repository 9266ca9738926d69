package dir

import (
	"context"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// purposeKey marks the context of every Dir call a composite operation of this
// package makes on the guest's behalf (an archive extraction or creation, a
// watch), so that a policy can require more than the per-call access: package
// authority requires its Archive access for the calls an ExtractArchive or
// CreateArchive makes. Only this package sets it.
type purposeKey struct{}

// The purposes Purpose reports.
const (
	PurposeArchive = "archive" // the calls of ExtractArchive, ExtractArchiveFrom and CreateArchive
	PurposeWatch   = "watch"   // the decisions of Watch
)

// Purpose returns the composite operation the call ctx belongs to (PurposeArchive,
// PurposeWatch), or "" for a plain call. Policies and hooks read it from the
// context they are given; a guest cannot set it.
func Purpose(ctx context.Context) string {
	s, _ := ctx.Value(purposeKey{}).(string)
	return s
}

func withPurpose(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, purposeKey{}, p)
}

// ExtractArchive extracts the archive file archivePath (read through this Dir)
// into the existing directory dest, safely, as archive.Extract describes: every
// entry is decided first (names sanitized, links, devices, collisions,
// limits, and this Dir's policy through Check), accepted data is staged
// privately and checked (CRC, sizes), and only then merged into dest through
// ordinary Dir calls (MkdirAll, Open with O_CREATE|O_EXCL, WriteFile to
// overwrite, Link, Symlink, Chmod, Chtimes), each decided, hooked and audited
// as any call, under a Sub of dest, so nothing outside dest can change. A
// refused archive changes nothing. Every call carries Purpose PurposeArchive.
//
// The Result lists what was extracted and what was filtered and why. Errors are
// *vfs.Error values (see archive.Extract), addressed to archivePath.
func (d *Dir) ExtractArchive(ctx context.Context, archivePath, dest string, opts archive.Options) (*archive.Result, error) {
	ctx = withPurpose(ctx, PurposeArchive)
	h, err := d.Open(ctx, archivePath, os.O_RDONLY, 0)
	if err != nil {
		return nil, reop(err, "ExtractArchive")
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return nil, reop(err, "ExtractArchive")
	}
	if !fi.Mode().IsRegular() {
		return nil, errAt(vfs.CodeNotRegular, "ExtractArchive", archivePath, "", "not a regular file")
	}
	if opts.Format == archive.FormatAuto {
		if f := archive.FormatForName(archivePath); f != archive.FormatAuto {
			var head [512]byte
			n, _ := h.ReadAt(head[:], 0)
			if archive.Detect(head[:n]) == archive.FormatAuto {
				opts.Format = f // e.g. a v7 tar without a magic
			}
		}
	}
	res, err := d.extract(ctx, h, fi.Size(), dest, opts)
	if ve, ok := err.(*vfs.Error); ok && ve.Path == "" {
		// A refusal of the archive itself names it; an entry's failure keeps
		// the entry's path (relative to dest).
		return res, readdress(err, "ExtractArchive", archivePath, "")
	}
	return res, err
}

// ExtractArchiveFrom is ExtractArchive for an archive the host supplies (size
// bytes readable from r) rather than one in the Dir.
func (d *Dir) ExtractArchiveFrom(ctx context.Context, r io.ReaderAt, size int64, dest string, opts archive.Options) (*archive.Result, error) {
	ctx = withPurpose(ctx, PurposeArchive)
	res, err := d.extract(ctx, r, size, dest, opts)
	if err != nil {
		if ve, ok := err.(*vfs.Error); ok && ve.Path == "" {
			return res, readdress(err, "ExtractArchive", dest, "")
		}
		return res, err
	}
	return res, nil
}

func (d *Dir) extract(ctx context.Context, r io.ReaderAt, size int64, dest string, opts archive.Options) (*archive.Result, error) {
	if dest == "" {
		dest = "."
	}
	sub, err := d.Sub(ctx, dest)
	if err != nil {
		return nil, reop(err, "ExtractArchive")
	}
	return archive.Extract(ctx, r, size, dirTarget{sub}, opts)
}

// dirTarget is an archive.Target over a Dir.
type dirTarget struct{ d *Dir }

func (t dirTarget) Check(ctx context.Context, op policy.Op, path, dest string, size int64) error {
	return t.d.Check(ctx, op, path, dest, size)
}

func (t dirTarget) Lstat(ctx context.Context, path string) (fs.FileInfo, error) {
	return t.d.Lstat(ctx, path)
}

func (t dirTarget) Mkdir(ctx context.Context, path string, perm fs.FileMode) error {
	c := &call{op: policy.OpMkdir, method: "Mkdir", path: path, fol: followEntry}
	err := t.d.do(ctx, c, func(ctx context.Context) error {
		return t.d.s.b.Mkdir(ctx, c.rp, createPerm(perm))
	})
	return err
}

func (t dirTarget) Create(ctx context.Context, path string, perm fs.FileMode, r io.Reader, size int64, replace bool) error {
	if replace {
		data, err := io.ReadAll(io.LimitReader(r, size))
		if err != nil {
			return err
		}
		return t.d.WriteFile(ctx, path, data, perm)
	}
	h, err := t.d.Open(ctx, path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(struct{ io.Writer }{h}, r)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = t.d.Remove(context.WithoutCancel(ctx), path)
	}
	return err
}

func (t dirTarget) Symlink(ctx context.Context, target, link string) error {
	return t.d.Symlink(ctx, target, link)
}

func (t dirTarget) Link(ctx context.Context, oldname, newname string) error {
	return t.d.Link(ctx, oldname, newname)
}

func (t dirTarget) Chtimes(ctx context.Context, path string, atime, mtime time.Time) error {
	return t.d.Chtimes(ctx, path, atime, mtime)
}

func (t dirTarget) Remove(ctx context.Context, path string) error {
	return t.d.Remove(ctx, path)
}

// CreateArchive writes the tree below src into w as an archive (tar.zst by
// default, or tar, tar.gz, zip), reproducibly, as archive.Create describes.
// Every read is an ordinary Dir call carrying Purpose PurposeArchive; entries
// the policy refuses to read are left out and listed in the result.
func (d *Dir) CreateArchive(ctx context.Context, src string, w io.Writer, opts archive.CreateOptions) (*archive.CreateResult, error) {
	ctx = withPurpose(ctx, PurposeArchive)
	if src == "" {
		src = "."
	}
	fi, err := d.Stat(ctx, src)
	if err != nil {
		return nil, reop(err, "CreateArchive")
	}
	if !fi.IsDir() {
		return nil, errAt(vfs.CodeNotDir, "CreateArchive", src, "", "not a directory")
	}
	return archive.Create(ctx, w, dirSource{d}, src, opts)
}

// dirSource is an archive.Source over a Dir.
type dirSource struct{ d *Dir }

func (s dirSource) ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	return s.d.ReadDir(ctx, path)
}

func (s dirSource) Lstat(ctx context.Context, path string) (fs.FileInfo, error) {
	return s.d.Lstat(ctx, path)
}

func (s dirSource) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	return s.d.Open(ctx, path, os.O_RDONLY, 0)
}

func (s dirSource) Readlink(ctx context.Context, path string) (string, error) {
	return s.d.Readlink(ctx, path)
}
