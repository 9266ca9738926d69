//go:build linux

package materialize

import (
	"io/fs"
	"sort"
	"time"

	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

// Entry describes one path of a checkout, as Checkout recorded it (in a
// Manifest) or as Diff found it in the checkout (a Change's New).
type Entry struct {
	// Type is the type bits: 0 for a regular file, fs.ModeDir, fs.ModeSymlink, or
	// another fs.ModeType bit for a special file (only ever seen by Diff).
	Type fs.FileMode
	// Size is the length of a regular file in bytes; 0 for other types.
	Size int64
	// Mode is the permission bits plus fs.ModeSetuid, fs.ModeSetgid and
	// fs.ModeSticky when set. Checkout never records those three (it strips
	// them); an entry a sync-back recorded describes the checkout's file as synced
	// (the source got it without them).
	Mode fs.FileMode
	// ModTime is the modification time. A checkout file gets its source's.
	ModTime time.Time
	// Digest is the lowercase hex SHA-256 of a regular file's contents.
	Digest string
	// Target is a symlink's target text.
	Target string
}

// IsRegular reports whether e is a regular file.
func (e Entry) IsRegular() bool { return e.Type&fs.ModeType == 0 }

// IsDir reports whether e is a directory.
func (e Entry) IsDir() bool { return e.Type&fs.ModeDir != 0 }

// IsSymlink reports whether e is a symbolic link.
func (e Entry) IsSymlink() bool { return e.Type&fs.ModeSymlink != 0 }

// Manifest is what Checkout copied: every path of the checkout, relative to the
// checkout root in slash form ("a/b.go"; the root itself is not listed), with its
// type, size, mode, modification time, digest (files) and target (symlinks).
// Only a sync-back modifies a Manifest after Checkout returns (recording what it
// applied); read it only while no sync-back runs.
type Manifest struct {
	// Entries maps each path to its entry.
	Entries map[string]Entry
	// Created is when the checkout started.
	Created time.Time

	// stat is the stat cache: the checkout's own lstat of each file when Checkout
	// finished writing it (see Tree.Diff).
	stat map[string]statKey
}

// Paths returns the manifest's paths, sorted.
func (m *Manifest) Paths() []string {
	out := make([]string, 0, len(m.Entries))
	for p := range m.Entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Files returns the number of regular files and their total size.
func (m *Manifest) Files() (n int, bytes int64) {
	for _, e := range m.Entries {
		if e.IsRegular() {
			n++
			bytes += e.Size
		}
	}
	return n, bytes
}

// statKey is what the stat cache compares: a file whose inode, size, mtime, ctime
// and mode are unchanged is taken to have unchanged contents.
type statKey struct {
	dev          uint64
	ino, size    int64
	mtime, ctime int64 // nanoseconds since the epoch
	mode         uint32
	racy         bool // changed too close to the checkout to trust: always re-hash
}

// Progress reports how far a Checkout has come. Totals are known once the walk of
// the source has finished, which happens before any file is copied.
type Progress struct {
	Files, TotalFiles int   // regular files done and to do
	Bytes, TotalBytes int64 // bytes of regular files done and to do
	Done              bool  // the last call: the checkout finished (or failed)
}

// ChangeKind names what happened to a path between Checkout and Diff.
type ChangeKind string

// The change kinds.
const (
	Added       ChangeKind = "added"        // not in the manifest
	Modified    ChangeKind = "modified"     // a file's contents or a symlink's target differ
	Deleted     ChangeKind = "deleted"      // in the manifest, gone from the checkout
	TypeChanged ChangeKind = "type_changed" // a file became a directory, and the like
	ModeChanged ChangeKind = "mode_changed" // only the permission (or special) bits differ
	// Touched: a regular file's contents and mode are unchanged but its
	// modification time differs (rewritten with the same bytes, or touched).
	// A sync-back applies it by setting the source's modification time, so that
	// tools comparing times (make) see what the sandbox left.
	Touched ChangeKind = "touched"
)

// Change is one difference between the manifest and the checkout. Old is the
// manifest's entry (nil for Added), New the checkout's (nil for Deleted).
// A Modified change whose mode also differs carries the new mode in New; New's
// ModTime is the checkout's, which a sync-back gives the source's file.
type Change struct {
	Kind ChangeKind
	Path string
	Old  *Entry
	New  *Entry
}

// Skip is a source path Checkout left out of the checkout, and why.
type Skip struct {
	Path   string   // relative to the source Dir
	Code   vfs.Code // fs_permission_denied (the Dir's policy), not_regular_file, path_outside_sandbox, ...
	Reason string
}

// keyOf is st's stat-cache key.
func keyOf(st *unix.Stat_t) statKey {
	return statKey{
		dev: st.Dev, ino: int64(st.Ino), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), mode: st.Mode,
	}
}

// sameKey reports whether two cache keys describe the same unchanged file.
func sameKey(a, b statKey) bool {
	return a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
		a.mtime == b.mtime && a.ctime == b.ctime && a.mode == b.mode
}
