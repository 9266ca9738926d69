package cas

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrBadName is wrapped by the errors of the root methods for a name that is not
// a valid root name.
var ErrBadName = errors.New("cas: invalid root name")

// ErrNoRoot is wrapped by Root's error for a name that names no root.
var ErrNoRoot = errors.New("cas: no such root")

// ValidRootName reports whether name can name a root: 1 to 128 characters from
// [A-Za-z0-9._-], not starting with '.' or '-'.
func ValidRootName(name string) bool {
	if name == "" || len(name) > 128 || name[0] == '.' || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// SaveRoot names the tree whose root Directory is d, replacing what the name
// named. The root directory must be stored. Everything the store holds is made
// durable first (Sync), then the name is written to a temporary file, synced and
// renamed, so after a crash the name holds its old digest or its new one, and
// the tree it names is whole.
func (s *Store) SaveRoot(name string, d Digest) error {
	if !ValidRootName(name) {
		return fmt.Errorf("%w: %q", ErrBadName, trunc(name))
	}
	if ok, err := s.Has(d); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("cas: save root %s: %w", name, missing(d))
	}
	if err := s.Sync(); err != nil {
		return fmt.Errorf("cas: save root %s: %w", name, err)
	}
	return writeFileSync(filepath.Join(s.dir, "roots", name), []byte(d.String()+"\n"))
}

func writeFileSync(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if df, err := os.Open(filepath.Dir(path)); err == nil {
		df.Sync()
		df.Close()
	}
	return nil
}

// Root returns the digest name names.
func (s *Store) Root(name string) (Digest, error) {
	if !ValidRootName(name) {
		return Digest{}, fmt.Errorf("%w: %q", ErrBadName, trunc(name))
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "roots", name))
	if errors.Is(err, fs.ErrNotExist) {
		return Digest{}, fmt.Errorf("%w: %s", ErrNoRoot, name)
	}
	if err != nil {
		return Digest{}, err
	}
	return ParseDigest(strings.TrimSpace(string(b)))
}

// DeleteRoot removes name. Its tree stays until a garbage collection finds it
// unreferenced.
func (s *Store) DeleteRoot(name string) error {
	if !ValidRootName(name) {
		return fmt.Errorf("%w: %q", ErrBadName, trunc(name))
	}
	err := os.Remove(filepath.Join(s.dir, "roots", name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNoRoot, name)
	}
	return err
}

// NamedRoot is one entry of Roots.
type NamedRoot struct {
	Name    string
	Digest  Digest
	ModTime time.Time // when the name was last saved
}

// Roots lists the named roots, sorted by name. A name whose file does not hold a
// digest is left out.
func (s *Store) Roots() ([]NamedRoot, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "roots"))
	if err != nil {
		return nil, err
	}
	var out []NamedRoot
	for _, e := range ents {
		if !ValidRootName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		d, err := s.Root(e.Name())
		if err != nil {
			continue
		}
		var mt time.Time
		if fi, err := e.Info(); err == nil {
			mt = fi.ModTime()
		}
		out = append(out, NamedRoot{Name: e.Name(), Digest: d, ModTime: mt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// pin records d as a root in use now: garbage collections keep it for their
// grace period.
func (s *Store) pin(d Digest) error {
	p := filepath.Join(s.dir, "pins", d.Hex()+"-"+strconv.FormatInt(d.Size, 10))
	now := time.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return nil
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return fmt.Errorf("cas: pin %s: %w", d, err)
	}
	return nil
}

// GCStats reports what a garbage collection did.
type GCStats struct {
	Roots        int   // named roots and live pins marked from
	Reachable    int   // blobs reachable from them
	Deleted      int   // blobs removed
	DeletedBytes int64 // their size on disk
	Young        int   // unreachable blobs kept because they are within the grace period
}

// GC removes every blob that no named root reaches and that was neither written
// nor found by Has within grace, plus temporary files and pins older than grace.
// Snapshots pin their root on completion, so a tree snapshotted less than grace
// ago survives even before it is named.
//
// GC holds the store's lock exclusively: it waits for ingests in progress (in
// this process and, through flock(2), in others) and they wait for it. If any
// tree reachable from a root cannot be read (a missing or corrupt directory), GC
// deletes nothing and returns the error: what it cannot mark, it cannot know to
// be garbage. Deleting any blob discards the stat caches, whose records may name
// it.
func (s *Store) GC(ctx context.Context, grace time.Duration) (GCStats, error) {
	s.gc.Lock()
	defer s.gc.Unlock()
	flock(s.lockF, true)
	defer unflock(s.lockF)
	g := &gcRun{s: s, ctx: ctx, now: time.Now(), grace: grace, marked: map[[32]byte]bool{}}
	starts, err := g.starts()
	if err != nil {
		return g.st, err
	}
	g.st.Roots = len(starts)
	for _, d := range starts {
		if err := g.mark(d); err != nil {
			return g.st, fmt.Errorf("cas: gc: cannot mark from %s, nothing deleted: %w", d, err)
		}
	}
	g.st.Reachable = len(g.marked)

	blobs := filepath.Join(s.dir, "blobs")
	fans, err := os.ReadDir(blobs)
	if err != nil {
		return g.st, err
	}
	for _, fan := range fans {
		if err := g.sweep(filepath.Join(blobs, fan.Name())); err != nil {
			return g.st, err
		}
	}
	tmps, _ := os.ReadDir(filepath.Join(s.dir, "tmp"))
	for _, e := range tmps {
		if fi, err := e.Info(); err == nil && g.old(fi) {
			os.Remove(filepath.Join(s.dir, "tmp", e.Name()))
		}
	}
	if g.st.Deleted > 0 {
		s.dropStatCaches()
	}
	return g.st, nil
}

// gcRun is one garbage collection: the blobs marked reachable so far and
// what it did.
type gcRun struct {
	s      *Store
	ctx    context.Context
	now    time.Time
	grace  time.Duration
	marked map[[32]byte]bool
	st     GCStats
}

// old reports whether fi was last written (or found) longer than grace ago.
func (g *gcRun) old(fi fs.FileInfo) bool { return g.now.Sub(fi.ModTime()) > g.grace }

// starts lists the digests to mark from: the named roots and the pins
// younger than grace (older pins are removed).
func (g *gcRun) starts() ([]Digest, error) {
	var starts []Digest
	roots, err := g.s.Roots()
	if err != nil {
		return nil, err
	}
	for _, r := range roots {
		starts = append(starts, r.Digest)
	}
	pinDir := filepath.Join(g.s.dir, "pins")
	pins, _ := os.ReadDir(pinDir)
	for _, p := range pins {
		fi, err := p.Info()
		if err != nil {
			continue
		}
		if g.old(fi) {
			os.Remove(filepath.Join(pinDir, p.Name()))
			continue
		}
		h, sz, ok := strings.Cut(p.Name(), "-")
		if d, err := ParseDigest(h + "/" + sz); ok && err == nil {
			starts = append(starts, d)
		}
	}
	return starts, nil
}

// mark marks directory d, the files it names and its subdirectories,
// recursively.
func (g *gcRun) mark(d Digest) error {
	if g.marked[d.Hash] {
		return nil
	}
	if err := g.ctx.Err(); err != nil {
		return err
	}
	g.marked[d.Hash] = true
	b, err := g.s.ReadBlob(g.ctx, d, maxDirMessage)
	if err != nil {
		return err
	}
	dir, err := DecodeDirectory(b)
	if err != nil {
		return fmt.Errorf("cas: directory %s: %w", d, err)
	}
	for _, f := range dir.Files {
		g.marked[f.Digest.Hash] = true
	}
	for _, sub := range dir.Dirs {
		if err := g.mark(sub.Digest); err != nil {
			return err
		}
	}
	return nil
}

// sweep removes the unmarked blobs of fan-out directory fdir older than
// grace, and temporary files a crash left there (no ingest runs during a
// GC) once old.
func (g *gcRun) sweep(fdir string) error {
	ents, err := os.ReadDir(fdir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if err := g.ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if fi, err := e.Info(); err == nil && g.old(fi) {
				os.Remove(filepath.Join(fdir, e.Name()))
			}
			continue
		}
		if d, err := parseHash(e.Name()); err == nil && g.marked[d.Hash] {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if !g.old(fi) {
			g.st.Young++
			continue
		}
		if os.Remove(filepath.Join(fdir, e.Name())) == nil {
			g.st.Deleted++
			g.st.DeletedBytes += fi.Size()
		}
	}
	return nil
}
