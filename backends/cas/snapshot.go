package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/capfs/capfs/vfs"
)

// SnapshotOptions tune a snapshot.
type SnapshotOptions struct {
	// StatCache names the stat cache to consult and update (any string: the
	// store keys its cache file by the string's hash). With it, a file whose
	// status matches the cache's record is not read again: its digest is taken
	// from the record. Empty means no cache.
	StatCache string
	// Workers is how many files are read and stored at once; 0 means
	// 2×GOMAXPROCS, at least 4.
	Workers int
	// Name, when set, names the result (SaveRoot) before the snapshot releases
	// the store's ingest lock, so no garbage collection can come between.
	Name string
	// Skipped, when set, is told of each entry a Directory cannot hold (a FIFO,
	// socket or device; a name or link target that is not UTF-8, since REAPI
	// names are protobuf strings), which the snapshot leaves out. Calls may
	// come from several goroutines at once.
	Skipped func(path string, mode fs.FileMode)
	// Denied, when set, is told of each entry the source refused to stat,
	// read or list with fs_permission_denied (a Dir's policy keeping a secret out of
	// reach), which the snapshot leaves out. Calls may come from several
	// goroutines at once.
	Denied func(path string, err error)
	// Exclude, when set, is asked of each entry before it is read (path
	// relative to the snapshot's root, its type bits): true leaves the entry
	// out, and a directory with all it holds. A stat cache records trees as
	// filtered, so a different filter wants a different StatCache name. Calls
	// may come from several goroutines at once.
	Exclude func(path string, mode fs.FileMode) bool
}

// Snapshot stores the tree b holds (files, directories, symlinks) and returns
// its root digest. To store what a Dir shows, as its policy lets it see, pass
// the Dir's Backend: entries it refuses with fs_permission_denied are left
// out (see SnapshotOptions.Denied). Files are read and stored in parallel,
// each read once (hashed and compressed from one read). Symlinks are
// recorded, never followed; the executable bit is the owner-execute bit; entries
// a Directory cannot hold are left out (see SnapshotOptions.Skipped), and so
// are those SnapshotOptions.Exclude names.
//
// With a stat cache, a file whose size, permission bits and modification time
// match the cache's record is not opened; a backend reveals no inode or
// change time, so (like git on file systems without them) a file changed within the same
// modification time and size is missed. Records younger than a second before the
// snapshot began are not trusted next time (git's "racily clean" rule). For a
// host directory, SnapshotHost also compares device, inode and change time.
//
// The snapshot holds the store's ingest lock, so a garbage collection waits for
// it, and pins its root for the grace period, so a collection that starts after
// it ends keeps the tree until it is named (SaveRoot) or the grace period ends.
func (s *Store) Snapshot(ctx context.Context, b vfs.Backend, opts SnapshotOptions) (Digest, error) {
	return s.snapshot(ctx, backendSource{b, opts.Denied}, opts)
}

// snapEntry is what a source reports of one directory entry (lstat, no follow).
type snapEntry struct {
	name  string
	mode  fs.FileMode
	size  int64
	mtime int64 // ns
	// Host sources only; zero otherwise.
	dev, ino uint64
	ctime    int64
}

// source is a tree being snapshotted: a vfs.Backend, or a host directory.
type source interface {
	// list returns the entries of directory rel sorted by name, and the
	// directory's own status (self; a zero ino when the source has none).
	list(ctx context.Context, rel string) (ents []snapEntry, self snapEntry, err error)
	open(ctx context.Context, rel string) (io.ReadCloser, error)
	readlink(ctx context.Context, rel string) (string, error)
}

type backendSource struct {
	b      vfs.Backend
	denied func(string, error)
}

// refused reports whether err is a permission refusal the snapshot skips.
func refused(err error) bool { return vfs.CodeOf(err) == vfs.CodePermission }

func parseRel(rel string) (vfs.Path, error) {
	if rel == "" {
		return vfs.Root, nil
	}
	return vfs.ParseGuest(rel)
}

func (s backendSource) list(ctx context.Context, rel string) ([]snapEntry, snapEntry, error) {
	p, err := parseRel(rel)
	if err != nil {
		return nil, snapEntry{}, err
	}
	if r, ok := s.b.(vfs.DirInfoReader); ok {
		// One pass gives every entry's status (a Dir's view: one system call
		// per entry on a physical tree, and the policy's decision). An entry
		// refused is left out and reported, as below; a refused directory
		// takes the way below, which reports it as the walk expects.
		infos, err := r.ReadDirInfo(ctx, p)
		if err == nil {
			out := make([]snapEntry, 0, len(infos))
			for _, in := range infos {
				switch {
				case in.Err == nil:
					out = append(out, infoEntry(in.Info))
				case refused(in.Err):
					if s.denied != nil {
						s.denied(join(rel, in.Name), in.Err)
					}
				default:
					return nil, snapEntry{}, in.Err
				}
			}
			// A subdirectory's own status is the one its parent's listing
			// gave (see snapDir.listed): only the root needs an Lstat.
			var self snapEntry
			if p.IsRoot() {
				self = s.self(ctx, p)
			}
			return out, self, nil
		}
		if !refused(err) {
			return nil, snapEntry{}, err
		}
	}
	ents, err := s.b.ReadDir(ctx, p)
	if err != nil {
		return nil, snapEntry{}, err
	}
	out := make([]snapEntry, 0, len(ents))
	for _, e := range ents {
		if e.Type == fs.ModeDir || e.Type == fs.ModeSymlink {
			// The listing's type settles them: a directory is listed next
			// (where a refusal is met), a symlink read. No status is needed.
			out = append(out, snapEntry{name: e.Name, mode: e.Type})
			continue
		}
		cp, err := p.Child(e.Name)
		if err != nil {
			return nil, snapEntry{}, err
		}
		info, err := s.b.Lstat(ctx, cp)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if refused(err) {
			if s.denied != nil {
				s.denied(join(rel, e.Name), err)
			}
			continue
		}
		if err != nil {
			return nil, snapEntry{}, err
		}
		info.Name = e.Name
		out = append(out, infoEntry(info))
	}
	// Directories were not stat'ed in this listing: each states its own.
	return out, s.self(ctx, p), nil
}

// infoEntry is the snapEntry of an entry's status. The identity and change time
// a backend reports (vfs.Info.ID, ChangeTime: the physical backend's inode and
// ctime) join the stat cache's key; a backend without them leaves them zero.
func infoEntry(in vfs.Info) snapEntry {
	e := snapEntry{name: in.Name, mode: in.Mode, size: in.Size, mtime: in.ModTime.UnixNano(), ino: in.ID}
	if !in.ChangeTime.IsZero() {
		e.ctime = in.ChangeTime.UnixNano()
	}
	return e
}

// self is directory p's own status where the backend reports both its identity
// and its change time (which any entry created, removed or renamed in it moves,
// and which no one can set back): only then can it prove the directory
// unchanged. Otherwise, or if p cannot be stat'ed, a zero ino: not proven.
func (s backendSource) self(ctx context.Context, p vfs.Path) snapEntry {
	in, err := s.b.Lstat(ctx, p)
	if err != nil || in.ID == 0 || in.ChangeTime.IsZero() {
		return snapEntry{}
	}
	return infoEntry(in)
}

func (s backendSource) open(ctx context.Context, rel string) (io.ReadCloser, error) {
	p, err := parseRel(rel)
	if err != nil {
		return nil, err
	}
	return s.b.OpenFile(ctx, p, os.O_RDONLY, 0)
}

func (s backendSource) readlink(ctx context.Context, rel string) (string, error) {
	p, err := parseRel(rel)
	if err != nil {
		return "", err
	}
	return s.b.Readlink(ctx, p)
}

// snapDir is one directory of a snapshot in progress.
type snapDir struct {
	rel     string
	files   []FileNode
	dirs    []*snapDir
	dirName []string
	links   []SymlinkNode
	refused bool // the source refused to list it: left out
	// self is the directory's own status, as listed; allHit reports that the
	// stat cache gave every file's digest. With both, and every subdirectory
	// unchanged, the directory is the one its record names (see storeDirs).
	self   snapEntry
	allHit bool
	// listed is the directory's status as its parent's listing gave it (taken
	// before the directory itself is listed): its self where the source gives
	// none of its own.
	listed snapEntry
}

type fileJob struct {
	rel  string
	e    snapEntry
	slot *FileNode
}

func (s *Store) snapshot(ctx context.Context, src source, opts SnapshotOptions) (Digest, error) {
	if opts.Name != "" && !ValidRootName(opts.Name) {
		return Digest{}, fmt.Errorf("%w: %q", ErrBadName, trunc(opts.Name))
	}
	defer s.ingest()()
	cache := s.loadStatCache(opts.StatCache)
	workers := opts.Workers
	if workers <= 0 {
		workers = max(4, 2*runtime.GOMAXPROCS(0))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan fileJob, 256)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				d, err := s.storeFile(ctx, src, j.rel, j.e.size)
				if refused(err) {
					// Left out: the slot keeps its zero digest, dropped below.
					if opts.Denied != nil {
						opts.Denied(j.rel, err)
					}
					continue
				}
				if err != nil {
					cancel(err)
					continue
				}
				j.slot.Digest = d
				cache.record(j.rel, j.e, d)
			}
		})
	}
	root := &snapDir{}
	w := &walker{s: s, src: src, jobs: jobs, cache: cache, opts: opts, listers: make(chan struct{}, workers), cancel: cancel}
	if err := w.walk(ctx, root); err != nil {
		cancel(err)
	}
	w.wg.Wait()
	close(jobs)
	wg.Wait()
	werr := error(nil)
	if werr == nil {
		werr = context.Cause(ctx)
	}
	if werr != nil {
		return Digest{}, werr
	}
	d, _, err := s.storeDirs(ctx, root, cache)
	if err != nil {
		return Digest{}, err
	}
	if cache != nil {
		if err := cache.save(); err != nil {
			return Digest{}, fmt.Errorf("cas: save stat cache: %w", err)
		}
	}
	if err := s.pin(d); err != nil {
		return Digest{}, err
	}
	if opts.Name != "" {
		if err := s.SaveRoot(opts.Name, d); err != nil {
			return Digest{}, err
		}
	}
	return d, nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// walker lists a tree, several directories at once, and queues the files
// whose digest the stat cache does not give.
type walker struct {
	s       *Store
	src     source
	jobs    chan<- fileJob
	cache   *statCache
	opts    SnapshotOptions
	listers chan struct{} // a token per extra goroutine listing a subtree
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
}

// walk lists sd and its subtree: a subdirectory is handed to another goroutine
// when one is free, else walked here.
func (w *walker) walk(ctx context.Context, sd *snapDir) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	ents, self, err := w.src.list(ctx, sd.rel)
	if refused(err) && sd.rel != "" {
		// A directory the source will not list is left out, like a file it
		// will not read.
		sd.refused = true
		if w.opts.Denied != nil {
			w.opts.Denied(sd.rel, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if self.ino == 0 && sd.listed.ino != 0 && sd.listed.ctime != 0 {
		self = sd.listed
	}
	sd.self, sd.allHit = self, true
	nfiles := 0
	for _, e := range ents {
		if e.mode.IsRegular() {
			nfiles++
		}
	}
	sd.files = make([]FileNode, 0, nfiles) // slots must not move once queued
	for _, e := range ents {
		rel := join(sd.rel, e.name)
		if !utf8.ValidString(e.name) {
			// A Directory's names are protobuf strings: UTF-8 only.
			if w.opts.Skipped != nil {
				w.opts.Skipped(rel, e.mode)
			}
			continue
		}
		if w.opts.Exclude != nil && w.opts.Exclude(rel, e.mode.Type()) {
			continue
		}
		switch {
		case e.mode.IsRegular():
			sd.files = append(sd.files, FileNode{Name: e.name, Executable: e.mode&0o100 != 0})
			slot := &sd.files[len(sd.files)-1]
			if d, ok := w.cache.lookup(rel, e); ok {
				slot.Digest = d
				continue
			}
			sd.allHit = false
			select {
			case w.jobs <- fileJob{rel: rel, e: e, slot: slot}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		case e.mode.IsDir():
			sub := &snapDir{rel: rel, listed: e}
			sd.dirs = append(sd.dirs, sub)
			sd.dirName = append(sd.dirName, e.name)
			select {
			case w.listers <- struct{}{}:
				w.wg.Go(func() {
					defer func() { <-w.listers }()
					if err := w.walk(ctx, sub); err != nil {
						w.cancel(err)
					}
				})
			default:
				if err := w.walk(ctx, sub); err != nil {
					return err
				}
			}
		case e.mode&fs.ModeSymlink != 0:
			t, err := w.src.readlink(ctx, rel)
			if refused(err) {
				if w.opts.Denied != nil {
					w.opts.Denied(rel, err)
				}
				continue
			}
			if err != nil {
				return err
			}
			if !utf8.ValidString(t) {
				if w.opts.Skipped != nil {
					w.opts.Skipped(rel, e.mode)
				}
				continue
			}
			sd.links = append(sd.links, SymlinkNode{Name: e.name, Target: t})
		default:
			if w.opts.Skipped != nil {
				w.opts.Skipped(rel, e.mode)
			}
		}
	}
	return nil
}

// storeFile reads one file of src and stores it.
func (s *Store) storeFile(ctx context.Context, src source, rel string, size int64) (Digest, error) {
	r, err := src.open(ctx, rel)
	if err != nil {
		return Digest{}, err
	}
	defer r.Close()
	return s.put(ctx, r, nil, size)
}

// storeDirs encodes and stores sd's subtree bottom-up and returns sd's digest,
// and whether the directory is unchanged since the stat cache recorded it.
//
// A directory is unchanged when its own status (device, inode, modification and
// change time: any entry created, removed or renamed in it moves them) matches
// its record, the cache gave every file's digest, and every subdirectory is
// unchanged: its digest is then the recorded one, neither encoded nor hashed.
// A directory whose encoding hashes to the digest the cache recorded is not
// stored again, nor looked for: the cache is discarded whenever a blob is
// deleted (GC, Verify's repair), so what it records is stored.
func (s *Store) storeDirs(ctx context.Context, sd *snapDir, cache *statCache) (Digest, bool, error) {
	clean := sd.allHit && sd.self.ino != 0
	subs := make([]Digest, len(sd.dirs))
	for i, sub := range sd.dirs {
		if sub.refused {
			clean = false
			continue
		}
		dg, subClean, err := s.storeDirs(ctx, sub, cache)
		if err != nil {
			return Digest{}, false, err
		}
		subs[i] = dg
		clean = clean && subClean
	}
	if clean {
		if dg, ok := cache.unchangedDir(sd.rel, sd.self); ok {
			return dg, true, nil
		}
	}
	d := Directory{Files: sd.files, Symlinks: sd.links}
	if slices.ContainsFunc(d.Files, func(f FileNode) bool { return f.Digest.IsZero() }) {
		d.Files = slices.DeleteFunc(slices.Clone(d.Files), func(f FileNode) bool { return f.Digest.IsZero() })
	}
	for i, sub := range sd.dirs {
		if !sub.refused {
			d.Dirs = append(d.Dirs, DirNode{Name: sd.dirName[i], Digest: subs[i]})
		}
	}
	b, err := d.Encode()
	if err != nil {
		return Digest{}, false, err
	}
	s.dirEncodes.Add(1)
	dg := DigestOf(b)
	if cache.knownDir(sd.rel, dg, sd.self) {
		return dg, false, nil
	}
	if _, err := s.putBytes(dg, b); err != nil {
		return Digest{}, false, err
	}
	cache.recordDir(sd.rel, dg, sd.self)
	return dg, false, nil
}
