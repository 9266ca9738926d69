package archive

import (
	"context"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// ExtractDirFile extracts the archive file archivePath of d into d's existing
// directory dest, safely, as [Extract] describes.
//
// Every entry is decided first (names sanitized, links, devices, collisions,
// limits, and d's policy through Check). Accepted data is staged privately and
// checked (CRC, sizes). Only then is it merged into dest through ordinary Dir
// calls (Mkdir, Open with O_CREATE|O_EXCL, WriteFile to overwrite, Link,
// Symlink, Chtimes) under a Sub of dest, each decided, hooked and audited, so
// nothing outside dest can change. A refused archive changes nothing. Every
// call carries [dir.PurposeArchive].
//
// The Result lists what was extracted and what was filtered and why. Errors
// are *vfs.Error values with Op "ExtractArchive": a refusal of the archive
// names archivePath, an entry's failure the entry's path (relative to dest).
func ExtractDirFile(ctx context.Context, d *dir.Dir, archivePath, dest string, opts Options) (*Result, error) {
	ctx = dir.WithPurpose(ctx, dir.PurposeArchive)
	h, err := d.Open(ctx, archivePath, os.O_RDONLY, 0)
	if err != nil {
		return nil, vfs.Reop(err, "ExtractArchive")
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return nil, vfs.Reop(err, "ExtractArchive")
	}
	if !fi.Mode().IsRegular() {
		return nil, vfs.GuestError(vfs.CodeNotRegular, "ExtractArchive", archivePath, "", "not a regular file")
	}
	if opts.Format == FormatAuto {
		opts.Format = formatByName(h, archivePath)
	}
	res, err := extractToDir(ctx, d, h, fi.Size(), dest, opts)
	return res, nameArchive(err, archivePath)
}

// formatByName returns the format archivePath's name implies when the content
// has no magic the detector knows (a v7 tar), else FormatAuto.
func formatByName(r io.ReaderAt, archivePath string) Format {
	f := FormatForName(archivePath)
	if f == FormatAuto {
		return FormatAuto
	}
	var head [512]byte
	n, _ := r.ReadAt(head[:], 0)
	if Detect(head[:n]) != FormatAuto {
		return FormatAuto
	}
	return f
}

// nameArchive addresses a refusal of the archive itself (an error with no path
// yet) to name; an entry's failure keeps the entry's path.
func nameArchive(err error, name string) error {
	if ve, ok := err.(*vfs.Error); ok && ve.Path == "" {
		return vfs.Readdress(err, "ExtractArchive", vfs.PrintablePath(name), "")
	}
	return err
}

// ExtractToDir is [ExtractDirFile] for an archive the host supplies (size bytes
// readable from r) rather than one in d; a refusal of the archive names dest.
func ExtractToDir(ctx context.Context, d *dir.Dir, r io.ReaderAt, size int64, dest string, opts Options) (*Result, error) {
	ctx = dir.WithPurpose(ctx, dir.PurposeArchive)
	res, err := extractToDir(ctx, d, r, size, dest, opts)
	return res, nameArchive(err, dest)
}

func extractToDir(ctx context.Context, d *dir.Dir, r io.ReaderAt, size int64, dest string, opts Options) (*Result, error) {
	if dest == "" {
		dest = "."
	}
	sub, err := d.Sub(ctx, dest)
	if err != nil {
		return nil, vfs.Reop(err, "ExtractArchive")
	}
	return Extract(ctx, r, size, dirTarget{sub, sub.Backend()}, opts)
}

// dirTarget is a Target over a Dir.
type dirTarget struct {
	d *dir.Dir
	b vfs.Backend // d.Backend(), for Mkdir with a mode
}

func (t dirTarget) Check(ctx context.Context, op policy.Op, path, dest string, size int64) error {
	return t.d.Check(ctx, op, path, dest, size)
}

func (t dirTarget) Lstat(ctx context.Context, path string) (fs.FileInfo, error) {
	return t.d.Lstat(ctx, path)
}

func (t dirTarget) Mkdir(ctx context.Context, path string, perm fs.FileMode) error {
	p, err := vfs.ParseGuest(path)
	if err == nil {
		err = t.b.Mkdir(ctx, p, perm)
	}
	return vfs.Readdress(err, "Mkdir", vfs.PrintablePath(path), "")
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

// CreateFromDir writes the tree below d's directory src into w as an archive
// (tar.zst by default, or tar, tar.gz, zip), reproducibly, as [Create]
// describes. Every read is an ordinary Dir call carrying
// [dir.PurposeArchive]; entries the policy refuses to read are left out and
// listed in the result.
func CreateFromDir(ctx context.Context, d *dir.Dir, src string, w io.Writer, opts CreateOptions) (*CreateResult, error) {
	ctx = dir.WithPurpose(ctx, dir.PurposeArchive)
	if src == "" {
		src = "."
	}
	fi, err := d.Stat(ctx, src)
	if err != nil {
		return nil, vfs.Reop(err, "CreateArchive")
	}
	if !fi.IsDir() {
		return nil, vfs.GuestError(vfs.CodeNotDir, "CreateArchive", src, "", "not a directory")
	}
	return Create(ctx, w, dirSource{d}, src, opts)
}

// dirSource is a Source over a Dir.
type dirSource struct{ d *dir.Dir }

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
