package dir

import (
	"context"
	"io/fs"
	"os"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// File is a capability for one file. It holds its parent directory, pinned when the
// File was made, and the file's name in it: it names the directory entry, not the
// file's contents object. Replacing the file (WriteBytes, or another writer's atomic
// write) is seen by the File; renaming the parent directory does not redirect it;
// renaming or removing the file itself leaves the File naming the old entry, which
// is then missing (not_found) until something is created there again.
//
// When the file's name is a symlink whose target lies above the file's own
// directory, the File instead holds the path from the Dir it came from (still
// confined to that Dir).
//
// A File keeps the restrictions of the Dir it came from; ReadOnly and Revocable
// narrow it further. Every method taking a context is one enforced, audited call.
// A File is immutable and safe for concurrent use.
type File struct {
	s    scope
	leaf vfs.Path // the file's path within s.b (one element unless it is a fallback)
	name string   // the path, relative to the Dir it was opened from, for errors
}

// OpenFile returns a File capability for the existing regular file path (a symlink
// to one is followed). A directory is is_a_directory; a FIFO, socket or device is
// not_regular_file.
func (d *Dir) OpenFile(ctx context.Context, path string) (*File, error) {
	var f *File
	c := &call{sp: specOpenFile, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		var err error
		f, err = d.s.fileAt(ctx, c.rp, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// CreateFile creates the empty file path (mode 0644) and returns it as a File. It
// fails with already_exists if anything, even a dangling symlink, is there; the
// parent directory must exist.
func (d *Dir) CreateFile(ctx context.Context, path string) (*File, error) {
	var f *File
	c := &call{sp: specCreateFile, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		var err error
		f, err = d.s.fileAt(ctx, c.rp, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// fileAt pins p's parent and returns a File for p, creating it (O_EXCL) if create.
func (s *scope) fileAt(ctx context.Context, p vfs.Path, create bool) (*File, error) {
	if p.IsRoot() {
		return nil, vfs.NewError(vfs.CodeIsDir, "open", p, "")
	}
	if p.MustBeDir() {
		if _, err := s.b.Stat(ctx, p); err != nil {
			return nil, err
		}
		return nil, vfs.NewError(vfs.CodeIsDir, "open", p, "")
	}
	parent, base := s.b, s.base
	if dir := p.Dir(); !dir.IsRoot() {
		sub, err := s.b.Sub(ctx, dir)
		if err != nil {
			return nil, err
		}
		parent, base = sub, s.base.Join(dir.Unresolved())
	}
	leaf, err := vfs.Root.Child(p.Base())
	if err != nil {
		return nil, err
	}
	if create {
		f, err := parent.OpenFile(ctx, leaf, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
		if err != nil {
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	} else {
		info, err := parent.Stat(ctx, leaf)
		if codeOf(err) == vfs.CodeOutside {
			// A symlink leading above its own directory: name the file by its path
			// from the Dir instead.
			parent, base, leaf = s.b, s.base, p.Unresolved()
			info, err = parent.Stat(ctx, leaf)
		}
		if err != nil {
			return nil, err
		}
		switch {
		case info.Mode.IsDir():
			return nil, vfs.NewError(vfs.CodeIsDir, "open", p, "")
		case !info.Mode.IsRegular():
			return nil, vfs.NewError(vfs.CodeNotRegular, "open", p, "")
		}
	}
	fsc := *s
	fsc.pin(ctx, parent, base)
	return &File{s: fsc, leaf: leaf, name: p.String()}, nil
}

// do runs one enforced call on the file; size is the byte count a write leaves in
// it, or -1 if unknown.
//
// fn is given the path to act on: the leaf, or where the leaf leads now (canonical,
// Resolved) when the call was decided there.
func (f *File) do(ctx context.Context, sp *spec, size int64, fn func(ctx context.Context, p vfs.Path) error) error {
	c := call{sp: sp, path: f.name, p: f.leaf, size: size + 1}
	return f.s.run(ctx, &c, func(ctx context.Context) error { return fn(ctx, c.rp) })
}

// doAppend is do for an append of n bytes: the size the file will have is decided
// too, once the call knows where the file is.
func (f *File) doAppend(ctx context.Context, n int, fn func(ctx context.Context, p vfs.Path) error) error {
	c := call{sp: specFileAppend, path: f.name, p: f.leaf}
	return f.s.run(ctx, &c, func(ctx context.Context) error {
		if f.s.env.customPolicy {
			if err := f.s.allowSize(ctx, &c, "Append", policy.OpWrite, c.rp, appendSize(ctx, f.s.b, c.rp, n)); err != nil {
				return err
			}
		}
		return fn(ctx, c.rp)
	})
}

// Name returns the file's path relative to the Dir it was opened from.
func (f *File) Name() string { return f.name }

// ReadBytes returns the file's contents; files larger than the read limit fail with
// file_too_large (stream them with Open).
func (f *File) ReadBytes(ctx context.Context) ([]byte, error) {
	var data []byte
	err := f.do(ctx, specFileReadBytes, -1, func(ctx context.Context, p vfs.Path) error {
		var err error
		data, err = readAll(ctx, f.s.b, p, f.s.env.maxRead)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// ReadText returns the file's contents as a string (the bytes as they are; UTF-8 is
// not checked). The read limit applies as for ReadBytes.
func (f *File) ReadText(ctx context.Context) (string, error) {
	var data []byte
	err := f.do(ctx, specFileReadText, -1, func(ctx context.Context, p vfs.Path) error {
		var err error
		data, err = readAll(ctx, f.s.b, p, f.s.env.maxRead)
		return err
	})
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// WriteBytes replaces the file's contents with b, atomically (see Dir.WriteFile),
// creating the file again if it was removed.
func (f *File) WriteBytes(ctx context.Context, b []byte) error {
	return f.do(ctx, specFileWriteBytes, int64(len(b)), func(ctx context.Context, p vfs.Path) error {
		return atomicWrite(ctx, f.s.b, p, bytesSource(b), filePerm)
	})
}

// WriteText replaces the file's contents with s, atomically.
func (f *File) WriteText(ctx context.Context, s string) error {
	return f.do(ctx, specFileWriteText, int64(len(s)), func(ctx context.Context, p vfs.Path) error {
		return atomicWrite(ctx, f.s.b, p, bytesSource([]byte(s)), filePerm)
	})
}

// Append appends b to the file, creating it again if it was removed.
func (f *File) Append(ctx context.Context, b []byte) error {
	return f.doAppend(ctx, len(b), func(ctx context.Context, p vfs.Path) error {
		return appendTo(ctx, f.s.b, p, b)
	})
}

// Stat returns information on the file (following a symlink).
func (f *File) Stat(ctx context.Context) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := f.do(ctx, specFileStat, -1, func(ctx context.Context, p vfs.Path) error {
		var err error
		fi, err = f.s.statAs(ctx, p, true, f.leaf)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// Open opens the file with os-style flags (see Dir.Open) and returns a streaming
// Handle; O_CREATE recreates a removed file with mode 0644.
func (f *File) Open(ctx context.Context, flag int) (*Handle, error) {
	var h *Handle
	c := call{sp: specFileOpen.of(flag), path: f.name, p: f.leaf}
	err := f.s.run(ctx, &c, func(ctx context.Context) error {
		var err error
		h, err = f.s.open(ctx, f.name, c.rp, flag, filePerm)
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// ReadOnly returns a read-only view of this File: reads work, every write fails with
// read_only, permanently.
func (f *File) ReadOnly() *File {
	c := *f
	c.s.ro = true
	return &c
}

// Revocable returns a File that works like this one until the returned function is
// called; from then on, every call on it, on Files derived from it and on Handles
// opened through it fails with revoked. The function revokes only that File and its
// derivatives, never this one; calling it again does nothing.
func (f *File) Revocable() (*File, func()) {
	c := *f
	g := newGate(f.s.gate)
	c.s.gate = g
	return &c, func() { g.set(revokedBit, true) }
}
