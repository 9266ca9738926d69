//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// DefaultUID and DefaultGID are the ids a bubblewrap-sandboxed command runs as
// inside its user namespace.
const (
	DefaultUID = 1000
	DefaultGID = 1000
)

// BubblewrapOptions configures the bubblewrap sandbox. The zero value is ready.
type BubblewrapOptions struct {
	// Path is the bwrap binary; "" looks "bwrap" up in the caller's PATH.
	Path string
	// UID and GID are the ids inside the sandbox; 0 means DefaultUID/DefaultGID
	// (root inside is never offered).
	UID, GID int
	// GoRoot, if set, is a host Go toolchain (see DetectGoRoot) to make usable
	// inside: bound read-only at GoRootTarget (one under /usr stays where it
	// is, bound already), its bin directory first in PATH, and
	// GOTOOLCHAIN=local so that go never tries to download another toolchain
	// (there is no network). It may be the toolchain as another mount shows
	// it (capfs run's FUSE mount of its own, so that the bind's source, which
	// /proc/self/mountinfo shows, is no host path of the user's).
	GoRoot string
	// GoModCache, if set, is a host Go module cache (see DetectGoModCache) bound
	// read-only at GoModCacheTarget (one under /usr stays where it is), with
	// GOMODCACHE pointing there and GOPROXY=off, so that `go build` works
	// inside on modules whose dependencies the host has downloaded (and fails
	// at once, not after a network timeout, on the others). Like GoRoot it may
	// be seen through another mount. The build cache is not shared: the
	// sandbox could poison it for the host.
	GoModCache string
	// TmpSize caps the sandbox's /tmp (a tmpfs in memory; HOME and the Go build
	// cache live there) at this many bytes: a write past it fails with ENOSPC.
	// 0 means DefaultTmpSize; a negative value leaves the kernel's default (half
	// of RAM).
	TmpSize int64
	// MaxProcs bounds the processes and threads inside the sandbox: a fork past
	// it fails with EAGAIN. 0 means DefaultMaxProcs (or 128 per CPU, when
	// more); negative, no limit.
	MaxProcs int
	// MaxMemory bounds the sandbox's memory in bytes: under a cgroup, a sandbox
	// going past it has a process killed by the kernel's OOM killer; under
	// rlimits, an allocation past it fails. 0 means DefaultMemoryLimit (half
	// of the host's RAM); negative, no limit.
	MaxMemory int64
	// NoExecCheck runs the command directly as bwrap's child. By default it is
	// started through /bin/sh (which execs it: no extra process stays), to
	// exit 127 when the command is not found and 126 when it cannot be
	// executed, as shells do (bwrap itself exits 1 for both).
	NoExecCheck bool
	// Caches are host directories bound read-write into every run, for build
	// tools' caches to persist between runs (see CacheDir).
	Caches []CacheDir
	// ShowPrivateEtc binds /etc as it is. By default the entries of /etc that an
	// ordinary user could not read are hidden (see the package documentation).
	ShowPrivateEtc bool
	// ShareNet gives the sandbox the host's network (bwrap --share-net), for a
	// command trusted with it. By default the sandbox has a loopback interface
	// and nothing else (see package egress for a door to chosen hosts).
	ShareNet bool
}

// BubblewrapWrapper is the bubblewrap Sandbox. Use Bubblewrap to make one; it is
// safe for concurrent use.
type BubblewrapWrapper struct {
	opts BubblewrapOptions

	mu     sync.Mutex
	bin    string // resolved binary, once found
	probed bool   // a probe succeeded
}

// Bubblewrap returns the bubblewrap sandbox wrapper. Its Name is "bubblewrap".
func Bubblewrap(opts BubblewrapOptions) *BubblewrapWrapper {
	if opts.UID == 0 {
		opts.UID = DefaultUID
	}
	if opts.GID == 0 {
		opts.GID = DefaultGID
	}
	if opts.GoRoot != "" {
		opts.GoRoot = filepath.Clean(opts.GoRoot)
	}
	if opts.GoModCache != "" {
		opts.GoModCache = filepath.Clean(opts.GoModCache)
	}
	return &BubblewrapWrapper{opts: opts}
}

// Name returns "bubblewrap".
func (b *BubblewrapWrapper) Name() string { return "bubblewrap" }

// binary returns the bwrap binary's path.
func (b *BubblewrapWrapper) binary() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bin != "" {
		return b.bin, nil
	}
	name := b.opts.Path
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", unavailable("bubblewrap (bwrap) is not installed or not executable")
	}
	if !filepath.IsAbs(p) {
		if p, err = filepath.Abs(p); err != nil {
			return "", unavailable("bubblewrap path: " + err.Error())
		}
	}
	b.bin = p
	return p, nil
}

// systemTargets are the paths of the new root the wrapper itself mounts; grants may
// neither sit on nor above nor below them.
var systemTargets = []string{"/usr", "/etc", "/proc", "/dev", "/tmp", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// hostLinkDirs are the top-level names re-created as the host has them.
var hostLinkDirs = []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// Wrap returns a launch of bwrap running l inside the sandbox. It refuses (code
// invalid_path) a mount target that is not absolute and clean, that is "/", that
// is, contains or lies under a system bind (/usr, /etc, /proc, /dev, /tmp, /bin,
// /sbin, /lib, /lib64, /lib32, /libx32, GoRootTarget and GoModCacheTarget when
// bound, the caches), or that nests with or repeats another mount's target. The
// launch it returns has no Mounts (they are inside) and Dir "/" (bwrap's own,
// on the host); its ExtraFiles are l's followed by the descriptors of l's
// Mounts and the one bwrap reads its options from (--args): its argument list,
// which the sandbox sees as /proc/1/cmdline, holds only the command, no host
// path. A bwrap outside /usr, /bin and /sbin (under the user's home, say) runs
// from a sealed copy in memory, named "bwrap" (see launchAs), so that its path
// shows neither there nor in /proc/1/exe and /proc/1/maps.
func (b *BubblewrapWrapper) Wrap(ctx context.Context, l *Launch) (*Launch, error) {
	if err := validateLaunch(l); err != nil {
		return nil, err
	}
	bin, err := b.binary()
	if err != nil {
		return nil, err
	}
	gb := b.opts.goBinds()
	if err := b.checkTargets(l.Mounts, gb); err != nil {
		return nil, err
	}
	lim := b.opts.limits()
	a, cacheEnv := b.systemArgs(l, gb, lim)
	extra := append([]*os.File(nil), l.ExtraFiles...)
	a, extra = mountArgs(a, extra, l.Mounts)
	a = append(a, "--chdir", workDir(l))
	// The sandbox's own account in /etc/passwd and /etc/group (passwd.go).
	accounts := &accountFiles{}
	if !b.opts.ShowPrivateEtc {
		if accounts, err = sandboxAccounts(b.opts.UID, b.opts.GID); err != nil {
			return nil, &vfs.Error{Code: vfs.CodeIO, Op: "run", Err: err}
		}
		a, extra = accounts.bind(a, extra)
	}

	base := mergeEnv(gb.env(MinimalEnv()), cacheEnv)
	for _, e := range mergeEnv(base, l.Env) {
		k, v, _ := strings.Cut(e, "=")
		a = append(a, "--setenv", k, v)
	}
	// The options name host directories: they reach bwrap through a
	// descriptor (--args), not its argument list, which the sandbox reads as
	// /proc/1/cmdline. Only the command stays there.
	argsFile, err := argsFD(a)
	if err != nil {
		accounts.Close()
		return nil, &vfs.Error{Code: vfs.CodeIO, Op: "run", Err: err}
	}
	extra = append(extra, argsFile)
	a = []string{"--args", strconv.Itoa(2 + len(extra)), "--"}
	if _, err := os.Stat("/bin/sh"); err == nil && !b.opts.NoExecCheck {
		a = append(a, "/bin/sh", "-c", ExecCheck, "capfs")
	}
	a = append(a, l.Path)
	a = append(a, l.Args...)
	return launchBwrap(l, bin, lim, a, extra, func() {
		argsFile.Close()
		accounts.Close()
	})
}

// checkTargets refuses a cache or mount target that collides with the
// sandbox's own binds (gb's among them), and a cache target that is not
// absolute and clean below / (or whose source is not absolute), or mounts
// that nest with or repeat each other.
func (b *BubblewrapWrapper) checkTargets(mounts []Mount, gb goBinds) error {
	reserved := append(append([]string(nil), systemTargets...), gb.targets()...)
	for _, c := range b.opts.Caches {
		if !cleanAbs(c.Target) || c.Target == "/" || !filepath.IsAbs(c.Source) {
			return mountError(c.Target, "of a cache is not an absolute clean path below / (or its source is not absolute)")
		}
		if s, ok := collides(c.Target, reserved); ok {
			return mountError(c.Target, "of a cache collides with the sandbox's own "+s)
		}
	}
	if len(b.opts.Caches) > 0 {
		reserved = append(append([]string(nil), reserved...), cacheTargets(b.opts.Caches)...)
	}
	for i, m := range mounts {
		if s, ok := collides(m.Target, reserved); ok {
			return mountError(m.Target, "collides with the sandbox's own "+s)
		}
		for _, o := range mounts[:i] {
			if within(m.Target, o.Target) || within(o.Target, m.Target) {
				return mountError(m.Target, "nests with or repeats the mount at "+o.Target)
			}
		}
	}
	return nil
}

// collides returns the first of targets that t lies within or that lies
// within t.
func collides(t string, targets []string) (string, bool) {
	for _, s := range targets {
		if within(t, s) || within(s, t) {
			return s, true
		}
	}
	return "", false
}

// systemArgs returns bwrap's options for the sandbox itself, before the
// Launch's mounts: namespaces, identity, the system binds, /proc, /dev, /tmp,
// the Go toolchain's binds and the caches, with the environment the caches
// add.
func (b *BubblewrapWrapper) systemArgs(l *Launch, gb goBinds, lim Limits) (a, cacheEnv []string) {
	a = []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--uid", strconv.Itoa(b.opts.UID), "--gid", strconv.Itoa(b.opts.GID),
		"--hostname", "capfs",
		"--die-with-parent",
	}
	if b.opts.ShareNet {
		a = append(a, "--share-net")
	}
	if l.Terminal == nil {
		// No terminal of its own: a new session keeps it from the caller's
		// (TIOCSTI).
		a = append(a, "--new-session")
	}
	a = append(a, "--clearenv", "--ro-bind", "/usr", "/usr")
	a = append(a, hostLinkArgs()...)
	a = append(a, "--ro-bind", "/etc", "/etc")
	if !b.opts.ShowPrivateEtc {
		a = append(a, etcMasks("/etc")...)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if lim.TmpSize > 0 {
		a = append(a, "--size", strconv.FormatInt(lim.TmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	a = append(a, gb.args()...)
	for _, c := range b.opts.Caches {
		a = append(a, "--bind", c.Source, c.Target)
		cacheEnv = append(cacheEnv, c.Env...)
	}
	return a, cacheEnv
}

// hostLinkArgs re-creates hostLinkDirs as the host has them: a symlink as a
// symlink, a directory bound read-only.
func hostLinkArgs() []string {
	var a []string
	for _, d := range hostLinkDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(d)
			if err != nil {
				continue
			}
			a = append(a, "--symlink", t, d)
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	return a
}

// mountArgs appends the binds of mounts to a, passing a mount given as a
// file as a descriptor (appended to extra), then binds each write-protected
// entry of a mount over itself (after the mount, so on top of it; parents
// before children).
func mountArgs(a []string, extra []*os.File, mounts []Mount) ([]string, []*os.File) {
	for _, m := range mounts {
		src := m.Source
		switch {
		case m.File != nil:
			extra = append(extra, m.File)
			fd := strconv.Itoa(2 + len(extra))
			src = "/proc/self/fd/" + fd
			if m.Writable {
				a = append(a, "--bind-fd", fd, m.Target)
			} else {
				a = append(a, "--ro-bind-fd", fd, m.Target)
			}
		case m.Writable:
			a = append(a, "--bind", m.Source, m.Target)
		default:
			a = append(a, "--ro-bind", m.Source, m.Target)
		}
		for _, p := range m.ReadOnly {
			a = append(a, "--ro-bind", src+"/"+p, m.Target+"/"+p)
		}
	}
	return a, extra
}

// workDir is where the command starts in the sandbox: l.Dir, else the first
// writable mount, else /.
func workDir(l *Launch) string {
	if l.Dir != "" {
		return l.Dir
	}
	for _, m := range l.Mounts {
		if m.Writable {
			return m.Target
		}
	}
	return "/"
}

// launchBwrap is the Launch of bwrap (bin) with arguments a and files extra,
// under the limits lim, for l. A bwrap under the user's home would name it
// in the sandbox's /proc/1/cmdline, exe and maps: it runs from a copy in
// memory. closeOwn closes the files Wrap made; it is the launch's first
// cleanup.
func launchBwrap(l *Launch, bin string, lim Limits, a []string, extra []*os.File, closeOwn func()) (*Launch, error) {
	bwrapProg, argv0, extra, image := launchAs(bin, extra)
	closeFiles := func() {
		closeOwn()
		if image != nil {
			image.Close()
		}
	}
	prog, argv, _, cleanup, err := applyLimits(lim, bwrapProg, a)
	if err != nil {
		closeFiles()
		return nil, &vfs.Error{Code: vfs.CodeNotSupported, Op: "run", Err: err}
	}
	if prog != bwrapProg {
		argv0 = "" // the launcher (applyLimits) is started as itself
	}
	cleanups := []func(){closeFiles}
	if cleanup != nil {
		cleanups = append(cleanups, cleanup)
	}
	return &Launch{
		Path:       prog,
		Argv0:      argv0,
		Args:       argv,
		Cleanup:    cleanups,
		Dir:        "/",
		Subject:    l.Subject,
		Stdin:      l.Stdin,
		Stdout:     l.Stdout,
		Stderr:     l.Stderr,
		Terminal:   l.Terminal,
		Signals:    l.Signals,
		ExtraFiles: extra,
		Wrappers:   l.Wrappers,
	}, nil
}

// argsFD returns a file, at offset 0, holding args NUL-terminated, for
// bwrap's --args: an anonymous memory file (memfd), sealed against change, or
// where there is none an unlinked temporary file. The caller closes it.
func argsFD(args []string) (*os.File, error) {
	var buf bytes.Buffer
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errors.New("a sandbox argument holds a NUL byte")
		}
		buf.WriteString(a)
		buf.WriteByte(0)
	}
	return SealedFile("capfs-bwrap-args", &buf, false)
}

// SealedFile returns a file, at offset 0, holding what src reads: an anonymous
// memory file (memfd), sealed against change, or where there is none an
// unlinked temporary file. With exec the memory file may be executed (as
// /proc/self/fd/N), on kernels that ask (MFD_EXEC). The caller closes it.
func SealedFile(name string, src io.Reader, exec bool) (*os.File, error) {
	var f *os.File
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|execFlag(exec))
	if errors.Is(err, unix.EINVAL) && exec {
		// A kernel before 6.3 knows no MFD_EXEC; its memory files are executable.
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err == nil {
		f = os.NewFile(uintptr(fd), name)
	} else {
		t, err := os.CreateTemp("", name+"-")
		if err != nil {
			return nil, err
		}
		_ = os.Remove(t.Name())
		f = t
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	_, _ = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	return f, nil
}

// execFlag is MFD_EXEC when exec is set.
func execFlag(exec bool) int {
	if exec {
		return unix.MFD_EXEC
	}
	return 0
}

// CacheDir is a host directory bound read-write into every run at Target, with
// Env added to the environment (before the Launch's own, which wins), such as
// GOCACHE=Target for Go's build cache. What the command writes there persists
// on the host: give a directory of the caller's own (0700), holding nothing the
// command may not see, and never the host's own cache, which the command could
// poison. Target must be absolute and clean and may not collide with the
// sandbox's system binds or the Launch's mounts.
type CacheDir struct {
	Source string
	Target string
	Env    []string
}

func cacheTargets(cs []CacheDir) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Target
	}
	return out
}

// ExecCheck is the script run inside the sandbox (by /bin/sh, which then execs
// the command in its place: no process stays behind) that finds the command
// first and exits as shells do when it cannot be run: 127 when it is not found,
// 126 when it is found but cannot be executed (a directory, no execute
// permission), with a line on stderr saying which. Without it, bwrap exits 1
// for both, which a command's own status 1 could not be told from.
const ExecCheck = `c=$1 m= s=
case $c in
*/*) if [ -d "$c" ]; then m="is a directory"; s=126
     elif [ ! -e "$c" ] && [ ! -L "$c" ]; then m="no such file"; s=127
     elif [ ! -x "$c" ]; then m="permission denied (not executable)"; s=126; fi;;
*) command -v -- "$c" >/dev/null 2>&1 || { m="command not found"; s=127; };;
esac
if [ -n "$m" ]; then printf 'capfs: run: %s: %s\n' "$c" "$m" >&2; exit "$s"; fi
exec "$@"`

// Limits reports the limits a run gets from this wrapper on this host, and how
// they are enforced: a cgroup of its own per run (v2 beside the caller's cgroup
// when the pids and memory controllers are enabled there and the caller may
// create cgroups in its parent; else v1 when the caller may create cgroups in
// the pids and memory hierarchies, as root usually may), else
// rlimits (RLIMIT_NPROC, which does not bind a sandbox whose uid maps to root on
// the host; RLIMIT_DATA, per process). /tmp is a tmpfs of TmpSize either way.
func (b *BubblewrapWrapper) Limits() Limits {
	l := b.opts.limits()
	switch {
	case l.MaxProcs <= 0 && l.MaxMemory <= 0:
		l.Mechanism = "none"
	case planCgroup(l) != nil:
		l.Mechanism = "cgroup v" + strconv.Itoa(planCgroup(l).version)
	default:
		l.Mechanism, l.Note = "rlimit", rlimitNote(l)
	}
	return l
}

func mountError(target, why string) error {
	return &vfs.Error{Code: vfs.CodeInvalidPath, Op: "run", Path: target, Err: errors.New("mount target " + why)}
}

// etcMasks returns the bwrap arguments hiding the entries under root that "other"
// may not read: files are covered with /dev/null bound without device access (so
// they cannot be opened), directories (also those "other" may not search) with an
// empty read-only tmpfs. Symbolic links are left alone: they point at entries that
// are masked or bound on their own terms.
func etcMasks(root string) []string {
	var a []string
	var walk func(fd int, d string, depth int)
	walk = func(fd int, d string, depth int) {
		if depth > 32 {
			return
		}
		f := os.NewFile(uintptr(fd), d)
		defer f.Close()
		ents, err := f.ReadDir(-1)
		if err != nil {
			return
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			if e.Type()&fs.ModeSymlink != 0 {
				continue
			}
			// The entry's own status, relative to the directory's handle (no
			// path walk, no symlink followed).
			var st unix.Stat_t
			if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			p := filepath.Join(d, e.Name())
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
			case unix.S_IFDIR:
				if st.Mode&0o005 != 0o005 {
					a = append(a, "--tmpfs", p, "--remount-ro", p)
					continue
				}
				cfd, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				walk(cfd, p, depth+1)
			default:
				if st.Mode&0o004 == 0 {
					a = append(a, "--ro-bind", "/dev/null", p)
				}
			}
		}
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	walk(fd, root, 0)
	return a
}
