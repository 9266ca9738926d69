package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/capfs/capfs/vfs"
)

// cacheTime is the modification time of every file in the link cache. A write to
// a cached file (through a hard link a sandbox was given) moves it, and the next
// materialization then replaces the entry instead of linking it again.
var cacheTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// MaterializeOptions tune Materialize.
type MaterializeOptions struct {
	// Copy copies files instead of hard-linking them from the link cache.
	Copy bool
	// Workers is how many files are placed at once; 0 means 2×GOMAXPROCS, at least 4.
	Workers int
	// MaxEntries bounds the entries (files, directories, symlinks) written; 0
	// means DefaultMaxEntries. A tree may share one directory under many names,
	// so a small tree of Directory messages can describe an enormous checkout:
	// past the bound Materialize fails before writing anything.
	MaxEntries int
}

// DefaultMaxEntries is Materialize's default bound on the entries it writes.
const DefaultMaxEntries = 10_000_000

// MaterializeStats reports what Materialize did.
type MaterializeStats struct {
	Files, Dirs, Symlinks int
	Linked                int // files hard-linked from the link cache
	Extracted             int // link cache entries written from the store
	Copied                int // files copied (Copy, or linking failed: another file system)
}

// Materialize writes the tree whose root Directory is root into dest, a host
// directory that must not exist yet (its parent must). Directories are created
// 0755 and symlinks verbatim; files are hard links to read-only entries of the
// store's link cache (cache/HASH, mode 0444, or cache/HASH.x, 0555, for
// executables), each extracted from the store and verified once, so a second
// materialization of the same content costs one link(2) per file, as Bazel's and
// Buildbarn's workers do. Where linking fails (dest on another file system) the
// file is copied.
//
// A linked file shares its inode with the cache: a process that can write it
// (one running as the cache's owner after a chmod, or as root) changes the cache.
// Its modification time then moves, and the next materialization replaces that
// entry; the store's blobs are never linked, so they cannot be changed this way.
// But a writer that restores the time, or one writing while another sandbox
// uses the same entry, is not detected: a materialized tree must reach a process
// that may be hostile only through a read-only bind (sandbox.Mount without
// Writable, as examples/cas-build binds its inputs: the bind refuses writes and
// chmod even to the files' owner), or under another uid, or with Copy.
//
// A symlink's target is data: it is written as the tree holds it, one that is
// absolute or climbs above dest included (a repository's link to /usr/bin/env,
// say), and whoever follows it does so in its own namespace (a sandbox binding
// dest); nothing here follows one. A target no link may hold (NUL, backslash,
// too long) is refused before anything is written. Every Directory is read and
// verified before dest is created; a file blob that is missing or corrupt
// fails the materialization, which then removes dest.
func (s *Store) Materialize(ctx context.Context, root Digest, dest string, opts MaterializeOptions) (st MaterializeStats, err error) {
	// Plan: read every directory, check every link.
	limit := opts.MaxEntries
	if limit <= 0 {
		limit = DefaultMaxEntries
	}
	p := &matPlan{s: s, ctx: ctx, limit: limit}
	if err := p.walk(root, ""); err != nil {
		return st, err
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		return st, fmt.Errorf("cas: materialize: %w", err)
	}
	// dest is new and ours: a failure from here (a file blob missing, or not
	// what its node declares) removes it again, so a refused tree leaves
	// nothing behind.
	defer func() {
		if err != nil {
			os.RemoveAll(dest)
		}
	}()
	for _, d := range p.dirs {
		if err := os.Mkdir(filepath.Join(dest, filepath.FromSlash(d)), 0o755); err != nil {
			return st, fmt.Errorf("cas: materialize: %w", err)
		}
	}
	st.Dirs = len(p.dirs) + 1
	for _, l := range p.links {
		if err := os.Symlink(l[1], filepath.Join(dest, filepath.FromSlash(l[0]))); err != nil {
			return st, fmt.Errorf("cas: materialize: %w", err)
		}
	}
	st.Symlinks = len(p.links)
	return st, s.placeFiles(ctx, dest, p.files, opts, &st)
}

// matPlan is what Materialize writes, every directory read and every link
// checked before anything is: directories (parents first), symlinks (path,
// target) and files, by path relative to dest.
type matPlan struct {
	s       *Store
	ctx     context.Context
	limit   int // entries allowed
	entries int
	dirs    []string
	links   [][2]string
	files   []matFile
}

// matFile is a file to place at rel.
type matFile struct {
	rel  string
	file FileNode
}

// walk plans directory d at rel and, recursively, its subdirectories.
func (p *matPlan) walk(d Digest, rel string) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	b, err := p.s.ReadBlob(p.ctx, d, maxDirMessage)
	if err != nil {
		return err
	}
	dir, err := DecodeDirectory(b)
	if err != nil {
		return err
	}
	if p.entries += len(dir.Files) + len(dir.Dirs) + len(dir.Symlinks); p.entries > p.limit {
		return fmt.Errorf("cas: materialize: the tree has more than %d entries", p.limit)
	}
	for _, f := range dir.Files {
		p.files = append(p.files, matFile{join(rel, f.Name), f})
	}
	for _, l := range dir.Symlinks {
		if err := p.link(rel, l); err != nil {
			return err
		}
	}
	for _, sub := range dir.Dirs {
		sr := join(rel, sub.Name)
		p.dirs = append(p.dirs, sr)
		if err := p.walk(sub.Digest, sr); err != nil {
			return err
		}
	}
	return nil
}

// link plans symlink l of the directory at rel, refusing a target no link may
// hold (vfs.LinkTarget); one leaving dest is data, written as it is.
func (p *matPlan) link(rel string, l SymlinkNode) error {
	lp := join(rel, l.Name)
	gp, err := vfs.ParseGuest(lp)
	if err != nil {
		return err
	}
	if _, _, err := vfs.LinkTarget(gp, l.Target); err != nil {
		return fmt.Errorf("cas: materialize: symlink %s -> %q: %w", lp, trunc(l.Target), err)
	}
	p.links = append(p.links, [2]string{lp, l.Target})
	return nil
}

// placeFiles places the files under dest on Workers goroutines, counting
// them in st, and stops at the first failure (or when ctx ends).
func (s *Store) placeFiles(ctx context.Context, dest string, files []matFile, opts MaterializeOptions, st *MaterializeStats) error {
	workers := opts.Workers
	if workers <= 0 {
		workers = max(4, 2*runtime.GOMAXPROCS(0))
	}
	var mu sync.Mutex
	var firstErr error
	next := make(chan matFile)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range next {
				linked, extracted, err := s.place1(ctx, p.file, filepath.Join(dest, filepath.FromSlash(p.rel)), opts.Copy)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				st.count(linked, extracted)
				mu.Unlock()
			}
		})
	}
	for _, p := range files {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- p
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// count counts one file placed: linked or copied, and extracted.
func (st *MaterializeStats) count(linked, extracted bool) {
	st.Files++
	if linked {
		st.Linked++
	} else {
		st.Copied++
	}
	if extracted {
		st.Extracted++
	}
}

// place1 puts one file at dst: a hard link to its cache entry, or a copy.
func (s *Store) place1(ctx context.Context, f FileNode, dst string, copyOnly bool) (linked, extracted bool, err error) {
	perm := fs.FileMode(0o444)
	suffix := ""
	if f.Executable {
		perm, suffix = 0o555, ".x"
	}
	if copyOnly {
		return false, false, s.extract(ctx, f.Digest, dst, perm, false)
	}
	entry := filepath.Join(s.dir, "cache", f.Digest.Hex()+suffix)
	for range 2 {
		fi, err := os.Lstat(entry)
		switch {
		case err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == perm && fi.Size() == f.Digest.Size && fi.ModTime().Equal(cacheTime):
		case err == nil || errors.Is(err, fs.ErrNotExist):
			// Missing, or changed since it was written: (re)write it.
			if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
				return false, false, err
			}
			if err := s.extract(ctx, f.Digest, entry, perm, true); err != nil {
				return false, false, err
			}
			extracted = true
		default:
			return false, extracted, err
		}
		err = os.Link(entry, dst)
		if err == nil {
			return true, extracted, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // the entry was replaced meanwhile: once more
		}
		break
	}
	// Another file system, or too many links: copy.
	return false, extracted, s.extract(ctx, f.Digest, dst, perm|0o200, false)
}

// extract writes blob d, verified, to path with perm: to a temporary name first,
// renamed into place only when complete and verified.
func (s *Store) extract(ctx context.Context, d Digest, path string, perm fs.FileMode, forCache bool) error {
	rc, err := s.OpenBlob(ctx, d)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cas-")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, rc) // io.Copy reads to EOF: the verifier's check runs
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), perm)
	}
	if err == nil && forCache {
		err = os.Chtimes(tmp.Name(), cacheTime, cacheTime)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// Ingest stores the host directory dir (a sandbox's outputs, say) and returns its
// root digest: SnapshotHost with dir's own stat cache.
func (s *Store) Ingest(ctx context.Context, dir string) (Digest, error) {
	return s.SnapshotHost(ctx, dir, SnapshotOptions{})
}
