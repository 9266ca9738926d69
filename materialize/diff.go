//go:build linux

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

	"github.com/capfs/capfs/materialize/internal/hostfs"
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
// at a time in path order, so the result, and the change a sync-back limit stops
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
	if err := t.Live("diff"); err != nil {
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

// LimitHit is the change at which a scan stopped because a limit was exceeded.
type LimitHit struct {
	Change Change
	Reason string
}

// scan is Diff with limits: it stops, returning the change that crossed it,
// once the changes to write exceed lim.MaxFiles entries or lim.MaxBytes bytes.
// Paths deeper than lim.MaxDepth (below every manifest path) are reported, not
// entered. Negative limits are off.
func (t *Tree) scan(ctx context.Context, lim Limits) ([]Change, *LimitHit, error) {
	m := t.manifest
	s := &scanner{ctx: ctx, m: m, lim: lim, seen: make(map[string]bool, len(m.Entries)), dirTimes: t.rootDirTimes()}
	err := hostfs.WalkParallel(t.rootFd, scanDepth(m, lim.MaxDepth), runtime.GOMAXPROCS(0), s.visit)
	if err == errScanStop {
		return s.out, s.hit, nil
	}
	if err != nil {
		return nil, nil, scanError(ctx, err)
	}
	out := s.out
	for p, e := range m.Entries {
		if !s.seen[p] {
			old := e
			out = append(out, Change{Kind: Deleted, Path: p, Old: &old})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	t.dirTimes = s.dirTimes
	return out, nil, nil
}

// errScanStop ends a scan's walk at the change that crossed a limit.
var errScanStop = errors.New("stop")

// scanner is one scan's state: what it compares against, the limits, and
// what it found so far.
type scanner struct {
	ctx      context.Context
	m        *Manifest
	lim      Limits
	seen     map[string]bool // manifest paths met on the host
	out      []Change
	hit      *LimitHit
	dirTimes []dirTime
	files    int   // changes that write an entry
	bytes    int64 // bytes those changes write
	n        int   // entries visited, to poll ctx now and then
}

// scanDepth is the walk depth for limit maxDepth: one below the deeper of
// maxDepth and every manifest path; 0 (no limit) when maxDepth is negative.
func scanDepth(m *Manifest, maxDepth int) int {
	if maxDepth < 0 {
		return 0
	}
	deepest := 0
	for p := range m.Entries {
		deepest = max(deepest, strings.Count(p, "/")+1)
	}
	return max(maxDepth, deepest) + 1
}

// rootDirTimes is the root's changed time, when the checkout recorded one and
// the root's modification time is another now.
func (t *Tree) rootDirTimes() []dirTime {
	if t.rootTime.IsZero() {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(t.rootFd, &st) != nil {
		return nil
	}
	now := time.Unix(0, st.Mtim.Nano())
	if now.Equal(t.rootTime) {
		return nil
	}
	return []dirTime{{"", t.rootTime, now}}
}

// scanError is Diff's error for a failed walk: canceled, a conflict when the
// checkout changed under the walk, else the errno.
func scanError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return canceled("diff", vfs.Root, ctx.Err())
	}
	if err == hostfs.ErrChanged || err == hostfs.ErrNotRegular {
		return vfs.NewError(vfs.CodeConflict, "diff", vfs.Root, "checkout changed while it was scanned")
	}
	return vfs.Errno("diff", vfs.Root, err)
}

// visit compares one host entry with the manifest and records its change.
func (s *scanner) visit(he *hostfs.Entry) error {
	if s.n++; s.n&255 == 0 && s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	typ, mode := hostfs.TypeOf(&he.St)
	// ne and old stay on the stack; newChange copies them for a change.
	ne := Entry{Type: typ, Mode: mode, ModTime: time.Unix(0, he.St.Mtim.Nano())}
	old, had := s.m.Entries[he.Rel]
	var oldp *Entry
	if had {
		s.seen[he.Rel] = true
		oldp = &old
	}
	switch typ {
	case 0:
		if err := s.regular(he, oldp, &ne); err != nil {
			return err
		}
	case fs.ModeSymlink:
		ne.Target = he.Target
		ne.Mode = 0
	}
	kind, changed := s.changeKind(he.Rel, oldp, &ne)
	if !changed {
		return nil
	}
	return s.record(newChange(kind, he.Rel, oldp, &ne))
}

// regular sets ne's size and digest for a regular file: the manifest's digest
// when the stat cache vouches for the file, else its hash. A file over the
// byte limit whatever its contents is recorded unread and stops the walk.
func (s *scanner) regular(he *hostfs.Entry, old, ne *Entry) error {
	ne.Size = he.St.Size
	if old != nil && old.IsRegular() {
		if k, ok := s.m.stat[he.Rel]; ok && !k.racy && sameKey(k, keyOf(&he.St)) {
			ne.Digest = old.Digest
		}
	}
	if ne.Digest != "" {
		return nil
	}
	if s.lim.MaxBytes >= 0 && s.bytes+ne.Size > s.lim.MaxBytes && (old == nil || !old.IsRegular() || old.Size != ne.Size) {
		// Over the limit whatever the contents: do not read them.
		c := newChange(unreadKind(old), he.Rel, old, ne)
		s.out = append(s.out, c)
		s.hit = &LimitHit{c, s.bytesReason()}
		return errScanStop
	}
	f, _, err := hostfs.OpenRegularAt(he.Dirfd, he.Name, &he.St)
	if err != nil {
		return err
	}
	d, size, err := hostfs.HashFile(f)
	f.Close()
	if err != nil {
		return err
	}
	ne.Digest, ne.Size = d, size
	return nil
}

// unreadKind is the change to a regular file whose contents were not read,
// from old (nil when the path is new).
func unreadKind(old *Entry) ChangeKind {
	switch {
	case old == nil:
		return Added
	case !old.IsRegular():
		return TypeChanged
	}
	return Modified
}

// changeKind is the change from old (nil when the path is new) to ne, or
// false for none. An unchanged directory with another time is kept for
// syncDirTimes.
func (s *scanner) changeKind(rel string, old, ne *Entry) (ChangeKind, bool) {
	typ := ne.Type
	switch {
	case old == nil:
		return Added, true
	case old.Type != typ:
		return TypeChanged, true
	case typ == 0 && (old.Size != ne.Size || old.Digest != ne.Digest):
		return Modified, true
	case typ == fs.ModeSymlink && old.Target != ne.Target:
		return Modified, true
	case typ != fs.ModeSymlink && old.Mode != ne.Mode:
		return ModeChanged, true
	case typ == 0 && !old.ModTime.Equal(ne.ModTime) && !checkoutTime(s.m, rel, ne.ModTime):
		return Touched, true
	}
	if typ == fs.ModeDir && !old.ModTime.Equal(ne.ModTime) {
		s.dirTimes = append(s.dirTimes, dirTime{rel, old.ModTime, ne.ModTime})
	}
	return "", false
}

// record appends c and counts it against the limits, stopping the walk at
// the change that crosses one. Mode and time changes write no entry and
// count for nothing.
func (s *scanner) record(c Change) error {
	s.out = append(s.out, c)
	if c.Kind == ModeChanged || c.Kind == Touched {
		return nil
	}
	s.files++
	if c.New.Type == 0 {
		s.bytes += c.New.Size
	}
	switch {
	case s.lim.MaxFiles >= 0 && s.files > s.lim.MaxFiles:
		s.hit = &LimitHit{c, "more entries to write than the limit of " + strconv.Itoa(s.lim.MaxFiles)}
	case s.lim.MaxBytes >= 0 && s.bytes > s.lim.MaxBytes:
		s.hit = &LimitHit{c, s.bytesReason()}
	}
	if s.hit != nil {
		return errScanStop
	}
	return nil
}

// bytesReason is the reason a scan stops at the byte limit.
func (s *scanner) bytesReason() string {
	return "more bytes to write than the limit of " + strconv.FormatInt(s.lim.MaxBytes, 10)
}

// dirTime is a directory of the checkout (rel, "" for the root) whose
// modification time the sandbox changed (it created and removed entries in
// it, or set the time) from base, the source's at the checkout, to now.
type dirTime struct {
	rel       string
	base, now time.Time
}

// SyncDirTimes gives the source's directories the times the sandbox left on
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
// (not its entries). Only syncback.Run calls it, after a sync that applied
// everything.
func (t *Tree) SyncDirTimes(ctx context.Context) {
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
