package materialize

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"crypto/sha256"
	"encoding/hex"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// EnvTmpDir names the environment variable that sets the default base directory
// of checkouts.
const EnvTmpDir = "CAPFS_TMPDIR"

// DefaultProgressInterval is how often, at most, Options.Progress is called while
// files are copied (besides its final call).
const DefaultProgressInterval = 100 * time.Millisecond

// Options configures Checkout.
type Options struct {
	// Base is the parent directory of the checkout; the checkout itself is a new
	// directory, mode 0700, under it. "" means $CAPFS_TMPDIR when set, else
	// /dev/shm when it is a writable tmpfs with room for the files (plus 10% and
	// 64 MiB), else os.TempDir().
	Base string
	// ReadOnly promises that the sandbox will see the checkout read-only (the
	// caller binds it read-only). It enables the zero-copy strategies: a bind of
	// the physical directory itself, and hard links. SyncBack of a read-only
	// checkout applies nothing.
	ReadOnly bool
	// Host is optional and host-only: the backend that serves the same tree as the
	// source Dir (the mount's backend, already Sub'd to the subtree). When it is
	// (or wraps, like vfs.ReadOnly) a physical directory (vfs.HostPather), a
	// ReadOnly checkout binds or hard-links instead of copying. Checkout verifies
	// that the directory it opens is the backend's root (same inode).
	Host vfs.Backend
	// Workers is the number of parallel copy workers; 0 means runtime.GOMAXPROCS(0).
	Workers int
	// Progress, when set, is called from one goroutine at most every
	// ProgressInterval while files are copied or hashed, and a last time with
	// Done set.
	Progress func(Progress)
	// ProgressInterval throttles Progress; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
	// Private asks for a checkout that does not reveal host paths to a sandbox
	// it is bound into: StrategyBind is ruled out (a bind of the source shows
	// the source's path in the sandbox's /proc/self/mountinfo), and when the
	// base is a tmpfs and this process may mount (root), the checkout directory
	// is a tmpfs of its own, so its bind shows "/" as its root. Otherwise the
	// checkout directory's own path within its filesystem shows (such as
	// /capfs-checkout-123 on /dev/shm): capfs's temporary name, not the source's.
	// A kept checkout (Keep) stays mounted until it is removed (by Recover,
	// which unmounts it).
	Private bool
	// Git says what to do with the .git directories of the tree (see
	// GitPolicy); the zero value, GitAuto, leaves out those whose history shows
	// paths the policy hides.
	Git GitPolicy
	// GitScanBudget bounds GitAuto's scan: the tree objects it may read in all
	// (0 means DefaultGitScanBudget). A history larger than that is left out.
	GitScanBudget int
	// GitScanCache is the directory where GitAuto and GitKeep scans keep the
	// paths of each history they read (see ScanGitHistory); "" scans every time.
	GitScanCache string
}

// Strategy names how a checkout was made.
type Strategy string

// The strategies, fastest first.
const (
	// StrategyBind: Path is the physical source directory itself, for a read-only
	// bind; nothing was copied. Chosen when Options.ReadOnly is set, Options.Host
	// is a physical directory whose root is the very directory opened (same
	// inode), and the walk through the Dir left nothing out (no path denied by the
	// policy, no special file, no escaping symlink): a bind shows the sandbox the
	// whole directory, so it is only used when the Dir would have shown all of it.
	StrategyBind Strategy = "bind"
	// StrategyHardLink: a private directory whose regular files are hard links to
	// the source's inodes. Chosen when Options.ReadOnly is set, Options.Host is
	// a physical directory (verified as for StrategyBind) on the same filesystem as
	// the checkout, but binding is ruled out. A file is linked only when it is not
	// setuid or setgid, its size and modification time match what the Dir showed,
	// and the kernel allows the link; any other file is copied. The condition that
	// makes this safe: the sandbox cannot write the linked inodes, because the
	// checkout is bound read-only (Options.ReadOnly is the caller's promise) and
	// the inodes belong to a directory the host controls. The host's own later
	// edits of those files show through the links.
	StrategyHardLink Strategy = "hardlink"
	// StrategyCopy: a private directory holding copies, read through the Dir by
	// parallel workers (Options.Workers) and hashed while copied: each file is
	// read once into a buffer that feeds both the digest and the write.
	// copy_file_range is not used: a Dir's Handle exposes no host descriptor
	// (reading through the Dir is what lets its policy decide and its audit
	// trail record each file), and the digest needs the bytes in user space.
	StrategyCopy Strategy = "copy"
)

// Tree is a checkout: a real host directory holding a Dir's subtree, with the
// Manifest of what it held at checkout. Path, Bound, BindFile, Strategy,
// Manifest, Skipped and Diff may be called concurrently; SyncBack and Close must
// not run concurrently with any other call on the same Tree.
type Tree struct {
	src      *dir.Dir
	opts     Options
	path     string
	rootFd   int // O_PATH handle of the checkout root (or of the bound directory)
	bindFile *os.File
	strategy Strategy
	created  bool // path is a directory Checkout created (and Close removes)
	manifest *Manifest
	skipped  []Skip
	readOnly []string // ReadOnlyPaths
	emptied  []string // git directories decideGit emptied
	// gitReports are decideGit's decisions (GitReports).
	gitReports []GitReport
	// rootTime is the source root's modification time, given to the
	// checkout's root (zero when not known); dirTimes are the directories
	// (root "") whose time the last scan found changed with their entries
	// the same (see syncDirTimes).
	rootTime time.Time
	dirTimes []dirTime

	mu     sync.Mutex
	closed bool
	// keepUser (Keep) and keepSync (a SyncBack left changes unapplied) make
	// Close leave the checkout directory in place (see sync.go).
	keepUser, keepSync bool
}

// srcEntry is one source path found by the walk.
type srcEntry struct {
	rel     string
	typ     fs.FileMode
	size    int64
	mode    fs.FileMode // permission bits only (special bits stripped)
	mtime   time.Time
	target  string
	de      fs.DirEntry // set by the walk until fileInfos fills in the fields above
	dropped bool        // skipped by fileInfos
	// filled by the copy
	digest string
	key    statKey
	ok     bool
}

// Checkout copies the tree of src into a new private directory (or, for a
// read-only checkout of a physical directory, binds it; see Strategy) and records
// its Manifest. Everything is read through src, so its policy decides and its
// audit trail records every read: a path the policy denies is left out and
// reported by Skipped, not an error, as are special files (FIFOs, sockets,
// devices) and symlinks that are absolute or climb above src's root. Setuid,
// setgid and sticky bits are not copied.
//
// Files are created with O_CREAT|O_EXCL|O_NOFOLLOW beneath a handle on the new
// directory, with openat2 refusing every symlink on the way, so nothing Checkout
// writes is ever followed. On failure or cancellation everything created is
// removed. Errors are *vfs.Error addressed to paths relative to src.
func Checkout(ctx context.Context, src *dir.Dir, opts Options) (*Tree, error) {
	const op = "checkout"
	if src == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "nil source Dir")
	}
	t := &Tree{src: src, opts: opts, rootFd: -1, manifest: &Manifest{
		Entries: map[string]Entry{}, stat: map[string]statKey{}, Created: time.Now(),
	}}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()

	hostFd := t.openHost(ctx)
	defer func() {
		if hostFd >= 0 && (t.strategy != StrategyBind || !ok) {
			unix.Close(hostFd)
		}
	}()

	entries, err := t.walk(ctx)
	if err != nil {
		return nil, err
	}

	// A bind shows the whole directory: only when the Dir showed all of it, the
	// checkout need not hide its path, and no .git needs scanning (a scan reads
	// the checkout's own copy; GitOmit empties it).
	if hostFd >= 0 && t.canBind(entries) {
		bound, err := t.tryBind(ctx, hostFd, entries)
		if err != nil {
			return nil, err
		}
		if bound {
			ok = true
			return t, nil
		}
	}

	if err := t.makeRoot(entries); err != nil {
		return nil, err
	}
	hostFd = t.copyStrategy(hostFd)
	if err := t.populate(ctx, entries, hostFd); err != nil {
		return nil, err
	}
	if err := t.mirror(ctx); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// openHost opens the host directory of a read-only checkout that names one
// (Options.Host; see openHost), or returns -1.
func (t *Tree) openHost(ctx context.Context) int {
	if !t.opts.ReadOnly || t.opts.Host == nil {
		return -1
	}
	return openHost(ctx, t.opts.Host)
}

// canBind reports whether a bind of the host directory would show what the
// walk found (entries): the Dir hid nothing, the checkout need not hide its
// path, and there is no .git to scan.
func (t *Tree) canBind(entries []*srcEntry) bool {
	return len(t.skipped) == 0 && !t.opts.Private && !hasGit(entries)
}

// copyStrategy sets the strategy of a checkout that is not a bind: hard links
// when the host directory (hostFd, -1 for none) is on the checkout's device,
// else copies. It returns the handle the copy uses, closing one it does not.
func (t *Tree) copyStrategy(hostFd int) int {
	if hostFd >= 0 && sameDevice(hostFd, t.rootFd) {
		t.strategy = StrategyHardLink
		return hostFd
	}
	t.strategy = StrategyCopy
	if hostFd >= 0 {
		unix.Close(hostFd)
	}
	return -1
}

// tryBind binds the host directory behind hostFd as the checkout (see bind)
// and reports whether it did. When the policy refused a file, which the bind
// would show, it forgets what it recorded, so the rest is checked out.
func (t *Tree) tryBind(ctx context.Context, hostFd int, entries []*srcEntry) (bool, error) {
	t.strategy = StrategyBind
	bound, err := t.bind(ctx, hostFd, entries)
	if err != nil || bound {
		return bound, err
	}
	t.skipped = nil
	t.manifest.Entries, t.manifest.stat = map[string]Entry{}, map[string]statKey{}
	for _, e := range entries {
		e.ok = false
	}
	return false, nil
}

// makeRoot creates the checkout's private directory (mode 0700; on a tmpfs
// of its own when Options.Private asks for one) under the base chosen for
// the entries' size, and opens it as t.rootFd.
func (t *Tree) makeRoot(entries []*srcEntry) error {
	const op = "checkout"
	var need int64
	for _, e := range entries {
		if e.typ == 0 {
			need += e.size
		}
	}
	base, err := chooseBase(t.opts.Base, need)
	if err != nil {
		return vfs.Errno(op, vfs.Root, err)
	}
	p, err := os.MkdirTemp(base, "capfs-checkout-")
	if err != nil {
		return vfs.Errno(op, vfs.Root, err)
	}
	t.path, t.created = p, true
	if err := os.Chmod(p, 0o700); err != nil {
		return vfs.Errno(op, vfs.Root, err)
	}
	if t.opts.Private {
		mountPrivate(p)
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return vfs.Errno(op, vfs.Root, err)
	}
	t.rootFd = fd
	return nil
}

// chooseBase picks the parent directory of a checkout of need bytes.
func chooseBase(base string, need int64) (string, error) {
	if base != "" {
		return base, nil
	}
	return DefaultBase(need), nil
}

// DefaultBase is the directory a checkout of need bytes is made under when
// Options.Base is "": $CAPFS_TMPDIR when set, else /dev/shm when it is a
// writable tmpfs with room for need bytes plus 10% and 64 MiB, else
// os.TempDir(). Other private trees of a run (a lazy run's copy-on-write
// layer) take the same rule, so that they live where checkouts do.
func DefaultBase(need int64) string {
	if b := os.Getenv(EnvTmpDir); b != "" {
		return b
	}
	if shmFits(need) {
		return "/dev/shm"
	}
	return os.TempDir()
}

// shmFits reports whether /dev/shm is a tmpfs this process can create
// directories in, with room for need bytes and a margin (tmpfs is memory: a
// checkout that would fill it goes to os.TempDir() instead).
func shmFits(need int64) bool {
	var sfs unix.Statfs_t
	if unix.Statfs("/dev/shm", &sfs) != nil || sfs.Type != unix.TMPFS_MAGIC ||
		unix.Access("/dev/shm", unix.W_OK|unix.X_OK) != nil {
		return false
	}
	free := int64(sfs.Bavail) * sfs.Bsize
	return need+need/10+64<<20 <= free
}

func sameDevice(a, b int) bool {
	var sa, sb unix.Stat_t
	return unix.Fstat(a, &sa) == nil && unix.Fstat(b, &sb) == nil && sa.Dev == sb.Dev
}

// openHost opens the host directory behind h as an O_PATH handle, or returns -1.
// The path comes from the backend (vfs.HostPather); it is opened without
// following any symlink and accepted only if it is the backend's root directory
// (same inode number as the backend reports for its root), so a rename racing
// with the lookup cannot substitute another directory.
func openHost(ctx context.Context, h vfs.Backend) int {
	hp, ok := h.(vfs.HostPather)
	if !ok {
		return -1
	}
	p, ok := hp.HostPath()
	if !ok || !path.IsAbs(p) {
		return -1
	}
	info, err := h.Lstat(ctx, vfs.Root)
	if err != nil || !info.Mode.IsDir() || info.ID == 0 {
		return -1
	}
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, how)
	if err == unix.ENOSYS || err == unix.EPERM {
		fd, err = unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Ino != info.ID {
		unix.Close(fd)
		return -1
	}
	again, ok := hp.HostPath()
	if !ok || again != p {
		unix.Close(fd)
		return -1
	}
	return fd
}

// skippable reports whether err is a refusal to record as a Skip rather than fail.
func skippable(err error) bool {
	switch vfs.CodeOf(err) {
	case vfs.CodePermission, vfs.CodeNotFound, vfs.CodeNotRegular, vfs.CodeOutside, vfs.CodeTooManyLinks:
		return true
	}
	return false
}

func (t *Tree) skip(rel string, err error) {
	e := Skip{Path: rel, Code: vfs.CodeOf(err)}
	var ve *vfs.Error
	if errors.As(err, &ve) {
		e.Reason = ve.Message()
		if e.Reason == "" {
			e.Reason = ve.Error()
		}
	}
	t.mu.Lock()
	t.skipped = append(t.skipped, e)
	t.mu.Unlock()
}

// readDir lists directory rel ("" for the root) of the source, recording as
// skipped (invalid_path, with the reason) each entry the listing leaves out
// because no path can name it (vfs.Unaddressable: a host name with a
// backslash), so the run's summary names it and no bind shows it.
func (t *Tree) readDir(ctx context.Context, rel string) ([]fs.DirEntry, error) {
	note := func(u vfs.Unaddressable) {
		p := u.Name
		if rel != "" {
			p = rel + "/" + u.Name
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.skipped = append(t.skipped, Skip{Path: p, Code: vfs.CodeInvalidPath, Reason: "no capfs path can name it: " + u.Reason})
	}
	dir := rel
	if dir == "" {
		dir = "."
	}
	ents, err := t.src.ReadDir(vfs.WithUnaddressable(ctx, note), dir)
	if err != nil {
		return nil, err
	}
	// A backend that lists such a name (a git tree's) rather than leave it out.
	out := ents[:0]
	for _, e := range ents {
		if why := vfs.NameProblem(e.Name()); why != "" {
			note(vfs.Unaddressable{Name: e.Name(), Reason: why})
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// walk lists the source through the Dir, depth first in lexical order (so a
// directory comes before its contents), and returns what to check out. The
// metadata of the entries the listings call regular files is fetched afterwards
// by Options.Workers goroutines (fileInfos): on a git tree a file's size is a
// read of its object's header, most of the walk's time.
func (t *Tree) walk(ctx context.Context) ([]*srcEntry, error) {
	root, err := t.readDir(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []*srcEntry
	type frame struct {
		rel  string
		ents []fs.DirEntry
	}
	stack := []frame{{"", root}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, canceled("checkout", vfs.Root, err)
		}
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var subdirs []frame
		for _, de := range f.ents {
			rel := de.Name()
			if f.rel != "" {
				rel = f.rel + "/" + rel
			}
			e, ents, err := t.walkEntry(ctx, rel, de)
			if err != nil {
				return nil, err
			}
			if e == nil {
				continue
			}
			out = append(out, e)
			if e.typ == fs.ModeDir {
				subdirs = append(subdirs, frame{rel, ents})
			}
		}
		// Push in reverse so the first subdirectory is walked next (depth first,
		// lexical order).
		for i := len(subdirs) - 1; i >= 0; i-- {
			stack = append(stack, subdirs[i])
		}
	}
	return t.fileInfos(ctx, out)
}

// walkEntry examines the listed entry de at rel and returns what to check
// out (nil: skipped) and, for a directory, its listing. A regular file's
// metadata is left for fileInfos; a symlink's target must stay in the tree;
// a special file, and what the Dir refuses, is skipped.
func (t *Tree) walkEntry(ctx context.Context, rel string, de fs.DirEntry) (*srcEntry, []fs.DirEntry, error) {
	if de.Type() == 0 {
		return &srcEntry{rel: rel, de: de}, nil, nil
	}
	info, err := de.Info()
	if err != nil {
		return nil, nil, t.skipOr(rel, err)
	}
	e := &srcEntry{rel: rel, typ: info.Mode().Type(), size: info.Size(),
		mode: info.Mode().Perm(), mtime: info.ModTime()}
	switch e.typ {
	case fs.ModeDir:
		ents, err := t.readDir(ctx, rel)
		if err != nil {
			return nil, nil, t.skipOr(rel, err)
		}
		e.size = 0
		return e, ents, nil
	case fs.ModeSymlink:
		target, err := t.src.Readlink(ctx, rel)
		if err == nil {
			_, err = vfs.SymlinkTarget(vfs.MustParse(rel), target)
		}
		if err != nil {
			return nil, nil, t.skipOr(rel, err)
		}
		e.size, e.target = 0, target
		return e, nil, nil
	case 0:
		return e, nil, nil
	}
	t.skip(rel, vfs.NewError(vfs.CodeNotRegular, "checkout", vfs.MustParse(rel),
		"special file ("+e.typ.String()+") not checked out"))
	return nil, nil, nil
}

// skipOr records err as a Skip of rel and returns nil when it is a refusal
// (see skippable); otherwise it returns err.
func (t *Tree) skipOr(rel string, err error) error {
	if !skippable(err) {
		return err
	}
	t.skip(rel, err)
	return nil
}

// fileInfos fills in the metadata of the entries the walk left for it (those
// with de set) on Options.Workers goroutines, and returns entries without the
// ones it skipped (refused by the policy, gone, or no longer regular files).
func (t *Tree) fileInfos(ctx context.Context, entries []*srcEntry) ([]*srcEntry, error) {
	var todo []*srcEntry
	for _, e := range entries {
		if e.de != nil {
			todo = append(todo, e)
		}
	}
	err := t.parallel(ctx, todo, func(_ context.Context, e *srcEntry) error {
		de := e.de
		e.de = nil
		info, err := de.Info()
		if err == nil && !info.Mode().IsRegular() {
			err = vfs.NewError(vfs.CodeNotRegular, "checkout", vfs.MustParse(e.rel), "changed during checkout")
		}
		if err != nil {
			if skippable(err) {
				t.skip(e.rel, err)
				e.dropped = true
				return nil
			}
			return err
		}
		e.size, e.mode, e.mtime = info.Size(), info.Mode().Perm(), info.ModTime()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := entries[:0]
	for _, e := range entries {
		if !e.dropped {
			out = append(out, e)
		}
	}
	return out, nil
}

// parallel calls fn for every entry on Options.Workers goroutines (at most one
// per entry), stopping at the first error.
func (t *Tree) parallel(ctx context.Context, entries []*srcEntry, fn func(ctx context.Context, e *srcEntry) error) error {
	n := t.opts.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = min(n, len(entries))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(entries)) {
					return
				}
				if err := fn(ctx, entries[i]); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return canceled("checkout", vfs.Root, err)
	}
	return nil
}

// progress runs the throttled Progress callback until stop is closed.
type progress struct {
	files, bytes atomic.Int64
	total        Progress
	stop, done   chan struct{}
}

func (t *Tree) startProgress(entries []*srcEntry) *progress {
	pr := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	for _, e := range entries {
		if e.typ == 0 {
			pr.total.TotalFiles++
			pr.total.TotalBytes += e.size
		}
	}
	if t.opts.Progress == nil {
		close(pr.done)
		return pr
	}
	every := t.opts.ProgressInterval
	if every <= 0 {
		every = DefaultProgressInterval
	}
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t.opts.Progress(pr.snapshot(false))
			case <-pr.stop:
				t.opts.Progress(pr.snapshot(true))
				return
			}
		}
	}()
	return pr
}

func (pr *progress) snapshot(done bool) Progress {
	p := pr.total
	p.Files, p.Bytes, p.Done = int(pr.files.Load()), pr.bytes.Load(), done
	return p
}

func (pr *progress) finish() {
	close(pr.stop)
	<-pr.done
}

// runWorkers calls fn for every regular file of entries on Options.Workers
// goroutines, stopping at the first error.
func (t *Tree) runWorkers(ctx context.Context, entries []*srcEntry, pr *progress, fn func(ctx context.Context, e *srcEntry, buf []byte) error) error {
	n := t.opts.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *srcEntry)
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for e := range jobs {
				if ctx.Err() != nil {
					continue
				}
				if err := fn(ctx, e, *bp); err != nil {
					once.Do(func() { first = err; cancel() })
					continue
				}
				pr.files.Add(1)
			}
		}()
	}
	for _, e := range entries {
		if e.typ != 0 {
			continue
		}
		select {
		case jobs <- e:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return canceled("checkout", vfs.Root, err)
	}
	return nil
}

// canceled is the error of a call stopped by its context.
func canceled(op string, p vfs.Path, err error) error {
	return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
}

// populate creates the checkout's directories, copies (or links) its files on
// the worker pool, recreates its symlinks, then sets directory modes and records
// the manifest.
func (t *Tree) populate(ctx context.Context, entries []*srcEntry, hostFd int) error {
	const op = "checkout"
	for _, e := range entries {
		if e.typ != fs.ModeDir {
			continue
		}
		if err := mkdirBeneath(t.rootFd, e.rel, 0o700); err != nil {
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
		if err := symlinkBeneath(t.rootFd, e.target, e.rel); err != nil {
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
		fd, err := openBeneath(t.rootFd, e.rel, unix.O_PATH|unix.O_DIRECTORY, 0)
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
	fd, err := openatRetry(root, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
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
	fd, err := openBeneath(t.rootFd, e.rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(e.mode))
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
	hfd, err := openBeneath(hostFd, e.rel, unix.O_PATH, 0)
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
	pfd, name, err := parentOf(t.rootFd, e.rel)
	if err != nil {
		return false, err
	}
	defer unix.Close(pfd)
	if err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(hfd), pfd, name, unix.AT_SYMLINK_FOLLOW); err != nil {
		return false, nil // EXDEV, EPERM (protected_hardlinks), ...: copy it
	}
	// The manifest describes the very inode linked.
	f, lst, err := openRegularAt(pfd, name, &st)
	if err != nil {
		return false, err
	}
	defer f.Close()
	d, n, err := hashFile(f)
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
	if err := walkHost(hostFd, 0, func(e *hostEntry) error {
		if !shown[e.rel] {
			return errHidden
		}
		if e.st.Mode&unix.S_IFMT == unix.S_IFREG {
			keys[e.rel] = keyOf(&e.st)
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
			if skippable(err) {
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

// Path returns the host path the sandbox should bind: the checkout root, or the
// physical source directory itself when Bound.
func (t *Tree) Path() string { return t.path }

// Bound reports whether Path is the physical source directory (StrategyBind),
// which must be bound read-only, rather than a directory Checkout made.
func (t *Tree) Bound() bool { return t.strategy == StrategyBind }

// BindFile returns, when Bound, an O_PATH handle on the directory (verified to be
// the backend's root), for the sandbox to bind as /proc/self/fd/N so that no
// host path is resolved again; nil otherwise. It stays owned by the Tree: Close
// closes it.
func (t *Tree) BindFile() *os.File {
	if t.strategy != StrategyBind {
		return nil
	}
	return t.bindFile
}

// Strategy returns how the checkout was made.
func (t *Tree) Strategy() Strategy { return t.strategy }

// Manifest returns what Checkout recorded, updated by each SyncBack with what it
// applied. It must not be modified, nor read while SyncBack runs.
func (t *Tree) Manifest() *Manifest { return t.manifest }

// Skipped returns the source paths Checkout left out, sorted: paths the Dir's
// policy denied (fs_permission_denied), special files (not_regular_file),
// symlinks that are absolute or climb above the source's root
// (path_outside_sandbox), entries that vanished during the walk (not_found),
// and host names no capfs path can name (invalid_path: a backslash), whose
// Path is then no valid vfs.Path.
func (t *Tree) Skipped() []Skip {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Skip(nil), t.skipped...)
}

// Close removes everything Checkout created: the checkout directory and all it
// holds, whatever the sandbox left there (directories without permissions
// included; symlinks are removed, never followed), unless the checkout is kept
// (Kept: Keep was called, or the last SyncBack left changes unapplied), when
// only its handle is closed. A bound physical directory is never touched: only
// the handle is closed. Close is idempotent.
func (t *Tree) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.bindFile != nil {
		t.bindFile.Close()
		t.rootFd = -1
	}
	if t.rootFd >= 0 {
		unix.Close(t.rootFd)
		t.rootFd = -1
	}
	if t.created && !t.keepUser && !t.keepSync {
		// removeTree unmounts a private checkout's tmpfs first.
		if err := removeTree(t.path); err != nil {
			return vfs.Errno("close", vfs.Root, err)
		}
	}
	return nil
}

func (t *Tree) live(op string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return vfs.NewError(vfs.CodeClosed, op, vfs.Root, "checkout closed")
	}
	return nil
}
