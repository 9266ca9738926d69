package vfs

import (
	"context"
	"io"
	"io/fs"
	"os"
	"time"
)

// Info describes a file, as [Backend.Stat] and [Backend.Lstat] return it.
// Backends fill the fields they know. [Info.FileInfo] adapts it to [fs.FileInfo].
type Info struct {
	Name    string      // base name; "." for a backend's root
	Size    int64       // bytes for regular files, target length for symlinks, backend-defined for directories
	Mode    fs.FileMode // type bits and permission bits
	ModTime time.Time
	// ChangeTime is the last change of the entry's status (contents, mode,
	// names: ctime); zero if the backend does not keep it.
	ChangeTime time.Time
	Nlink      int    // number of hard links; 0 if unknown
	ID         uint64 // identity of the underlying object within the backend (inode-like); 0 if unknown
	// HasOwner reports that Uid and Gid hold the entry's numeric owner and
	// group (the physical backend). Backends that keep no ownership leave it
	// false, so the zero Info claims no owner (never root). Read the owner
	// with [Info.Owner], which answers -1 for unknown.
	HasOwner bool
	Uid, Gid int
	// HasBlocks reports that Blocks holds the storage the backend keeps for
	// the entry, in 512-byte units as st_blocks counts it: a sparse file's
	// holes hold none. Backends that do not know leave it false; a reader
	// then takes the size, rounded up to 512 bytes ([Info.Blocks512]).
	HasBlocks bool
	Blocks    int64
	// Sys is backend-specific detail safe to show a guest (never a host path), or nil.
	Sys any
}

// Owner returns i's numeric owner and group.
// It returns -1 and -1 when the backend keeps no ownership (HasOwner false).
func (i Info) Owner() (uid, gid int) {
	if !i.HasOwner {
		return -1, -1
	}
	return i.Uid, i.Gid
}

// Blocks512 returns the storage i's entry takes, in 512-byte units: the
// backend's Blocks where it knows them (HasBlocks), else the size rounded up.
func (i Info) Blocks512() int64 {
	if i.HasBlocks {
		return max(i.Blocks, 0)
	}
	return (max(i.Size, 0) + 511) / 512
}

// FileInfo returns i as an [fs.FileInfo].
func (i Info) FileInfo() fs.FileInfo { return fileInfo{i} }

type fileInfo struct{ i Info }

func (f fileInfo) Name() string       { return f.i.Name }
func (f fileInfo) Size() int64        { return f.i.Size }
func (f fileInfo) Mode() fs.FileMode  { return f.i.Mode }
func (f fileInfo) ModTime() time.Time { return f.i.ModTime }
func (f fileInfo) IsDir() bool        { return f.i.Mode.IsDir() }
func (f fileInfo) Sys() any           { return f.i.Sys }
func (f fileInfo) String() string     { return fs.FormatFileInfo(f) }

// DirEntry is one entry of a directory listing: its name and its type bits.
// Type is [fs.ModeDir], [fs.ModeSymlink], another [fs.ModeType] bit, or 0 for
// a regular file.
type DirEntry struct {
	Name string
	Type fs.FileMode
}

// Features declares what a [Backend] supports.
// Operations a backend does not support fail with not_supported.
// Writes on a [ReadOnly] backend fail with read_only.
type Features struct {
	ReadOnly        bool // every mutation fails with read_only
	Symlinks        bool // Symlink and Readlink work
	HardLinks       bool // Link works
	Chmod           bool // Chmod works
	Chtimes         bool // Chtimes works
	Persistent      bool // contents survive the process
	CaseInsensitive bool // names that differ only in case are the same entry
	// LinkWritesPrivate: opening one name of a regular file with several names
	// for writing gives that name a private copy, so the names' contents part
	// (the physical backend's HardLinksReplace). Without it, every name of a
	// file reaches one file.
	LinkWritesPrivate bool
}

// RenameFlags change [Backend.Rename]'s behaviour.
type RenameFlags uint

const (
	// RenameNoReplace fails with already_exists if the destination exists (even a
	// dangling symlink), atomically.
	RenameNoReplace RenameFlags = 1 << iota
	// RenameExchange atomically swaps source and destination, which must both exist
	// and may be of different types.
	RenameExchange
)

// Backend is the storage SPI: path-based operations on validated [Path] values
// relative to the backend's root. Every implementation must pass
// [github.com/capfs/capfs/vfs/vfstest].
//
// Contracts every Backend keeps:
//   - Paths are resolved beneath the root. Symlinks are followed inside the backend
//     only. A resolution that would leave the root (an absolute target, or ".." above
//     the root) fails with path_outside_sandbox. At most [MaxSymlinks] links are
//     followed per resolution (too_many_links beyond).
//   - Intermediate symlinks are always followed. The final component is followed by
//     Stat, ReadDir, OpenFile, Chmod, Chtimes and Sub. It is not followed by Lstat,
//     Remove, Rename, Symlink, Readlink and Link (both ends).
//   - A Path marked [Path.MustBeDir] requires the final object (after following) to
//     be a directory.
//   - Errors are [*Error] values carrying paths relative to this backend, never a host path.
//   - Methods are safe for concurrent use.
type Backend interface {
	// Features declares what the backend supports.
	Features() Features

	// Stat returns information on p, following a final symlink.
	Stat(ctx context.Context, p Path) (Info, error)
	// Lstat returns information on p without following a final symlink.
	Lstat(ctx context.Context, p Path) (Info, error)
	// ReadDir lists directory p, sorted by name, without "." and "..".
	ReadDir(ctx context.Context, p Path) ([]DirEntry, error)
	// OpenFile opens p with os-style flags ([os.O_RDONLY], O_WRONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC, O_APPEND). With O_CREATE it creates p with perm.
	// Directories may be opened read-only; reading one fails with is_a_directory.
	// O_CREATE|O_EXCL fails with already_exists if p exists, even as a dangling symlink.
	OpenFile(ctx context.Context, p Path, flag int, perm fs.FileMode) (File, error)
	// Mkdir creates directory p; its parent must exist.
	Mkdir(ctx context.Context, p Path, perm fs.FileMode) error
	// Remove removes a file, symlink or empty directory.
	Remove(ctx context.Context, p Path) error
	// Rename moves from to to. It replaces a destination file (or an empty
	// directory, when from is a directory) unless flags say otherwise. Moving a
	// directory into its own subtree fails with invalid_path.
	Rename(ctx context.Context, from, to Path, flags RenameFlags) error
	// Symlink creates link p with the given target text. Backends store the target
	// verbatim. Confinement is enforced when the link is followed.
	Symlink(ctx context.Context, target string, p Path) error
	// Readlink returns the target text of symlink p.
	Readlink(ctx context.Context, p Path) (string, error)
	// Link creates a hard link to existing file oldp at newp.
	Link(ctx context.Context, oldp, newp Path) error
	// Chmod changes permission bits: [fs.ModePerm] and, where supported, setuid,
	// setgid and sticky.
	Chmod(ctx context.Context, p Path, mode fs.FileMode) error
	// Chtimes changes access and modification times. A zero time leaves that time unchanged.
	Chtimes(ctx context.Context, p Path, atime, mtime time.Time) error
	// Sub returns a Backend rooted at directory p, resolved now. A later rename or
	// replacement of p does not redirect it. Symlinks in the result resolve beneath
	// the new root.
	Sub(ctx context.Context, p Path) (Backend, error)
	// Resolve returns the [Location] p reaches.
	//
	// Every intermediate symlink is followed; the final one only if follow (or p
	// is MustBeDir). ".." in link targets is taken physically. In a [Namespace],
	// mounts are mapped, so the result names the place in the mount that really
	// serves it. The result's Path holds no symlink before its last component and
	// carries the [Path.Resolved] mark, so acting on it follows nothing again.
	//
	// A missing final entry is not an error: Found is false, and the Path is where
	// a creation would land (through a followed dangling link too). A missing or
	// non-directory intermediate is an error, with the code the operation itself
	// would return. Resolve keeps the same rules as every other method
	// ([MaxSymlinks], path_outside_sandbox). A Resolved p resolves to itself, or
	// fails with conflict if a symlink now stands on it.
	Resolve(ctx context.Context, p Path, follow bool) (Location, error)
}

// StatResolver is implemented by backends that resolve a path and stat what it
// reaches in one lookup (the physical backend).
//
// ResolveStat is [Backend.Resolve] plus, when the final entry is Found, what Stat
// (follow) or Lstat would report for the canonical path at the moment of the
// resolution. A layer that decides on the canonical path before revealing
// anything answers a stat from it without a second lookup. The function
// [ResolveStat] falls back when a backend lacks it.
type StatResolver interface {
	ResolveStat(ctx context.Context, p Path, follow bool) (Location, Info, error)
}

// ResolveStat resolves p in b and stats what it reaches.
// It calls b's own ResolveStat when b is a [StatResolver]. Otherwise it calls
// Resolve, then Stat or Lstat of the Resolved result. That result follows
// nothing, so a swap in between fails with conflict.
func ResolveStat(ctx context.Context, b Backend, p Path, follow bool) (Location, Info, error) {
	if sr, ok := b.(StatResolver); ok {
		return sr.ResolveStat(ctx, p, follow)
	}
	loc, err := b.Resolve(ctx, p, follow)
	if err != nil || !loc.Found {
		return loc, Info{}, err
	}
	var info Info
	if follow || p.MustBeDir() {
		info, err = b.Stat(ctx, loc.Path)
	} else {
		info, err = b.Lstat(ctx, loc.Path)
	}
	if err != nil {
		return Location{}, Info{}, err
	}
	return loc, info, nil
}

// OpenResolver is implemented by backends that resolve a path, let the caller
// decide on the location, and open that very object for reading, in one lookup
// (the physical backend).
//
// ResolveOpen resolves p following a final symlink, as Resolve(p, true) would.
// It calls decide with the location (Found false when p reaches nothing). Only if
// decide returns nil does it open what was resolved, as OpenFile(O_RDONLY) would.
// An error from decide is returned unchanged and nothing is opened. If the
// resolution itself fails, decide is not called. A layer that decides on
// canonical paths (a Dir with a policy) reads through it without a second lookup.
// Nothing swapped in after the decision can be opened instead. The function
// [ResolveOpen] falls back when a backend lacks it.
type OpenResolver interface {
	ResolveOpen(ctx context.Context, p Path, decide func(Location) error) (File, Location, error)
}

// ResolveOpen resolves p in b, lets decide rule on the location, and opens it for
// reading. It calls b's own ResolveOpen when b is an [OpenResolver]. Otherwise it
// calls Resolve, decide, and OpenFile(O_RDONLY) of the Resolved path. That path
// follows nothing, so a swap in between fails with conflict. Errors from the open
// are addressed to p.
func ResolveOpen(ctx context.Context, b Backend, p Path, decide func(Location) error) (File, Location, error) {
	if or, ok := b.(OpenResolver); ok {
		return or.ResolveOpen(ctx, p, decide)
	}
	loc, err := b.Resolve(ctx, p, true)
	return decideThen(loc, err, decide, func(q Path) (File, error) {
		return b.OpenFile(ctx, q, os.O_RDONLY, 0)
	}, func(err error) error { return renamedTo(err, loc.Path, p) })
}

// ListResolver is implemented by backends that resolve a path, let the caller
// decide on the location, and list that very directory, in one lookup (the
// physical backend).
//
// ResolveReadDir resolves p following a final symlink, as Resolve(p, true)
// would. It calls decide with the location (Found false when p reaches nothing).
// Only if decide returns nil does it list what was resolved, as ReadDir would.
// An error from decide is returned unchanged and nothing is listed. If the
// resolution itself fails, decide is not called. A layer that decides on
// canonical paths (a Dir with a policy) lists through it without a second
// lookup. No directory swapped in after the decision can be listed instead. The
// function [ResolveReadDir] falls back when a backend lacks it.
type ListResolver interface {
	ResolveReadDir(ctx context.Context, p Path, decide func(Location) error) ([]DirEntry, Location, error)
}

// ResolveReadDir resolves p in b, lets decide rule on the location, and lists it.
// It calls b's own ResolveReadDir when b is a [ListResolver]. Otherwise it calls
// Resolve, decide, and ReadDir of the Resolved path. That path follows nothing,
// so a swap in between fails with conflict. Errors from the listing are
// addressed to p.
func ResolveReadDir(ctx context.Context, b Backend, p Path, decide func(Location) error) ([]DirEntry, Location, error) {
	if lr, ok := b.(ListResolver); ok {
		return lr.ResolveReadDir(ctx, p, decide)
	}
	loc, err := b.Resolve(ctx, p, true)
	return decideThen(loc, err, decide, func(q Path) ([]DirEntry, error) {
		return b.ReadDir(ctx, q)
	}, func(err error) error { return renamedTo(err, loc.Path, p) })
}

// decideThen is the fallback of the fused calls (ResolveOpen, ResolveReadDir
// and the Namespace's): given the resolution of a path (loc, err), it lets
// decide rule on loc and, if decide returns nil, calls act on loc.Path, the
// Resolved path, which follows nothing, so a swap after the decision fails
// with conflict. Errors of the resolution and of decide are returned as they
// are; act's go through address, which names the path the caller asked for.
func decideThen[T any](loc Location, err error, decide func(Location) error, act func(Path) (T, error), address func(error) error) (T, Location, error) {
	var zero T
	if err != nil {
		return zero, Location{}, err
	}
	if err := decide(loc); err != nil {
		return zero, loc, err
	}
	v, err := act(loc.Path)
	if err != nil {
		return zero, loc, address(err)
	}
	return v, loc, nil
}

// renamedTo is err with its path p where it names from (a Resolved path the
// caller did not write).
func renamedTo(err error, from, p Path) error {
	if e, ok := err.(*Error); ok && e.Path == from.String() {
		e.Path = p.String()
	}
	return err
}

// HostLinkResolver is implemented by backends whose symlinks may hold absolute
// host paths (the physical backend, where the host planted them).
//
// Such a target is never shown: Readlink fails with path_outside_sandbox, and no
// backend follows it. HostLinkTarget reports where link p leads when its target
// names the backend's own root or a place beneath it, as a path from the root.
// It reports ok false for any other target. A [Namespace] uses it to follow the
// link to the same place.
type HostLinkResolver interface {
	HostLinkTarget(ctx context.Context, p Path) (Path, bool, error)
}

// Location is where a path leads, as [Backend.Resolve] reports it.
type Location struct {
	// Path is the canonical path, marked Resolved; relative to the backend's root.
	Path Path
	// Found reports whether the final entry exists.
	Found bool
	// Type is the final entry's type bits: [fs.ModeDir], [fs.ModeSymlink] when not
	// followed, another [fs.ModeType] bit, or 0 for a regular file. It is 0 when
	// Found is false.
	Type fs.FileMode
}

// Locator is implemented by backends that [Backend.Sub] returned and that can
// say where their root is now.
//
// Locate returns the root's current path, relative to the root of the backend
// the first Sub was called on (the origin), after any renames since. A root
// moved out of the origin's tree, or removed, fails with not_found. A Dir uses it
// so that a pinned capability decides on where its directory is now. Backends
// whose Subs cannot move (immutable trees), or that re-resolve their root by
// name on every call, need not implement it.
type Locator interface {
	Locate(ctx context.Context) (Path, error)
}

// File is an open file of a [Backend]. Each File has its own offset. Methods on a
// closed File fail with closed. A File is safe for concurrent use. Concurrent
// Read and Write calls share the offset, as with [*os.File].
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Stat returns information on the open file.
	Stat() (Info, error)
	// Truncate changes the size. Growth is zero-filled.
	Truncate(size int64) error
	// Sync commits the contents to stable storage where the backend has any.
	Sync() error
}

// HostPather is implemented by backends whose tree is a real host directory.
// HostPath returns that directory. It is a host-only interface: materialization
// uses it to bind the directory into a sandbox without copying. Guests never
// reach a Backend, so the path never reaches them.
type HostPather interface {
	HostPath() (string, bool)
}

// MaxSymlinks is the most symlinks a single path resolution follows.
// It is the Linux kernel's limit, and so openat2's in the physical backend.
// Every backend agrees.
const MaxSymlinks = 40

// TypedFile is implemented by Files that know the type of what they opened
// without a Stat call. The physical backend checked it before opening; memory
// holds the node. Type returns the type bits ([fs.ModeDir], or 0 for a regular
// file). Layers above use it to skip an fstat per open.
type TypedFile interface {
	File
	Type() fs.FileMode
}

// OpenStater is implemented by Files that recorded the status of the object they
// opened, at the moment they opened it. The physical backend examines what a path
// reaches with fstat before opening it, so a FIFO or device is never opened.
//
// OpenStat returns that status and true, without a system call. It returns false
// when the File recorded none; then call Stat. The status is that of the very
// object open, as it was at the open. A write since may have changed its size and
// times, which Stat reports. Its Name is the name the File was opened by. A reader
// uses it to check the type and a size limit, and to size its buffer before the
// first read. It must still read to the end (a short read), not trust the size.
//
// Wrappers of a File forward it ([ReadOnly] does). Callers use the function [OpenStat].
type OpenStater interface {
	OpenStat() (Info, bool)
}

// OpenStat returns the status f recorded at its open.
// It returns false unless f is an [OpenStater] that has one.
func OpenStat(f File) (Info, bool) {
	if s, ok := f.(OpenStater); ok {
		return s.OpenStat()
	}
	return Info{}, false
}
