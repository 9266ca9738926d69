//go:build linux

package materialize

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"time"

	"crypto/sha256"
	"encoding/hex"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// populate creates the checkout's directories, copies (or links) its files on
// the worker pool, recreates its symlinks, then sets directory modes and records
// the manifest.
func (t *Tree) populate(ctx context.Context, entries []*srcEntry, hostFd int) error {
	const op = "checkout"
	for _, e := range entries {
		if e.typ != fs.ModeDir {
			continue
		}
		if err := hostfs.MkdirBeneath(t.rootFd, e.rel, 0o700); err != nil {
			return vfs.Errno(op, vfs.MustParse(e.rel), err)
		}
		e.ok = true
	}
	pr := t.startProgress(entries)
	err := t.runWorkers(ctx, entries, pr, func(ctx context.Context, e *srcEntry, buf []byte) error {
		return t.copyFile(ctx, e, buf, hostFd, pr)
	})
	pr.finish()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.typ != fs.ModeSymlink {
			continue
		}
		if err := hostfs.SymlinkBeneath(t.rootFd, e.target, e.rel); err != nil {
			return vfs.Errno(op, vfs.MustParse(e.rel), err)
		}
		e.ok = true
	}
	if err := t.setDirModes(entries); err != nil {
		return err
	}
	racy := clockNow(t.rootFd)
	t.setRootTime(ctx)
	t.record(entries, racy)
	return nil
}

// setDirModes gives the checkout's directories their modes and times, last
// and deepest first, once nothing more is written into them.
func (t *Tree) setDirModes(entries []*srcEntry) error {
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.typ != fs.ModeDir {
			continue
		}
		fd, err := hostfs.OpenBeneath(t.rootFd, e.rel, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return vfs.Errno("checkout", vfs.MustParse(e.rel), err)
		}
		proc := "/proc/self/fd/" + strconv.Itoa(fd)
		err = unix.Fchmodat(unix.AT_FDCWD, proc, uint32(e.mode), 0)
		if err == nil {
			err = unix.UtimesNanoAt(unix.AT_FDCWD, proc, times(e.mtime), 0)
		}
		unix.Close(fd)
		if err != nil {
			return vfs.Errno("checkout", vfs.MustParse(e.rel), err)
		}
	}
	return nil
}

// setRootTime gives the checkout's root the source's time, after clockNow's
// probe file came and went in it: tools that look at the working directory
// see the source's (go test's result cache hashes the directory's status
// with the files it read, so a root stamped with each checkout's time misses
// every run).
func (t *Tree) setRootTime(ctx context.Context) {
	fi, err := t.src.Lstat(ctx, ".")
	if err != nil || !fi.IsDir() {
		return
	}
	if unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(t.rootFd), times(fi.ModTime()), 0) == nil {
		t.rootTime = fi.ModTime()
	}
}

// clockNow returns the change time a file changed now gets on the checkout's
// filesystem (a probe file's, created and removed in root): the kernel stamps
// change times from a coarse clock, so an edit in the same tick as the
// checkout's own last write could leave every field the stat cache compares
// equal. Files recorded with this change time or a later one count as racy
// (always re-hashed, as git treats racily clean index entries); files written
// in an earlier tick cannot be changed without a later change time. Checkout
// does not wait for the clock to move: at most the files of the last tick
// (a few milliseconds of the copy) are re-hashed by the first Diff. When the
// probe cannot be made it returns 0: every file is racy.
func clockNow(root int) int64 {
	name := ".capfs-clock-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fd, err := hostfs.OpenatRetry(root, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	unix.Unlinkat(root, name, 0)
	if err != nil {
		return 0
	}
	return st.Ctim.Nano()
}

// futimes sets the access and modification times of the open file fd to mtime:
// utimensat with AT_EMPTY_PATH, or through /proc/self/fd on kernels without it.
func futimes(fd int, mtime time.Time) error {
	err := unix.UtimesNanoAt(fd, "", times(mtime), unix.AT_EMPTY_PATH)
	if err == unix.EINVAL || err == unix.ENOENT {
		err = unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), times(mtime), 0)
	}
	return err
}

func times(mtime time.Time) []unix.Timespec {
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return []unix.Timespec{ts, ts}
}

// record fills the manifest from the entries that made it into the checkout.
// Files whose recorded change time is racyFrom (ns) or later are marked racy.
func (t *Tree) record(entries []*srcEntry, racyFrom int64) {
	m := t.manifest
	for _, e := range entries {
		if !e.ok {
			continue
		}
		en := Entry{Type: e.typ, Mode: e.mode, ModTime: e.mtime}
		switch e.typ {
		case 0:
			en.Size, en.Digest = e.size, e.digest
			k := e.key
			k.racy = k.ctime >= racyFrom
			m.stat[e.rel] = k
		case fs.ModeSymlink:
			en.Target = e.target
		}
		m.Entries[e.rel] = en
	}
	sort.Slice(t.skipped, func(i, j int) bool { return t.skipped[i].Path < t.skipped[j].Path })
}

// copyFile checks out one regular file: it opens it through the Dir (the
// policy decides; a refusal is a Skip), then hard-links the host's inode when
// the strategy allows it, or else creates the copy and hashes while copying.
func (t *Tree) copyFile(ctx context.Context, e *srcEntry, buf []byte, hostFd int, pr *progress) error {
	const op = "checkout"
	h, err := t.src.Open(ctx, e.rel, os.O_RDONLY, 0)
	if err != nil {
		return t.skipOr(e.rel, err)
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		t.skip(e.rel, vfs.NewError(vfs.CodeNotRegular, op, vfs.MustParse(e.rel), "changed during checkout"))
		return nil
	}
	e.size, e.mtime, e.mode = fi.Size(), fi.ModTime(), fi.Mode().Perm()
	if hostFd >= 0 {
		linked, err := t.linkFile(e, fi, hostFd)
		if err != nil {
			return vfs.Errno(op, vfs.MustParse(e.rel), err)
		}
		if linked {
			pr.bytes.Add(e.size)
			return nil
		}
	}
	return t.writeCopy(ctx, e, h, fi.Size(), buf, pr)
}

// writeCopy creates e's file in the checkout and copies src (of size want)
// into it, hashing, then gives it e's time and mode and records its stat key.
func (t *Tree) writeCopy(ctx context.Context, e *srcEntry, src io.Reader, want int64, buf []byte, pr *progress) error {
	// Created with its mode (less the umask) in the private checkout: the chmod
	// below is only needed where the umask took bits away.
	fd, err := hostfs.OpenBeneath(t.rootFd, e.rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(e.mode))
	if err != nil {
		return vfs.Errno("checkout", vfs.MustParse(e.rel), err)
	}
	f := os.NewFile(uintptr(fd), e.rel)
	defer f.Close()
	n, digest, err := copyHashing(ctx, f, src, want, buf, pr, e.rel)
	if err != nil {
		return err
	}
	e.size, e.digest = n, digest
	return finishCopy(fd, e)
}

// copyHashing copies src to dst through buf, counting the bytes in pr, and
// returns their number and SHA-256 digest. It stops at want bytes when want
// is positive, else at EOF.
func copyHashing(ctx context.Context, dst io.Writer, src io.Reader, want int64, buf []byte, pr *progress, rel string) (int64, string, error) {
	const op = "checkout"
	hash := sha256.New()
	var n int64
	for {
		if ctx.Err() != nil {
			return 0, "", canceled(op, vfs.MustParse(rel), ctx.Err())
		}
		if want > 0 && n == want {
			// The size the open file had: no read just to meet EOF (a file
			// growing meanwhile is copied as it was; the sync-back's conflict
			// check compares the source with this digest). A file claiming
			// size 0 is read to EOF.
			break
		}
		k, rerr := src.Read(buf)
		if k > 0 {
			hash.Write(buf[:k])
			if _, err := dst.Write(buf[:k]); err != nil {
				return 0, "", vfs.Errno(op, vfs.MustParse(rel), err)
			}
			n += int64(k)
			pr.bytes.Add(int64(k))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, "", rerr
		}
	}
	return n, hex.EncodeToString(hash.Sum(nil)), nil
}

// finishCopy gives the copy open as fd e's modification time and mode (where
// the umask took bits away), and records its stat key.
func finishCopy(fd int, e *srcEntry) error {
	fail := func(err error) error { return vfs.Errno("checkout", vfs.MustParse(e.rel), err) }
	if err := futimes(fd, e.mtime); err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	if fs.FileMode(st.Mode&0o7777) != e.mode {
		if err := unix.Fchmod(fd, uint32(e.mode)); err != nil {
			return fail(err)
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return fail(err)
		}
	}
	e.key = keyOf(&st)
	e.ok = true
	return nil
}

// linkFile hard-links the host file behind e into the checkout when that is safe
// (see StrategyHardLink) and reports whether it did.
func (t *Tree) linkFile(e *srcEntry, fi fs.FileInfo, hostFd int) (bool, error) {
	hfd, err := hostfs.OpenBeneath(hostFd, e.rel, unix.O_PATH, 0)
	if err != nil {
		return false, nil // not reachable without a symlink, or gone: copy it
	}
	defer unix.Close(hfd)
	var st unix.Stat_t
	if unix.Fstat(hfd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 || st.Size != fi.Size() ||
		st.Mtim.Nano() != fi.ModTime().UnixNano() {
		return false, nil
	}
	pfd, name, err := hostfs.ParentOf(t.rootFd, e.rel)
	if err != nil {
		return false, err
	}
	defer unix.Close(pfd)
	if err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(hfd), pfd, name, unix.AT_SYMLINK_FOLLOW); err != nil {
		return false, nil // EXDEV, EPERM (protected_hardlinks), ...: copy it
	}
	// The manifest describes the very inode linked.
	f, lst, err := hostfs.OpenRegularAt(pfd, name, &st)
	if err != nil {
		return false, err
	}
	defer f.Close()
	d, n, err := hostfs.HashFile(f)
	if err != nil {
		return false, err
	}
	e.digest, e.size, e.mode, e.key, e.ok = d, n, fs.FileMode(lst.Mode&0o777), keyOf(&lst), true
	return true, nil
}

// bind makes t a zero-copy checkout of the host directory hostFd: the stat cache
// first (so an edit racing with the hashing shows up in Diff), then the digests
// through the Dir.
// It reports false, having changed nothing, if the directory holds an entry the
// Dir's walk did not show, or the Dir's policy refused a file.
func (t *Tree) bind(ctx context.Context, hostFd int, entries []*srcEntry) (bool, error) {
	// Every entry of the directory must be one the Dir showed: the bind shows
	// them all, and the Dir leaves out names it cannot address (the physical
	// backend drops names holding a backslash from its listings) as well as
	// whatever its policy hides.
	shown := make(map[string]bool, len(entries))
	for _, e := range entries {
		shown[e.rel] = true
	}
	keys := map[string]statKey{}
	errHidden := errors.New("an entry the Dir does not show")
	if err := hostfs.Walk(hostFd, 0, func(e *hostfs.Entry) error {
		if !shown[e.Rel] {
			return errHidden
		}
		if e.St.Mode&unix.S_IFMT == unix.S_IFREG {
			keys[e.Rel] = keyOf(&e.St)
		}
		return nil
	}); err == errHidden {
		return false, nil
	} else if err != nil {
		return false, vfs.Errno("checkout", vfs.Root, err)
	}
	pr := t.startProgress(entries)
	err := t.runWorkers(ctx, entries, pr, func(ctx context.Context, e *srcEntry, buf []byte) error {
		h, err := t.src.Open(ctx, e.rel, os.O_RDONLY, 0)
		if err != nil {
			if Skippable(err) {
				t.skip(e.rel, err)
				return nil
			}
			return err
		}
		defer h.Close()
		hash := sha256.New()
		n, err := io.CopyBuffer(hash, h, buf)
		if err != nil {
			return err
		}
		pr.bytes.Add(n)
		e.size, e.digest, e.key, e.ok = n, hex.EncodeToString(hash.Sum(nil)), keys[e.rel], true
		return nil
	})
	pr.finish()
	if err != nil {
		return false, err
	}
	if len(t.Skipped()) > 0 {
		return false, nil
	}
	for _, e := range entries {
		if e.typ != 0 {
			e.ok = true
		}
	}
	// The host may edit its files at any time: those changed in the last second
	// before the checkout are racy.
	t.record(entries, t.manifest.Created.Add(-time.Second).UnixNano())
	p, _ := t.opts.Host.(vfs.HostPather).HostPath()
	t.path, t.rootFd = p, hostFd
	t.bindFile = os.NewFile(uintptr(hostFd), p)
	return true, nil
}
