//go:build linux

package materialize

import (
	"context"
	"io/fs"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// StrategyUpper: the Tree is the upper directory of a copy-on-write layer
// (OpenUpper) rather than a checkout; nothing was copied before the sandbox
// ran.
const StrategyUpper Strategy = "upper"

// OpenUpper returns the Tree of the changes a copy-on-write layer made over
// src (a lazy sandbox: overlay.Overlay), so that the same sync-back as a
// checkout's brings them back: Diff, sync-back (syncback.Run), Export, Keep, MarshalState,
// Reopen and Close work on it as on a Tree from Checkout, with every guarantee
// the package doc gives them.
//
// upperDir is the layer's upper directory on the host: every entry the sandbox
// added or changed, at its path relative to src's root, and the directories
// made to hold them. It must be a real directory (no symlink on the way at its
// last component) owned by this user; OpenUpper takes it over (Close removes it
// unless it is kept) and sets its own mode to 0700 when the sandbox opened it
// to others (the root's mode is never synced). bases describes, for every path
// of src the layer copied up, replaced or removed, what the source entry was
// when the sandbox first saw it (Type, Mode, Size, Digest for a file, Target
// for a symlink, ModTime); a path with no base is new. A base whose path is
// not in the upper was removed (a directory's entries each need their own base
// to be removed with it, as the layer records them). The bases play the
// checkout manifest's part: each change is compared with its base to tell what
// the sandbox changed, and the source with it to find conflicts, so a file the
// host edited after the sandbox saw it is a conflict, not overwritten. An
// empty Digest or Target means unknown (the source changed before the layer
// could read what the sandbox saw): it matches nothing, so a change there is
// a conflict. A base for "." (a directory) gives the root's modification time
// when the layer started (the upper's root must have had it then): a root
// whose time the sandbox changed gets that time on the source, as a
// checkout's root does.
//
// A directory the layer copied up only to hold a change gets, in the upper,
// its source's mode with the owner's rwx bits added; that is not a change. The
// caller must have stopped every writer of upperDir (unmounted the layer):
// OpenUpper does not copy it. Base paths must be valid (fs.ValidPath; "."
// only for the root's directory base): invalid_path otherwise. Nothing in
// upperDir is followed (see the package doc).
func OpenUpper(ctx context.Context, src *dir.Dir, upperDir string, bases map[string]Entry) (*Tree, error) {
	const op = "openupper"
	if src == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "nil source Dir")
	}
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, vfs.Root, err)
	}
	rootTime, err := checkBases(op, bases)
	if err != nil {
		return nil, err
	}
	fd, err := openUpperDir(op, upperDir)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Entries: make(map[string]Entry, len(bases)), Created: time.Now(), stat: map[string]statKey{}}
	for p, b := range bases {
		if p == "." {
			continue
		}
		e := baseEntry(b)
		if e.IsDir() {
			e.Mode = upperDirMode(fd, p, e.Mode)
		}
		m.Entries[p] = e
	}
	return &Tree{src: src, path: upperDir, rootFd: fd, strategy: StrategyUpper, created: true, manifest: m, rootTime: rootTime}, nil
}

// checkBases checks every base's path and returns the root's time from its
// base (zero without one).
func checkBases(op string, bases map[string]Entry) (time.Time, error) {
	var rootTime time.Time
	for p, b := range bases {
		if p == "." {
			// The root's: its time when the layer started, so a root whose
			// entries the sandbox created and removed gets the time it left, as
			// a checkout's does (see syncback.Run).
			if b.Type&fs.ModeType != fs.ModeDir {
				return time.Time{}, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "the root's base is not a directory")
			}
			rootTime = b.ModTime
			continue
		}
		if !fs.ValidPath(p) {
			return time.Time{}, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "a base names an invalid path")
		}
	}
	return rootTime, nil
}

// openUpperDir opens the upper directory without following a symlink,
// refuses another user's, and takes others' permission (and special) bits
// away from it.
func openUpperDir(op, upperDir string) (int, error) {
	fd, err := unix.Open(upperDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "the upper directory cannot be opened as a directory: "+err.Error())
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, vfs.Errno(op, vfs.Root, err)
	}
	if int(st.Uid) != os.Getuid() {
		unix.Close(fd)
		return -1, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "the upper directory belongs to another user")
	}
	if st.Mode&0o7077 != 0 {
		if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), 0o700, 0); err != nil {
			unix.Close(fd)
			return -1, vfs.Errno(op, vfs.Root, err)
		}
	}
	return fd, nil
}

// baseEntry is the manifest entry of base b: its type, mode bits and time,
// a file's size and digest, a symlink's target (and no mode).
func baseEntry(b Entry) Entry {
	e := Entry{Type: b.Type & fs.ModeType, Mode: b.Mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), ModTime: b.ModTime}
	switch {
	case e.IsRegular():
		e.Size, e.Digest = b.Size, b.Digest
	case e.IsSymlink():
		e.Target, e.Mode = b.Target, 0
	}
	return e
}

// upperDirMode is the mode to record for the source directory p whose mode
// was mode: the upper's own when the upper holds p as a directory with mode
// plus the owner's rwx (the layer's copy-up adds them, which is no change),
// else mode.
func upperDirMode(root int, p string, mode fs.FileMode) fs.FileMode {
	fd, err := hostfs.OpenBeneath(root, p, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return mode
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return mode
	}
	_, up := hostfs.TypeOf(&st)
	if up != mode && up == mode|0o700 {
		return up
	}
	return mode
}
