package materialize

import (
	"context"
	"errors"
	"io/fs"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

// Diff compares the checkout as it is now with the Manifest and returns the
// changes, sorted by path: added, modified (a file's size or digest, a symlink's
// target), deleted, type_changed, mode_changed (permission or special bits
// only; symlinks have no mode) and touched (a regular file with the same
// contents and mode and another modification time). A directory that is gone reports each of its
// manifest entries deleted; a new directory reports its contents added.
//
// The walk never follows a symlink and opens nothing but regular files (with
// O_NOFOLLOW|O_NONBLOCK, checked to be the inode just examined), so a FIFO or a
// link planted by the sandbox cannot block it or lead it out of the checkout.
// Directories are read (listed, their entries lstat'ed, symlinks read) ahead of
// the comparison by GOMAXPROCS goroutines, each opening a directory by name
// relative to its parent's handle; the comparison still meets the entries one
// at a time in path order, so the result, and the change a SyncBack limit stops
// at, are what a single walk would give. At most 8 directory handles per
// goroutine are open ahead of it, and none once Diff returns.
//
// Stat cache: like git's index, Diff does not re-read a file whose inode,
// size, modification time, change time and mode are what Checkout recorded
// right after writing it; any write, truncation, chmod, rename over it or
// utimes call changes at least the change time, which user space cannot set.
// Files Checkout wrote in the clock tick it finished in (the kernel's coarse
// clock stamps change times) are "racy" and always re-hashed, so an edit right
// after the checkout cannot leave every field equal. (For a Bound checkout, files the host changed
// within a second before the checkout are "racy" and always re-hashed.)
// Everything else that differs is re-hashed, so Modified means the contents
// really differ, not just the times.
//
// For a Bound checkout, Diff compares the physical directory with the manifest:
// it shows the host's own edits since the checkout.
func (t *Tree) Diff(ctx context.Context) ([]Change, error) {
	if err := t.live("diff"); err != nil {
		return nil, err
	}
	changes, _, err := t.scan(ctx, Limits{MaxFiles: -1, MaxBytes: -1, MaxDepth: -1})
	return changes, err
}

// newChange returns a change of path rel with copies of old and ne (either may
// be nil), so that the scan's own entries need not live on the heap.
func newChange(kind ChangeKind, rel string, old, ne *Entry) Change {
	c := Change{Kind: kind, Path: rel}
	if old != nil {
		o := *old
		c.Old = &o
	}
	if ne != nil {
		n := *ne
		c.New = &n
	}
	return c
}

// checkoutTime reports whether mtime is the time Checkout itself left on the
// file rel (its stat cache's): a filesystem coarser than the source's clock
// stores the source's time rounded, which is no change.
func checkoutTime(m *Manifest, rel string, mtime time.Time) bool {
	k, ok := m.stat[rel]
	return ok && k.mtime != 0 && k.mtime == mtime.UnixNano()
}

// limitHit is the change at which a scan stopped because a limit was exceeded.
type limitHit struct {
	change Change
	reason string
}

// scan is Diff with limits: it stops, returning the change that crossed it,
// once the changes to write exceed lim.MaxFiles entries or lim.MaxBytes bytes.
// Paths deeper than lim.MaxDepth (below every manifest path) are reported, not
// entered. Negative limits are off.
func (t *Tree) scan(ctx context.Context, lim Limits) ([]Change, *limitHit, error) {
	m := t.manifest
	maxDepth := 0
	if lim.MaxDepth >= 0 {
		deepest := 0
		for p := range m.Entries {
			deepest = max(deepest, strings.Count(p, "/")+1)
		}
		maxDepth = max(lim.MaxDepth, deepest) + 1
	}
	var dirTimes []dirTime
	if !t.rootTime.IsZero() {
		var st unix.Stat_t
		if unix.Fstat(t.rootFd, &st) == nil {
			if now := time.Unix(0, st.Mtim.Nano()); !now.Equal(t.rootTime) {
				dirTimes = append(dirTimes, dirTime{"", t.rootTime, now})
			}
		}
	}
	seen := make(map[string]bool, len(m.Entries))
	var out []Change
	var hit *limitHit
	files, bytes := 0, int64(0)
	errStop := errors.New("stop")
	n := 0
	err := walkHostParallel(t.rootFd, maxDepth, runtime.GOMAXPROCS(0), func(he *hostEntry) error {
		if n++; n&255 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		typ, mode := typeOf(&he.st)
		// ne and old stay on the stack; newChange copies them for a change.
		ne := Entry{Type: typ, Mode: mode, ModTime: time.Unix(0, he.st.Mtim.Nano())}
		old, had := m.Entries[he.rel]
		var oldp *Entry
		if had {
			seen[he.rel] = true
			oldp = &old
		}
		switch typ {
		case 0:
			ne.Size = he.st.Size
			if had && old.IsRegular() {
				if k, ok := m.stat[he.rel]; ok && !k.racy && sameKey(k, keyOf(&he.st)) {
					ne.Digest = old.Digest
				}
			}
			if ne.Digest == "" && lim.MaxBytes >= 0 && bytes+ne.Size > lim.MaxBytes {
				// Over the limit whatever the contents: do not read them.
				kind := Added
				if had {
					kind = Modified
					if !old.IsRegular() {
						kind = TypeChanged
					}
				}
				if !had || !old.IsRegular() || old.Size != ne.Size {
					c := newChange(kind, he.rel, oldp, &ne)
					out = append(out, c)
					hit = &limitHit{c, "more bytes to write than the limit of " + strconv.FormatInt(lim.MaxBytes, 10)}
					return errStop
				}
			}
			if ne.Digest == "" {
				f, _, err := openRegularAt(he.dirfd, he.name, &he.st)
				if err != nil {
					return err
				}
				d, size, err := hashFile(f)
				f.Close()
				if err != nil {
					return err
				}
				ne.Digest, ne.Size = d, size
			}
		case fs.ModeSymlink:
			ne.Target = he.target
			ne.Mode = 0
		}
		var c Change
		switch {
		case !had:
			c = newChange(Added, he.rel, nil, &ne)
		case old.Type != typ:
			c = newChange(TypeChanged, he.rel, oldp, &ne)
		case typ == 0 && (old.Size != ne.Size || old.Digest != ne.Digest):
			c = newChange(Modified, he.rel, oldp, &ne)
		case typ == fs.ModeSymlink && old.Target != ne.Target:
			c = newChange(Modified, he.rel, oldp, &ne)
		case typ != fs.ModeSymlink && old.Mode != mode:
			c = newChange(ModeChanged, he.rel, oldp, &ne)
		case typ == 0 && !old.ModTime.Equal(ne.ModTime) && !checkoutTime(m, he.rel, ne.ModTime):
			c = newChange(Touched, he.rel, oldp, &ne)
		default:
			if typ == fs.ModeDir && !old.ModTime.Equal(ne.ModTime) {
				dirTimes = append(dirTimes, dirTime{he.rel, old.ModTime, ne.ModTime})
			}
			return nil
		}
		out = append(out, c)
		if c.Kind != ModeChanged && c.Kind != Touched {
			files++
			if typ == 0 {
				bytes += ne.Size
			}
			switch {
			case lim.MaxFiles >= 0 && files > lim.MaxFiles:
				hit = &limitHit{c, "more entries to write than the limit of " + strconv.Itoa(lim.MaxFiles)}
			case lim.MaxBytes >= 0 && bytes > lim.MaxBytes:
				hit = &limitHit{c, "more bytes to write than the limit of " + strconv.FormatInt(lim.MaxBytes, 10)}
			}
			if hit != nil {
				return errStop
			}
		}
		return nil
	})
	if err == errStop {
		return out, hit, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, canceled("diff", vfs.Root, ctx.Err())
		}
		if err == errChanged || err == errNotRegular {
			return nil, nil, vfs.NewError(vfs.CodeConflict, "diff", vfs.Root, "checkout changed while it was scanned")
		}
		return nil, nil, vfs.Errno("diff", vfs.Root, err)
	}
	for p, e := range m.Entries {
		if !seen[p] {
			old := e
			out = append(out, Change{Kind: Deleted, Path: p, Old: &old})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	t.dirTimes = dirTimes
	return out, nil, nil
}

// dirTime is a directory of the checkout (rel, "" for the root) whose
// modification time the sandbox changed (it created and removed entries in
// it, or set the time) from base, the source's at the checkout, to now.
type dirTime struct {
	rel       string
	base, now time.Time
}

// syncDirTimes gives the source's directories the times the sandbox left on
// them, for every directory the last scan found with a changed time (its
// entries, as synced, the same), when the source's directory still has the
// time it had at the checkout (neither the host nor the apply changed it).
// A plain run of the command would have left those times on them, and tools
// look at them: go test's result cache hashes the status of a directory a
// test listed, so a test that creates and removes a file in its working
// directory would otherwise miss the cache on every run. Each call goes
// through the Dir (decided and audited as chtimes); a time that cannot be set
// is left as it was (a time is not content), and a concurrent change on the
// host between the check and the call can lose that directory's newer time
// (not its entries).
func (t *Tree) syncDirTimes(ctx context.Context) {
	for _, d := range t.dirTimes {
		if ctx.Err() != nil {
			return
		}
		p := d.rel
		if p == "" {
			p = "."
		}
		fi, err := t.src.Lstat(ctx, p)
		if err != nil || !fi.IsDir() || !fi.ModTime().Equal(d.base) {
			continue
		}
		if t.src.Chtimes(ctx, p, d.now, d.now) != nil {
			continue
		}
		if d.rel == "" {
			t.rootTime = d.now
		} else if e, ok := t.manifest.Entries[d.rel]; ok && e.IsDir() {
			e.ModTime = d.now
			t.manifest.Entries[d.rel] = e
		}
	}
	t.dirTimes = nil
}
