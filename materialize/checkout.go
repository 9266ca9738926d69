//go:build linux

package materialize

import (
	"context"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/hostfs"
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
	// the physical directory itself, and hard links. A sync-back of a read-only
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
	// A kept checkout (Keep) stays mounted until it is removed (by syncback.Recover,
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
	// policy, no special file, no hidden symlink target): a bind shows the sandbox the
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
// Manifest, Skipped and Diff may be called concurrently; a sync-back
// (syncback.Run) and Close must not run concurrently with any other call on
// the same Tree.
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
	// keepUser (Keep) and keepSync (a sync-back left changes unapplied) make
	// Close leave the checkout directory in place (see syncstate.go).
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
// devices) and symlinks whose target src does not show (the physical backend
// hides an absolute one's host path). A symlink's target is data: one that is
// absolute or climbs above src's root is written as it is, and only the
// sandbox, in its own namespace, resolves it. Setuid, setgid and sticky bits
// are not copied.
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
		hostfs.MountPrivate(p)
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

// canceled is the error of a call stopped by its context.
func canceled(op string, p vfs.Path, err error) error {
	return &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
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

// Manifest returns what Checkout recorded, updated by each sync-back with what it
// applied. It must not be modified, nor read while a sync-back runs.
func (t *Tree) Manifest() *Manifest { return t.manifest }

// Skipped returns the source paths Checkout left out, sorted: paths the Dir's
// policy denied (fs_permission_denied), special files (not_regular_file),
// symlinks whose target the source does not show (path_outside_sandbox: an
// absolute one on the physical backend), entries that vanished during the walk (not_found),
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
// (Kept: Keep was called, or the last sync-back left changes unapplied), when
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
		// hostfs.RemoveTree unmounts a private checkout's tmpfs first.
		if err := hostfs.RemoveTree(t.path); err != nil {
			return vfs.Errno("close", vfs.Root, err)
		}
	}
	return nil
}

// Live returns a closed error (code closed, for op) once Close was called,
// else nil.
func (t *Tree) Live(op string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return vfs.NewError(vfs.CodeClosed, op, vfs.Root, "checkout closed")
	}
	return nil
}
