package treediff

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/capfs/capfs/vfs"
)

// Object is implemented by the Info.Sys of a backend whose entries are git
// objects (gitree's *Entry). [Backend] takes their ids instead of hashing.
type Object interface {
	// ObjectID is the object id in hex: a blob's, or the commit a submodule pins.
	ObjectID() string
	// Submodule reports whether the entry is a submodule, a leaf although
	// it is shown as a directory.
	Submodule() bool
}

// Backends compares two backends: [Compare] over [Backend] of each.
func Backends(ctx context.Context, a, b vfs.Backend) ([]Change, error) {
	return Compare(ctx, Backend(a), Backend(b))
}

// Backend returns b as a [Tree].
// Each entry is listed by ReadDir and Lstat. Its Mode is Lstat's permission
// bits: fs.ModeSymlink|0777 for a symlink, fs.ModeDir|0755 for a submodule.
// Directories are descended and their permission bits ignored. A directory
// whose Info.Sys is an [Object] submodule is a leaf. Leaves take their id from
// an Object. Otherwise the git blob id of a file's content or a symlink's
// target is computed when needed.
func Backend(b vfs.Backend) Tree { return backendTree{b} }

type backendTree struct{ b vfs.Backend }

func (t backendTree) List(ctx context.Context, path string, _ Entry) ([]Entry, error) {
	p, err := parse(path)
	if err != nil {
		return nil, err
	}
	es, err := t.b.ReadDir(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(es))
	for _, e := range es {
		cp, err := p.Child(e.Name)
		if err != nil {
			return nil, err
		}
		i, err := t.b.Lstat(ctx, cp)
		if err != nil {
			return nil, err
		}
		o, isObj := i.Sys.(Object)
		sub := isObj && o.Submodule()
		ent := Entry{Name: e.Name, Mode: leafMode(i), Dir: i.Mode.IsDir() && !sub, info: i}
		if isObj && !ent.Dir {
			ent.ID = o.ObjectID()
		}
		out = append(out, ent)
	}
	return out, nil
}

// parse is the vfs.Path of a slash-separated path relative to the root.
func parse(path string) (vfs.Path, error) {
	if path == "" {
		return vfs.Path{}, nil
	}
	return vfs.ParseGuest(path)
}

func leafMode(i vfs.Info) fs.FileMode {
	switch {
	case i.Mode.IsDir():
		return fs.ModeDir | 0o755
	case i.Mode&fs.ModeSymlink != 0:
		return fs.ModeSymlink | 0o777
	}
	return i.Mode & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// ObjectID returns the git blob id of a file's content or a symlink's
// target, or "" for other types.
func (t backendTree) ObjectID(ctx context.Context, path string, e Entry) (string, error) {
	p, err := parse(path)
	if err != nil {
		return "", err
	}
	h := sha1.New()
	switch {
	case e.info.Mode&fs.ModeSymlink != 0:
		target, err := t.b.Readlink(ctx, p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "blob %d\x00%s", len(target), target)
	case e.info.Mode.IsRegular():
		if err := hashFile(ctx, t.b, p, e.info.Size, h); err != nil {
			return "", err
		}
	default:
		return "", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile writes the blob header and content of file p, size bytes long, to h.
func hashFile(ctx context.Context, b vfs.Backend, p vfs.Path, size int64, h io.Writer) error {
	f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// The header is written from the size Lstat gave and checked against what was read.
	fmt.Fprintf(h, "blob %d\x00", size)
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != size {
		return vfs.NewError(vfs.CodeIO, "diff", p, "file changed size while hashed")
	}
	return nil
}
