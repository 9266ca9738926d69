//go:build linux

package fuseexport

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// Options configure a mount. The zero value is usable.
type Options struct {
	// Mounts lists the paths, relative to the exported Dir, where a backend with
	// an identity space of its own begins. These are the mount points of a
	// [vfs.Namespace] beneath the Dir's root, plus "." for the mount serving the
	// root. Inode numbers of entries under different mounts are kept apart. So
	// two backends numbering their files alike never make two files one inode.
	// Nil means the whole Dir is one identity space.
	Mounts []vfs.Path

	// EntryTimeout, AttrTimeout and NegativeTimeout are how long the kernel may
	// trust a name, an inode's attributes and an absence without asking again.
	// Zero means the default (one second each); a negative value means no
	// caching. Changes made through the mount are seen at once whatever the
	// timeouts. Changes made through another route are seen after the timeout,
	// or at once when the host calls [Server.Invalidate].
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration

	// UID and GID own every entry whose backend keeps no owner (entries of
	// the physical backend report their own). Zero means the mounting
	// process's own ids, unless OwnerRoot is set.
	UID, GID  uint32
	OwnerRoot bool

	// AllowOther lets users other than the mounting one use the mount (a
	// sandboxed process running under another uid). It needs root, or
	// user_allow_other in /etc/fuse.conf.
	AllowOther bool

	// Name is the file system name shown in /proc/mounts ("capfs" if empty).
	Name string

	// Debug logs every FUSE request to stderr.
	Debug bool

	// Passthrough lets the kernel read and write directly the files a backend
	// opened on the host with nothing to check per call: a physical mount's
	// files (with no size limit), an Overlay's upper files, and a read-only
	// mount's files whose descriptor is read-only (see package hostfd: a
	// wrapper whose checks a descriptor would bypass, a quota's writable
	// file, withholds it).
	// Reads and writes of those files then cost no request to the server. This
	// is FUSE passthrough, Linux 6.9 and later. The server needs CAP_SYS_ADMIN;
	// without it the option does nothing. The open is still one Dir call,
	// decided and audited.
	//
	// What it gives up: a file already open is no longer stopped by revoking or
	// write-locking the Dir (a checkout's files are not either). So set it only
	// on a Dir nobody revokes while it is mounted, as capfs run's own layer. An
	// open that would put one inode in two I/O modes, which the kernel refuses,
	// fails with ESTALE.
	Passthrough bool

	// ReadDirPlus answers a directory listing with each entry's attributes
	// (READDIRPLUS, with the kernel's own choice of when: READDIRPLUS_AUTO).
	// So a process that lists a directory and then opens or stats its entries
	// (a build tool walking its sources) sends no lookup per entry. Each listed
	// entry is looked up through the Dir as a LOOKUP would be. So a listing of
	// a large directory costs that many Dir calls.
	ReadDirPlus bool

	// Unaddressable, if set, is told of each entry a listing leaves out
	// because no capfs path can name it ([vfs.Unaddressable]: a host name
	// containing a backslash). It is told once per directory and name for the
	// mount's life. The mount cannot show a name it cannot look up, so the host
	// says so (capfs mount writes it on stderr). dir is the directory, relative
	// to the exported Dir. It is called from request goroutines, one at a time,
	// and must not block.
	Unaddressable func(dir vfs.Path, u vfs.Unaddressable)
}

// Server is a Dir mounted on a host directory. It is safe for concurrent use.
type Server struct {
	d          *dir.Dir
	b          vfs.Backend
	opts       Options
	mounts     []vfs.Path // sorted deepest first
	root       *node
	fuse       *fuse.Server
	mountpoint string
	uid, gid   uint32
	privileged bool // the server runs as root: new entries are given to their creator
	namesPart  bool // the backend's hard-link names part on writing (see [Server.identity])
	gens       atomic.Uint64

	// tree orders path derivation against renames: requests that derive a
	// path from go-fuse's tree hold it shared for their Dir call, Rename holds
	// it alone until the tree shows the move (see node.Rename).
	tree sync.RWMutex

	inval     chan invalidation
	closeOnce sync.Once
	done      chan struct{} // closed when the serve loop has ended
	unmountMu sync.Mutex
	unmounted bool
	conn      string // the connection's name under /sys/fs/fuse/connections

	skipMu  sync.Mutex
	skipped map[string]bool // directory and name of entries told to Options.Unaddressable

	opens openTable // every open handle, by node (fchmod of a file with no name left)
	tmps  tmpSet    // unnamed files not yet linked or closed (see node.Tmpfile)

	ptMu sync.Mutex // guards every node's ioState, and pendingRel
	// pendingRel holds the handles of RELEASE requests under way, by the
	// request's cancel channel (see Server.releasing).
	pendingRel map[<-chan struct{}]*handle
	ptOnce     sync.Once    // the passthrough probe
	ptOn       atomic.Bool  // the kernel takes this mount's backing files
	served     atomic.Int64 // reads and writes of counted handles the server served (tests)
	lookups    atomic.Int64 // LOOKUP requests from the kernel (tests)
	// changes counts the requests that may have changed an entry, and the
	// host's invalidations (see dirhandle.go).
	changes atomic.Uint64
	listed  atomic.Int64 // READDIRPLUS entries answered from a listing (tests)
}

type invalidation struct {
	p    vfs.Path
	done chan struct{}
}

// ErrStaleMount reports a mount point that is the remains of a FUSE server that
// died without unmounting ("transport endpoint is not connected"). [Mount] and
// [CheckStale] return it. [ClearStale] removes such a mount.
var ErrStaleMount = errors.New("stale FUSE mount (its server exited without unmounting)")

// CheckStale reports whether mountpoint is a dead FUSE mount.
// It returns nil for a usable directory (or a live mount), and [ErrStaleMount]
// if a crashed server left it.
func CheckStale(mountpoint string) error {
	// statfs always reaches the server (a stat can be answered from the
	// kernel's attribute cache of a dead mount).
	var st syscall.Statfs_t
	err := syscall.Statfs(mountpoint, &st)
	if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) {
		return ErrStaleMount
	}
	return nil
}

// ClearStale detaches a dead FUSE mount left at mountpoint (as `fusermount3 -u
// -z` would). It does nothing when the mount point is not stale.
func ClearStale(mountpoint string) error {
	if CheckStale(mountpoint) == nil {
		return nil
	}
	return detach(mountpoint)
}

func detach(mountpoint string) error {
	err := syscall.Unmount(mountpoint, syscall.MNT_DETACH)
	if err == nil || errors.Is(err, syscall.EINVAL) {
		return nil // EINVAL: no longer a mount point
	}
	if bin, lerr := exec.LookPath("fusermount3"); lerr == nil {
		if out, cerr := exec.Command(bin, "-u", "-z", mountpoint).CombinedOutput(); cerr != nil {
			return fmt.Errorf("fuseexport: unmount %s: %v: %s", mountpoint, cerr, out)
		}
		return nil
	}
	return fmt.Errorf("fuseexport: unmount %s: %w", mountpoint, err)
}

// Available reports whether this process can mount a FUSE file system.
// /dev/fuse must exist and open, and either the process is root or fusermount3
// is installed. The error says what is missing.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("fuseexport: /dev/fuse: %w", err)
	}
	f.Close()
	if os.Geteuid() == 0 {
		return nil
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err2 := exec.LookPath("fusermount"); err2 != nil {
			return fmt.Errorf("fuseexport: fusermount3 not installed (apt-get install fuse3)")
		}
	}
	return nil
}

// Mount serves d on the host directory mountpoint and returns once the kernel
// has the mount. Every request the kernel sends becomes a call on d (through
// its Backend view), with d's policy, hooks and audit. A mount point left by a
// crashed server is [ErrStaleMount]; clear it with [ClearStale] first.
func Mount(mountpoint string, d *dir.Dir, opts Options) (*Server, error) {
	if err := CheckStale(mountpoint); err != nil {
		return nil, fmt.Errorf("fuseexport: %s: %w", mountpoint, err)
	}
	s := &Server{
		d:          d,
		b:          d.Backend(),
		opts:       opts,
		mountpoint: mountpoint,
		inval:      make(chan invalidation, 1024),
		done:       make(chan struct{}),
	}
	s.uid, s.gid = uint32(os.Getuid()), uint32(os.Getgid())
	s.privileged = os.Geteuid() == 0
	s.namesPart = s.b.Features().LinkWritesPrivate
	if opts.OwnerRoot {
		s.uid, s.gid = 0, 0
	}
	if opts.UID != 0 {
		s.uid = opts.UID
	}
	if opts.GID != 0 {
		s.gid = opts.GID
	}
	s.mounts = append([]vfs.Path(nil), opts.Mounts...)
	sort.SliceStable(s.mounts, func(i, j int) bool { return s.mounts[i].Depth() > s.mounts[j].Depth() })

	ctx := context.Background()
	info, err := s.b.Stat(ctx, vfs.Path{})
	if err != nil {
		return nil, fmt.Errorf("fuseexport: the exported Dir: %w", err)
	}
	if !info.Mode.IsDir() {
		return nil, fmt.Errorf("fuseexport: the exported Dir's root is not a directory")
	}
	s.root = &node{s: s}
	rootIno := s.ino(vfs.Path{}, info)

	timeout := func(d time.Duration) *time.Duration {
		d = cacheTime(d)
		return &d
	}
	readOnly := d.IsReadOnly()
	mo := fuse.MountOptions{
		FsName:             nonEmpty(opts.Name, "capfs"),
		Name:               "capfs",
		AllowOther:         opts.AllowOther,
		Debug:              opts.Debug,
		DisableXAttrs:      true,
		DisableReadDirPlus: !opts.ReadDirPlus,
		DirectMount:        os.Geteuid() == 0,
		MaxWrite:           1 << 20,
		ExtraCapabilities:  fuse.CAP_DIRECT_IO_ALLOW_MMAP,
		// The kernel checks permission bits against the attributes we answer
		// (uid, gid, mode), so a mode 0000 file is closed to everyone but root.
		Options: []string{"default_permissions", "nosuid", "nodev"},
	}
	if opts.ReadDirPlus {
		mo.ExtraCapabilities |= fuse.CAP_READDIRPLUS_AUTO
	}
	if readOnly {
		mo.Options = append(mo.Options, "ro")
	}
	fopts := &gofs.Options{
		MountOptions: mo,
		EntryTimeout: timeout(opts.EntryTimeout),
		// Attribute timeouts are set per answer (Server.attrTime): nil
		// keeps go-fuse from overriding a zero one with the default.
		NegativeTimeout: timeout(opts.NegativeTimeout),
		NullPermissions: true, // mode 0000 stays 0000
		UID:             s.uid,
		GID:             s.gid,
		RootStableAttr:  &gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: rootIno},
	}
	raw := countingFS{RawFileSystem: gofs.NewNodeFS(s.root, fopts), s: s}
	srv, err := fuse.NewServer(raw, mountpoint, &fopts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fuseexport: mount %s: %w", mountpoint, err)
	}
	s.fuse = srv
	go func() {
		srv.Serve()
		s.dropTmps() // however the mount ended
		close(s.done)
	}()
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		return nil, fmt.Errorf("fuseexport: mount %s: %w", mountpoint, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err == nil {
		// The kernel names a connection by its superblock's device number
		// (major<<20 | minor), which stat reports in the glibc encoding.
		dev := uint64(st.Dev)
		major := (dev>>8)&0xfff | (dev>>32)&^0xfff
		minor := dev&0xff | (dev>>12)&^0xff
		s.conn = fmt.Sprint(major<<20 | minor)
	}
	go s.invalidator()
	changes, stop := d.HostChanges()
	go s.watchRevocation(changes, stop)
	return s, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Mountpoint returns the host directory the Dir is mounted on.
func (s *Server) Mountpoint() string { return s.mountpoint }

// Unmount detaches the mount. With files still open in it (or a process's
// working directory inside it), the kernel refuses. Unmount then detaches it
// lazily: the mount point is free at once, and the server keeps answering the
// open files until the last one is closed. Calling it again is a no-op.
func (s *Server) Unmount() error {
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.unmounted {
		return nil
	}
	err := s.fuse.Unmount()
	if err != nil {
		if derr := detach(s.mountpoint); derr != nil {
			return errors.Join(err, derr)
		}
	}
	s.unmounted = true
	s.closeOnce.Do(func() { close(s.inval) })
	return nil
}

// Abort ends the connection at once, as writing to the kernel's fusectl abort
// file does. Every request in flight and every later one fails with ENOTCONN
// (or ECONNABORTED), and the serve loop ends. It is the last resort after
// [Server.Unmount] when a process keeps a file open in a lazily detached mount.
// It needs root. It mounts fusectl on /sys/fs/fuse/connections if it is not
// mounted.
func (s *Server) Abort() error {
	if s.conn == "" {
		return errors.New("fuseexport: abort: the connection's device number is unknown")
	}
	const ctl = "/sys/fs/fuse/connections"
	abort := ctl + "/" + s.conn + "/abort"
	if _, err := os.Stat(abort); err != nil {
		_ = syscall.Mount("none", ctl, "fusectl", 0, "")
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		return fmt.Errorf("fuseexport: abort: %w", err)
	}
	return nil
}

// Close unmounts (see [Server.Unmount]) and waits up to grace for the server to
// stop. If files are still open after that, it aborts the connection (see
// [Server.Abort]) and waits for the serve loop to end.
func (s *Server) Close(grace time.Duration) error {
	err := s.Unmount()
	select {
	case <-s.done:
		return err
	case <-time.After(grace):
	}
	if aerr := s.Abort(); aerr != nil {
		return errors.Join(err, aerr)
	}
	<-s.done
	return err
}

// Wait blocks until the server has stopped serving (after Unmount, or an
// unmount from outside such as `fusermount3 -u`).
func (s *Server) Wait() { <-s.done }

// Done is closed when the server has stopped serving.
func (s *Server) Done() <-chan struct{} { return s.done }

// Invalidate tells the kernel that p (relative to the exported Dir) changed
// through another route than this mount.
//
// The kernel drops the cached name, the attributes and the page cache of p and
// of every entry it holds beneath it. So the next access asks the Dir again.
// The notifications are sent from a goroutine of the server's own, never from
// the caller's. So Invalidate is safe to call from a hook running inside a
// request. The returned channel is closed once they have been sent; a caller
// outside any request may wait on it. An invalid path or an unmounted server is
// a no-op.
func (s *Server) Invalidate(p string) <-chan struct{} {
	done := make(chan struct{})
	vp, err := vfs.ParseGuest(p)
	if err != nil {
		close(done)
		return done
	}
	s.changes.Add(1) // a listing's statuses are no longer trusted (dirhandle.go)
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.unmounted {
		close(done)
		return done
	}
	select {
	case s.inval <- invalidation{p: vp, done: done}:
	default:
		// The queue is full: drop this one to the root's invalidation, which
		// covers it, rather than block the caller.
		go func() {
			s.unmountMu.Lock()
			ok := !s.unmounted
			s.unmountMu.Unlock()
			if ok {
				s.invalidate(vfs.Path{})
			}
			close(done)
		}()
	}
	return done
}

func (s *Server) invalidator() {
	for iv := range s.inval {
		s.invalidate(iv.p)
		close(iv.done)
	}
}

// invalidate sends the notifications for p: its entry in its parent, and the
// attributes and data of every node the kernel holds at or beneath p.
func (s *Server) invalidate(p vfs.Path) {
	in := s.root.EmbeddedInode()
	var parent *gofs.Inode
	for _, e := range p.Elems() {
		parent = in
		in = in.GetChild(e)
		if in == nil {
			break
		}
	}
	if parent != nil {
		parent.NotifyEntry(p.Base())
	}
	if in == nil {
		return
	}
	var walk func(n *gofs.Inode, depth int)
	walk = func(n *gofs.Inode, depth int) {
		n.NotifyContent(0, 0)
		if depth > vfs.MaxSymlinks*8 {
			return
		}
		for name, ch := range n.Children() {
			n.NotifyEntry(name)
			walk(ch, depth+1)
		}
	}
	walk(in, 0)
}

// newChild registers the inode for p (found with info) under parent and fills
// the entry the kernel gets.
func (s *Server) newChild(ctx context.Context, parent *node, p vfs.Path, info vfs.Info, out *fuse.EntryOut) *gofs.Inode {
	ino := s.ino(p, info)
	s.fillAttr(ino, info, &out.Attr)
	out.SetAttrTimeout(s.attrTime(info))
	in := parent.NewInode(ctx, &node{s: s}, s.identity(parent, p, info, ino))
	in.Operations().(*node).remember(&out.Attr)
	return in
}

// fillAttr converts info to the kernel's attributes.
func (s *Server) fillAttr(ino uint64, info vfs.Info, a *fuse.Attr) {
	a.Ino = ino
	size := info.Size
	if size < 0 {
		size = 0
	}
	a.Size = uint64(size)
	a.Blocks = uint64(info.Blocks512()) // the backend's where it knows them: holes hold none
	a.Blksize = 4096
	a.Mode = vfs.UnixMode(info.Mode)
	a.Nlink = 1
	if info.Nlink > 0 {
		a.Nlink = uint32(info.Nlink)
	}
	// The Dir keeps no access time: atime is mtime. ctime is the backend's
	// (the physical backend's st_ctim), else mtime. A backend that keeps no
	// times (a CAS tree) shows the Unix epoch, as build systems' input trees
	// do, not year 1 (which tools such as tar reject as implausible).
	t, c := info.ModTime, info.ChangeTime
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	if c.IsZero() {
		c = t
	}
	a.SetTimes(&t, &t, &c)
	a.Uid, a.Gid = s.uid, s.gid
	if info.HasOwner && info.Uid >= 0 && info.Gid >= 0 {
		a.Uid, a.Gid = uint32(info.Uid), uint32(info.Gid)
	}
}

// admit decides whether an entry found at p is shown at all. FIFOs, sockets
// and devices are not (they are absent, as in a checkout), nor are symlinks
// whose target the Dir does not show (the physical backend hides an absolute
// one's host path). A target is data: one leaving the exported Dir is shown,
// and only the kernel follows it, in the calling process's namespace.
func (s *Server) admit(ctx context.Context, p vfs.Path, mode fs.FileMode) syscall.Errno {
	if special(mode) {
		return syscall.ENOENT
	}
	if mode&fs.ModeSymlink != 0 {
		if _, err := s.b.Readlink(ctx, p); err != nil {
			return errnoOf(err, opLookup)
		}
	}
	return 0
}

// list reads directory p in one Dir.ReadDirVisible: the entries the Dir's
// Walk shows, less those whose status its policy refuses (a secret's name,
// which a lookup answers absent), so every name listed can be looked up, as
// in a checkout. Special files and symlinks whose target the Dir hides are
// left out too, as Lookup answers them absent. "." and ".." come first.
func (s *Server) list(ctx context.Context, p vfs.Path) ([]fuse.DirEntry, error) {
	ctx = s.noting(ctx, p)
	des, err := s.d.ReadDirVisible(ctx, "/"+p.String())
	if err != nil {
		return nil, err
	}
	return s.dirents(ctx, p, len(des), func(i int) (string, fs.FileMode) { return des[i].Name(), des[i].Type() }), nil
}

// listInfo is list with the status of each entry listed, by name, from the
// same listing (Dir.ReadDirVisibleInfo): an entry whose status could not be
// read has none.
func (s *Server) listInfo(ctx context.Context, p vfs.Path) ([]fuse.DirEntry, map[string]vfs.Info, error) {
	ctx = s.noting(ctx, p)
	infos, err := s.d.ReadDirVisibleInfo(ctx, "/"+p.String())
	if err != nil {
		return nil, nil, err
	}
	ents := s.dirents(ctx, p, len(infos), func(i int) (string, fs.FileMode) { return infos[i].Name, infos[i].Mode.Type() })
	byName := make(map[string]vfs.Info, len(infos))
	for _, e := range infos {
		if e.Err == nil {
			byName[e.Name] = e.Info
		}
	}
	return ents, byName, nil
}

// noting is ctx, telling Options.Unaddressable of each name a listing of p
// leaves out because no path can hold it.
func (s *Server) noting(ctx context.Context, p vfs.Path) context.Context {
	if s.opts.Unaddressable != nil {
		ctx = vfs.WithUnaddressable(ctx, func(u vfs.Unaddressable) { s.noteSkipped(p, u) })
	}
	return ctx
}

// dirents is the listing of directory p whose n entries entry gives (name,
// type), as the kernel gets it: "." and ".." first, without the special
// files and the symlinks with a hidden target that Lookup answers absent.
func (s *Server) dirents(ctx context.Context, p vfs.Path, n int, entry func(int) (string, fs.FileMode)) []fuse.DirEntry {
	ents := make([]fuse.DirEntry, 2, n+2)
	ents[0] = fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR}
	ents[1] = fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR}
	for i := range n {
		name, t := entry(i)
		if special(t) || hiddenName(name) {
			continue
		}
		if t&fs.ModeSymlink != 0 {
			c, cerr := p.Child(name)
			if cerr != nil || s.admit(ctx, c, fs.ModeSymlink) != 0 {
				continue
			}
		}
		ents = append(ents, fuse.DirEntry{Name: name, Mode: vfs.UnixMode(t) & syscall.S_IFMT})
	}
	return ents
}

// maxSkipped bounds how many skipped names a server remembers having told;
// past it, a name may be told again.
const maxSkipped = 1 << 12

// noteSkipped tells Options.Unaddressable of u, left out of directory p's
// listing, unless it was told already.
func (s *Server) noteSkipped(p vfs.Path, u vfs.Unaddressable) {
	key := p.Raw() + "\x00" + u.Name
	s.skipMu.Lock()
	defer s.skipMu.Unlock()
	if s.skipped[key] {
		return
	}
	if s.skipped == nil || len(s.skipped) >= maxSkipped {
		s.skipped = map[string]bool{}
	}
	s.skipped[key] = true
	s.opts.Unaddressable(p, u)
}

// ino returns the inode number of the entry at p. Within one identity space
// (a mount) the backend's ID is the inode number, so hard links share it and
// it survives renames and the kernel forgetting the node; IDs of other mounts
// are mixed with the mount's index. An entry without an ID (a git tree's
// entries, a namespace's synthetic directories: neither can be renamed or
// linked) is numbered from its path.
func (s *Server) ino(p vfs.Path, info vfs.Info) uint64 {
	k := uint64(0)
	for i, m := range s.mounts {
		if p.HasPrefix(m) {
			k = uint64(len(s.mounts) - i)
			break
		}
	}
	var ino uint64
	switch {
	case info.ID == 0:
		h := fnv.New64a()
		h.Write([]byte{byte(k)})
		h.Write([]byte(p.String()))
		ino = vfs.MixID(h.Sum64()) | 1<<63
	case k == 0:
		ino = info.ID
	default:
		ino = vfs.MixID(info.ID + k*0x9e3779b97f4a7c15)
	}
	if ino <= 1 || ino == ^uint64(0) {
		ino = vfs.MixID(ino + 0x632be59bd9b4e019)
	}
	return ino
}

// Serve blocks until ctx is done, then unmounts ([Server.Close] with a
// two-second grace for open files). It also returns when the mount is removed
// from outside (`fusermount3 -u`). A command serving a mount until SIGINT or
// SIGTERM passes a context from [os/signal.NotifyContext]. So the signal leaves
// no mount behind.
func (s *Server) Serve(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return s.Close(2 * time.Second)
	case <-s.done:
		s.unmountMu.Lock()
		if !s.unmounted {
			s.unmounted = true
			s.closeOnce.Do(func() { close(s.inval) })
		}
		s.unmountMu.Unlock()
		return nil
	}
}

// countingFS is go-fuse's file system with two additions: it counts the
// kernel's LOOKUP requests (a listing with attributes looks its entries up
// without one), and it returns a released handle's passthrough account once
// go-fuse has done with the RELEASE (see Server.releasing).
type countingFS struct {
	fuse.RawFileSystem
	s *Server
}

func (c countingFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.s.lookups.Add(1)
	return c.RawFileSystem.Lookup(cancel, header, name, out)
}

func (c countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.RawFileSystem.Release(cancel, in)
	c.s.afterRelease(cancel)
}
