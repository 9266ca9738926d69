package cas

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// SnapshotHost is Snapshot of the host directory root, read directly: every
// lookup is one openat2(2) beneath root with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS
// (no symlink is ever followed, so a link swapped in during the walk makes the
// walk fail rather than read outside root), files are opened O_NOFOLLOW|O_NONBLOCK
// and must still be regular files. Its stat cache (opts.StatCache; SnapshotHost
// uses root itself when it is empty) compares device, inode, size, permission,
// modification and change time, like git's index, so re-snapshotting an unchanged
// tree only stats it: one getdents64 pass per directory (whose entry types spare
// the lstat of directories and symlinks), one fstat of each directory and one
// fstatat per regular file. A directory whose own status (device, inode, times:
// any entry created, removed or renamed in it moves them) matches its record,
// whose files all match theirs and whose subdirectories are unchanged keeps its
// recorded digest without being encoded or hashed. This relies on POSIX
// directory times, as git's untracked cache does: a file system that did not
// move them when an entry changes would hide that change from a re-snapshot.
func (s *Store) SnapshotHost(ctx context.Context, root string, opts SnapshotOptions) (Digest, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Digest{}, fmt.Errorf("cas: snapshot: open %s: %w", root, err)
	}
	defer unix.Close(fd)
	if opts.StatCache == "" {
		opts.StatCache = "host:" + root
	}
	return s.snapshot(ctx, &hostSource{root: fd}, opts)
}

type hostSource struct{ root int }

// openBeneath opens rel (slash-separated, no "..") beneath the root, following
// no symlink anywhere.
func (h *hostSource) openBeneath(rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(h.root, rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// direntBufs recycles getdents64 buffers between listings.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// list reads directory rel with getdents64 and lstats (fstatat) only the
// entries whose type the listing does not settle: regular files (whose size and
// times the stat cache compares) and entries of unknown type. Directories and
// symlinks need no stat (a directory's own status comes from the fstat of its
// descriptor when it is listed: self).
func (h *hostSource) list(ctx context.Context, rel string) ([]snapEntry, snapEntry, error) {
	fd, err := h.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, snapEntry{}, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, snapEntry{}, &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	self := entryOf("", &st)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var out []snapEntry
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, snapEntry{}, &fs.PathError{Op: "readdir", Path: rel, Err: err}
		}
		if n <= 0 {
			break
		}
		if out, err = appendDirents(out, buf[:n]); err != nil {
			return nil, snapEntry{}, &fs.PathError{Op: "readdir", Path: rel, Err: err}
		}
	}
	slices.SortFunc(out, func(a, b snapEntry) int { return strings.Compare(a.name, b.name) })
	keep := out[:0]
	for _, e := range out {
		if e.mode == fs.ModeIrregular {
			if err := unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if err == unix.ENOENT {
					continue // removed since the listing
				}
				return nil, snapEntry{}, &fs.PathError{Op: "lstat", Path: join(rel, e.name), Err: err}
			}
			e = entryOf(e.name, &st)
		}
		keep = append(keep, e)
	}
	return keep, self, nil
}

// appendDirents appends the entries of getdents64 records buf (but . and
// ..) to out, each with the type its record gives (ModeIrregular: to stat).
func appendDirents(out []snapEntry, buf []byte) ([]snapEntry, error) {
	n := len(buf)
	for off := 0; off+19 <= n; {
		reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
		if reclen == 0 || off+reclen > n {
			return out, unix.EIO
		}
		typ := buf[off+18]
		nb := buf[off+19 : off+reclen]
		if i := bytes.IndexByte(nb, 0); i >= 0 {
			nb = nb[:i]
		}
		off += reclen
		if len(nb) == 0 || nb[0] == '.' && (len(nb) == 1 || len(nb) == 2 && nb[1] == '.') {
			continue
		}
		out = append(out, snapEntry{name: string(nb), mode: direntMode(typ)})
	}
	return out, nil
}

// direntMode is the type a getdents64 record's d_type says; regular files
// and unknown types are ModeIrregular, for the caller to stat.
func direntMode(typ byte) fs.FileMode {
	switch typ {
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	case unix.DT_SOCK:
		return fs.ModeSocket
	case unix.DT_CHR, unix.DT_BLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular // DT_REG, DT_UNKNOWN: stat below
}

func entryOf(name string, st *unix.Stat_t) snapEntry {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFREG:
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	default:
		mode |= fs.ModeDevice
	}
	return snapEntry{name: name, mode: mode, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), dev: uint64(st.Dev), ino: st.Ino}
}

func (h *hostSource) open(ctx context.Context, rel string) (io.ReadCloser, error) {
	fd, err := h.openBeneath(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: rel, Err: errors.New("no longer a regular file")}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

func (h *hostSource) readlink(ctx context.Context, rel string) (string, error) {
	dir, base := "", rel
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			dir, base = rel[:i], rel[i+1:]
			break
		}
	}
	fd, err := h.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, base, buf)
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: rel, Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}
