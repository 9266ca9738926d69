package dir

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Default permissions for entries a guest creates without naming a mode.
const (
	filePerm fs.FileMode = 0o644
	dirPerm  fs.FileMode = 0o755
)

// Dir is a capability for a directory tree: the guest can reach what lies beneath
// its root and nothing else. Paths given to its methods are slash-separated and
// relative to the Dir; a leading "/" means the Dir's own root; ".." may not climb
// above the root (path_outside_sandbox); "" is invalid_path except where a method
// says it means ".". No method returns a parent: attenuation (ReadOnly, Sub,
// OpenDir) is one-way and chainable.
//
// Every method that takes a context is one enforcement pass (see the package doc):
// revocation, path validation, read-only attenuation, policy, hooks, the backend
// operation, one audit event. Errors are *vfs.Error values naming the path as the
// caller wrote it.
//
// A Dir is immutable and safe for concurrent use.
type Dir struct{ s scope }

func (d *Dir) do(ctx context.Context, c *call, fn func(ctx context.Context) error) error {
	return d.s.run(ctx, c, fn)
}

// derive returns a Dir over b, rooted at p relative to this Dir, keeping everything
// else (gate chain, read-only bit, env).
func (d *Dir) derive(ctx context.Context, b vfs.Backend, p vfs.Path) *Dir {
	s := d.s
	s.pin(ctx, b, d.s.base.Join(p.WithoutDirMark().Unresolved()))
	return &Dir{s: s}
}

// List returns the names in directory path, sorted. "" means ".".
func (d *Dir) List(ctx context.Context, path string) ([]string, error) {
	var names []string
	c := &call{sp: specList, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		ents, err := d.s.b.ReadDir(ctx, c.rp)
		if err != nil {
			return err
		}
		names = make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// ReadDir returns the entries of directory path, sorted by name. "" means ".".
// Each entry's Info is fetched on demand (without following symlinks).
func (d *Dir) ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	c := &call{sp: specReadDir, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		ents, err := d.s.readDir(ctx, c)
		if err != nil {
			return err
		}
		out = d.s.entries(d.s.b, c.rp.WithoutDirMark(), ents)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Stat returns information on path, following a final symlink. The returned
// FileInfo's Name is the last element of path ("." for the root).
func (d *Dir) Stat(ctx context.Context, path string) (fs.FileInfo, error) {
	return d.stat(ctx, path, specStat, true)
}

// Lstat returns information on path without following a final symlink.
func (d *Dir) Lstat(ctx context.Context, path string) (fs.FileInfo, error) {
	return d.stat(ctx, path, specLstat, false)
}

func (d *Dir) stat(ctx context.Context, path string, sp *spec, follow bool) (fs.FileInfo, error) {
	var fi fs.FileInfo
	c := &call{sp: sp, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		if c.got == infoKept {
			fi = c.kept
			return nil
		}
		info, known, err := c.resolvedStat(follow)
		if known {
			if err == nil {
				fi = named(info, c.p)
			}
			return err
		}
		fi, err = d.s.statAs(ctx, c.rp, follow, c.p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// Exists reports whether an entry exists at path. A symlink counts, even a dangling
// one (it is not followed). A missing entry is (false, nil); other failures, such as
// a file used as a directory, are errors.
func (d *Dir) Exists(ctx context.Context, path string) (bool, error) {
	found := false
	c := &call{sp: specExists, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		_, err := d.s.b.Lstat(ctx, c.rp)
		if codeOf(err) == vfs.CodeNotFound {
			return nil
		}
		found = err == nil
		return err
	})
	return found, err
}

// OpenDir returns the child directory name as a new Dir. name is a single path
// element (no "/"): use Sub for deeper paths. The result keeps this Dir's
// restrictions and is pinned: renaming the directory later does not redirect it.
func (d *Dir) OpenDir(ctx context.Context, name string) (*Dir, error) {
	return d.sub(ctx, &call{sp: specOpenDir, path: name})
}

// Sub returns a Dir rooted at directory path: the recipient cannot name anything
// outside it ("/" in its paths means this new root, and ".." cannot climb above
// it). The directory is pinned now: renaming or replacing it later does not redirect
// the result. The result keeps this Dir's restrictions (read-only, revocation,
// policy, audit). Sub(".") returns an equivalent Dir.
func (d *Dir) Sub(ctx context.Context, path string) (*Dir, error) {
	return d.sub(ctx, &call{sp: specSub, path: path})
}

// sub runs c, a Sub or OpenDir call, and derives the pinned Dir it names.
func (d *Dir) sub(ctx context.Context, c *call) (*Dir, error) {
	var out *Dir
	err := d.do(ctx, c, func(ctx context.Context) error {
		sub, err := d.s.b.Sub(ctx, c.rp)
		if err != nil {
			return err
		}
		out = d.derive(ctx, sub, c.rp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadOnly returns a read-only view of this Dir: every read works, and every write
// (through it, or through any Dir, File or Handle derived from it) fails with
// read_only. It is permanent: nothing derived from the result can write.
func (d *Dir) ReadOnly() *Dir {
	s := d.s
	s.ro = true
	return &Dir{s: s}
}

// CreateDir creates directory path (its parent must exist; already_exists if
// anything is there) with mode 0755 and returns it as a Dir.
func (d *Dir) CreateDir(ctx context.Context, path string) (*Dir, error) {
	var out *Dir
	c := &call{sp: specCreateDir, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		if err := d.s.b.Mkdir(ctx, c.rp, dirPerm); err != nil {
			return err
		}
		sub, err := d.s.b.Sub(ctx, c.rp)
		if err != nil {
			return err
		}
		out = d.derive(ctx, sub, c.rp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MkdirAll creates directory path and any missing parents, with mode 0755. It
// succeeds if path already is a directory (or a symlink to one); a non-directory in
// the way is not_a_directory.
func (d *Dir) MkdirAll(ctx context.Context, path string) error {
	c := &call{sp: specMkdirAll, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		return mkdirAll(ctx, d.s.b, c.rp.WithoutDirMark(), dirPerm)
	})
}

// Remove removes a file, a symlink (not its target) or an empty directory. The
// Dir's own root cannot be removed (invalid_path).
func (d *Dir) Remove(ctx context.Context, path string) error {
	c := &call{sp: specRemove, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		if c.p.IsRoot() {
			return errAt(vfs.CodeInvalidPath, "Remove", path, "", "cannot remove the root")
		}
		return d.s.b.Remove(ctx, c.rp)
	})
}

// ReadFile returns the contents of file path. Files larger than the Dir's read limit
// (WithMaxReadBytes, DefaultMaxReadBytes) fail with file_too_large; a directory is
// is_a_directory; a FIFO, socket or device is not_regular_file.
func (d *Dir) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var data []byte
	c := &call{sp: specReadFile, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		if d.s.regular != nil && c.ad == nil {
			var err error
			data, err = readRegular(ctx, d.s.regular, c.rp, d.s.env.maxRead)
			return err
		}
		f, err := d.s.openRead(ctx, c)
		if err != nil {
			return err
		}
		defer f.Close()
		data, err = readOpen(f, c.rp, d.s.env.maxRead)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// WriteFile replaces the contents of file path with data, atomically: the data is
// written to a hidden temporary file beside it (".capfs-tmp-…") which is then
// renamed over path, so a concurrent reader sees the old contents or the new, never
// a mix; on any failure the temporary file is removed and path is unchanged. A new
// file gets perm's permission bits; an existing file keeps its own. If path is a
// symlink, its target is replaced and the link kept. Other hard links to the old
// file keep the old contents.
func (d *Dir) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	c := &call{sp: specWriteFile, path: path, size: sized(len(data))}
	return d.do(ctx, c, func(ctx context.Context) error {
		return atomicWrite(ctx, d.s.b, c.rp, bytesSource(data), perm&fs.ModePerm)
	})
}

// Append appends data to file path, creating it (mode 0644) if missing. The append
// is atomic with respect to other appends on backends that support O_APPEND.
func (d *Dir) Append(ctx context.Context, path string, data []byte) error {
	c := &call{sp: specAppend, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		if d.s.env.customPolicy {
			if err := d.s.allowSize(ctx, c, "Append", policy.OpWrite, c.rp, appendSize(ctx, d.s.b, c.rp, len(data))); err != nil {
				return err
			}
		}
		return appendTo(ctx, d.s.b, c.rp, data)
	})
}

// Symlink creates a symbolic link at link whose target text is target. target must
// be relative and must not climb above this Dir's root from the link's directory
// (path_outside_sandbox): "../x" is fine in "a/l", not at the root. The target need
// not exist.
func (d *Dir) Symlink(ctx context.Context, target, link string) error {
	c := &call{sp: specSymlink, path: link, dest: target}
	return d.do(ctx, c, func(ctx context.Context) error {
		if err := d.s.dataLinkLands(ctx, c, target); err != nil {
			return err
		}
		return d.s.b.Symlink(ctx, target, c.rp)
	})
}

// Readlink returns the target text of symlink path.
func (d *Dir) Readlink(ctx context.Context, path string) (string, error) {
	var t string
	c := &call{sp: specReadlink, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		var err error
		t, err = d.s.b.Readlink(ctx, c.rp)
		return err
	})
	if err != nil {
		return "", err
	}
	return t, nil
}

// Link creates newname as a hard link to the existing file oldname, where the
// backend supports hard links (not_supported otherwise).
func (d *Dir) Link(ctx context.Context, oldname, newname string) error {
	c := &call{sp: specLink, path: oldname, dest: newname}
	return d.do(ctx, c, func(ctx context.Context) error {
		return d.s.b.Link(ctx, c.rp, c.rq)
	})
}

// Chmod sets the permission bits (and sticky bit) of path, following a symlink.
// setuid and setgid are refused (fs_permission_denied), whether given as
// fs.ModeSetuid/fs.ModeSetgid or as Unix bits 0o4000/0o2000; 0o1000 means sticky;
// other mode bits are ignored.
func (d *Dir) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	c := &call{sp: specChmod, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		m, err := chmodMode(mode)
		if err != nil {
			return errAt(vfs.CodePermission, "Chmod", path, "", err.Error())
		}
		return d.s.b.Chmod(ctx, c.rp, m)
	})
}

// Chtimes sets the access and modification times of path, following a symlink; a
// zero time leaves that time unchanged.
func (d *Dir) Chtimes(ctx context.Context, path string, atime, mtime time.Time) error {
	c := &call{sp: specChtimes, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		return d.s.b.Chtimes(ctx, c.rp, atime, mtime)
	})
}

// named returns info as an fs.FileInfo named after the last element of p.
func named(info vfs.Info, p vfs.Path) fs.FileInfo {
	info.Name = baseName(p)
	return fileInfoOf(info)
}

// baseName is the name a status of p carries: its last element, "." for the root.
func baseName(p vfs.Path) string {
	if p.IsRoot() {
		return "."
	}
	return p.Base()
}

// statAs returns the status of p on the scope's backend, following a final
// symlink if follow, as an fs.FileInfo named after the last element of name.
func (s *scope) statAs(ctx context.Context, p vfs.Path, follow bool, name vfs.Path) (fs.FileInfo, error) {
	if s.stater != nil {
		as := "" // the backend's own name for p: its last element
		if p.Raw() != name.Raw() {
			as = baseName(name)
		}
		return s.stater.StatFileInfo(ctx, p, follow, as)
	}
	return statInfoAs(ctx, s.b, p, follow, name)
}

// statInfoAs is statAs through the backend's Stat or Lstat (apart, so that the
// Info it builds does not weigh on the frame of statAs's common case).
func statInfoAs(ctx context.Context, b vfs.Backend, p vfs.Path, follow bool, name vfs.Path) (fs.FileInfo, error) {
	var info vfs.Info
	var err error
	if follow {
		info, err = b.Stat(ctx, p)
	} else {
		info, err = b.Lstat(ctx, p)
	}
	if err != nil {
		return nil, err
	}
	return named(info, name), nil
}

// fileInfoStater is a backend that answers Stat (follow) and Lstat with an
// fs.FileInfo named name ("" meaning p's last element, "." for the root, as
// Stat names it), showing what named would make of its Info (the
// fs.FileInfo fields and nothing else), with the same errors: the memory
// backend, whose answer is an immutable status it keeps and hands out again
// while nothing it shows changes, so that a Stat through a Dir allocates
// nothing.
type fileInfoStater interface {
	StatFileInfo(ctx context.Context, p vfs.Path, follow bool, name string) (fs.FileInfo, error)
}

// fileInfo is the fs.FileInfo the capabilities return: the fields fs.FileInfo
// shows, and nothing else, so that the one allocation a Stat costs is small.
type fileInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
	sys     any
}

func fileInfoOf(i vfs.Info) fs.FileInfo {
	return &fileInfo{name: i.Name, size: i.Size, mode: i.Mode, modTime: i.ModTime, sys: i.Sys}
}

func (f *fileInfo) Name() string       { return f.name }
func (f *fileInfo) Size() int64        { return f.size }
func (f *fileInfo) Mode() fs.FileMode  { return f.mode }
func (f *fileInfo) ModTime() time.Time { return f.modTime }
func (f *fileInfo) IsDir() bool        { return f.mode.IsDir() }
func (f *fileInfo) Sys() any           { return f.sys }
func (f *fileInfo) String() string     { return fs.FormatFileInfo(f) }

// chmodMode turns a guest's Chmod mode into the bits passed to the backend.
func chmodMode(mode fs.FileMode) (fs.FileMode, error) {
	if mode&(fs.ModeSetuid|fs.ModeSetgid|0o6000) != 0 {
		return 0, errors.New("setuid and setgid bits are not allowed")
	}
	m := mode & (fs.ModePerm | fs.ModeSticky)
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// createPerm returns the mode bits a guest may give an entry it creates: the
// permission bits and sticky (fs.ModeSticky or the Unix bit 0o1000). setuid and
// setgid, in either spelling, and all other bits are dropped, the way a umask and a
// nosuid mount would.
func createPerm(perm fs.FileMode) fs.FileMode {
	m := perm & (fs.ModePerm | fs.ModeSticky)
	if perm&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
