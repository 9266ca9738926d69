package dir

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/capfs/capfs/vfs"
	"github.com/spf13/afero"
)

// Afero returns an afero.Fs view of d, so code written against afero runs on a
// capability. Every call is one enforced, audited call on d (with
// context.Background()), through d's public methods: revocation, read-only
// attenuation, policy, hooks and audit apply exactly as to the same call on d.
//
// Names are guest paths as Dir takes them: slash-separated, relative to d, with a
// leading "/" meaning d's own root, so the absolute names afero code habitually
// uses ("/a/b") stay inside d. The view's Name is "capfs". It also implements
// afero.Lstater, afero.Symlinker (links must stay inside d, as with Dir.Symlink)
// and returns afero.File values that wrap a *Handle, with Readdir, Readdirnames,
// ReadDir, WriteString and Name.
//
// Differences from afero.OsFs, by design:
//   - Errors are *vfs.Error values. errors.Is matches them with fs.ErrNotExist,
//     fs.ErrExist, fs.ErrPermission and the other io/fs sentinels, but os.IsNotExist
//     and os.IsExist, which predate errors.Is and only recognise *fs.PathError
//     around an errno, do not: afero.Exists and afero.DirExists report a missing
//     path as an error rather than false.
//   - Chown is Dir.Chown: not_supported where the backend keeps no owners.
//   - Chmod refuses setuid and setgid (fs_permission_denied) as Dir.Chmod does;
//     the perm given to OpenFile, Mkdir and MkdirAll keeps only the permission and
//     sticky bits, the way a umask would drop the others.
//   - Rename is Dir.Move without copying: across mounts it fails with cross_mount.
func (d *Dir) Afero() afero.Fs { return &aferoView{d: d, b: d.Backend()} }

type aferoView struct {
	d *Dir
	b vfs.Backend // d.Backend(): the same checks, for calls that need a mode
}

var (
	_ afero.Fs        = (*aferoView)(nil)
	_ afero.Lstater   = (*aferoView)(nil)
	_ afero.Symlinker = (*aferoView)(nil)
	_ afero.File      = aferoFile{}
)

// Name implements afero.Fs.
func (v *aferoView) Name() string { return "capfs" }

// Create implements afero.Fs: like os.Create, it creates or truncates name.
func (v *aferoView) Create(name string) (afero.File, error) {
	return v.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open implements afero.Fs: it opens a file or directory for reading.
func (v *aferoView) Open(name string) (afero.File, error) {
	return v.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements afero.Fs.
func (v *aferoView) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	h, err := v.d.Open(context.Background(), name, flag, createPerm(perm))
	if err != nil {
		return nil, err
	}
	return aferoFile{h}, nil
}

// parse turns name into a Path the way Dir methods do, for the calls made through
// the Backend view; errors name the path as given.
func parse(op, name string) (vfs.Path, error) {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return vfs.Path{}, vfs.Readdress(err, op, printable(name), "")
	}
	return p, nil
}

// Mkdir implements afero.Fs: it creates directory name with perm; the parent must
// exist.
func (v *aferoView) Mkdir(name string, perm os.FileMode) error {
	p, err := parse("Mkdir", name)
	if err != nil {
		return err
	}
	return vfs.Readdress(v.b.Mkdir(context.Background(), p, createPerm(perm)), "Mkdir", printable(name), "")
}

// MkdirAll implements afero.Fs: it creates name and any missing parents with perm,
// and succeeds if name already is a directory (or a symlink to one).
func (v *aferoView) MkdirAll(name string, perm os.FileMode) error {
	p, err := parse("MkdirAll", name)
	if err != nil {
		return err
	}
	ctx := context.Background()
	addr := func(err error) error { return vfs.Readdress(err, "MkdirAll", printable(name), "") }
	elems := p.Elems()
	for i := range elems {
		q := vfs.MustParse(strings.Join(elems[:i+1], "/"))
		info, err := v.b.Stat(ctx, q)
		switch {
		case err == nil:
			if !info.Mode.IsDir() {
				return addr(vfs.NewError(vfs.CodeNotDir, "MkdirAll", q, ""))
			}
			continue
		case codeOf(err) != vfs.CodeNotFound:
			return addr(err)
		}
		err = v.b.Mkdir(ctx, q, createPerm(perm))
		if codeOf(err) == vfs.CodeExists {
			// Created meanwhile; it must be a directory now.
			if info, serr := v.b.Stat(ctx, q); serr != nil {
				return addr(serr)
			} else if !info.Mode.IsDir() {
				return addr(err)
			}
			err = nil
		}
		if err != nil {
			return addr(err)
		}
	}
	return nil
}

// Remove implements afero.Fs: it removes a file, symlink or empty directory.
func (v *aferoView) Remove(name string) error {
	return v.d.Remove(context.Background(), name)
}

// RemoveAll implements afero.Fs: it removes name and everything beneath it; a
// missing name is not an error.
func (v *aferoView) RemoveAll(name string) error {
	return v.d.RemoveAll(context.Background(), name)
}

// Rename implements afero.Fs with Dir.Move (no copy across mounts).
func (v *aferoView) Rename(oldname, newname string) error {
	return v.d.Move(context.Background(), oldname, newname)
}

// Stat implements afero.Fs, following a final symlink.
func (v *aferoView) Stat(name string) (os.FileInfo, error) {
	return v.d.Stat(context.Background(), name)
}

// LstatIfPossible implements afero.Lstater: it never follows a final symlink and
// always reports that it did not.
func (v *aferoView) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := v.d.Lstat(context.Background(), name)
	return fi, true, err
}

// SymlinkIfPossible implements afero.Linker with Dir.Symlink: oldname is the target
// text and must stay inside the Dir.
func (v *aferoView) SymlinkIfPossible(oldname, newname string) error {
	return v.d.Symlink(context.Background(), oldname, newname)
}

// ReadlinkIfPossible implements afero.LinkReader.
func (v *aferoView) ReadlinkIfPossible(name string) (string, error) {
	return v.d.Readlink(context.Background(), name)
}

// Chmod implements afero.Fs with Dir.Chmod.
func (v *aferoView) Chmod(name string, mode os.FileMode) error {
	return v.d.Chmod(context.Background(), name, mode)
}

// Chown implements afero.Fs with Dir.Chown (not_supported where the backend
// keeps no owners).
func (v *aferoView) Chown(name string, uid, gid int) error {
	return v.d.Chown(context.Background(), name, uid, gid)
}

// Chtimes implements afero.Fs with Dir.Chtimes.
func (v *aferoView) Chtimes(name string, atime, mtime time.Time) error {
	return v.d.Chtimes(context.Background(), name, atime, mtime)
}

// aferoFile is an afero.File over a Handle.
type aferoFile struct{ *Handle }

// Readdir implements afero.File like os.File.Readdir: with count > 0 at most count
// entries and io.EOF at the end, with count <= 0 all remaining entries. Each entry's
// information is its Lstat; an entry removed since the listing is left out.
func (f aferoFile) Readdir(count int) ([]os.FileInfo, error) {
	ents, err := f.Handle.ReadDir(count)
	if err != nil {
		return nil, err
	}
	out := make([]os.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if codeOf(err) == vfs.CodeNotFound {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, fi)
	}
	return out, nil
}

// Readdirnames implements afero.File like os.File.Readdirnames.
func (f aferoFile) Readdirnames(n int) ([]string, error) {
	ents, err := f.Handle.ReadDir(n)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// Stat implements afero.File.
func (f aferoFile) Stat() (os.FileInfo, error) { return f.Handle.Stat() }

// WriteString implements afero.File.
func (f aferoFile) WriteString(s string) (int, error) { return f.Handle.Write([]byte(s)) }
