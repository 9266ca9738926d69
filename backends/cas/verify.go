package cas

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// VerifyTree reads and checks every Directory and every file blob reachable from
// root: each must be stored, hash to its digest and (for directories) be a
// canonical Directory. It returns the first failure.
func (s *Store) VerifyTree(ctx context.Context, root Digest) error {
	seen := map[Digest]bool{}
	var walk func(d Digest, rel string) error
	walk = func(d Digest, rel string) error {
		if seen[d] {
			return nil
		}
		seen[d] = true
		b, err := s.ReadBlob(ctx, d, maxDirMessage)
		if err != nil {
			return fmt.Errorf("directory %q: %w", "/"+rel, err)
		}
		dir, err := DecodeDirectory(b)
		if err != nil {
			return fmt.Errorf("directory %q: %w", "/"+rel, err)
		}
		for _, f := range dir.Files {
			if seen[f.Digest] {
				continue
			}
			seen[f.Digest] = true
			if err := s.VerifyBlob(ctx, f.Digest); err != nil {
				return fmt.Errorf("file %q: %w", "/"+join(rel, f.Name), err)
			}
		}
		for _, sub := range dir.Dirs {
			if err := walk(sub.Digest, join(rel, sub.Name)); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, "")
}

// VerifyBlob reads blob d through and checks it against d.
func (s *Store) VerifyBlob(ctx context.Context, d Digest) error {
	rc, err := s.OpenBlob(ctx, d)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = copyCtx(ctx, discard{}, rc)
	return err
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// VerifyReport is what Verify found.
type VerifyReport struct {
	Blobs   int               // blob files checked
	Corrupt []Digest          // blobs that failed their check (or whose name is not a hash)
	Roots   int               // named roots checked
	Broken  map[string]string // root name -> first failure of its tree
}

// Verify checks every blob the store holds and every tree reachable from its
// named roots. With repair, corrupt blobs are removed (the next Put of the same
// content stores it anew; a root that needed one stays broken until then).
func (s *Store) Verify(ctx context.Context, repair bool) (VerifyReport, error) {
	rep := VerifyReport{Broken: map[string]string{}}
	blobs := filepath.Join(s.dir, "blobs")
	fans, err := os.ReadDir(blobs)
	if err != nil {
		return rep, err
	}
	for _, fan := range fans {
		if err := s.verifyFan(ctx, filepath.Join(blobs, fan.Name()), repair, &rep); err != nil {
			return rep, err
		}
	}
	if repair && len(rep.Corrupt) > 0 {
		// The stat caches may name what was removed.
		s.dropStatCaches()
	}
	roots, err := s.Roots()
	if err != nil {
		return rep, err
	}
	for _, r := range roots {
		rep.Roots++
		if err := s.VerifyTree(ctx, r.Digest); err != nil {
			rep.Broken[r.Name] = err.Error()
		}
	}
	return rep, nil
}

// verifyFan checks the blob files of fan-out directory fdir, listing the
// corrupt ones in rep (and, with repair, removing them).
func (s *Store) verifyFan(ctx context.Context, fdir string, repair bool, rep *VerifyReport) error {
	ents, err := os.ReadDir(fdir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			continue // being written (or left by a crash: GC removes it)
		}
		rep.Blobs++
		d, err := parseHash(e.Name())
		if err == nil {
			d.Size, err = s.storedSize(d)
		}
		if err == nil {
			err = s.VerifyBlob(ctx, d)
		}
		if err != nil {
			rep.Corrupt = append(rep.Corrupt, d)
			if repair {
				os.Remove(filepath.Join(fdir, e.Name()))
			}
		}
	}
	return nil
}

// dropStatCaches removes the stat caches, whose records may name blobs that
// were just removed.
func (s *Store) dropStatCaches() {
	caches, _ := os.ReadDir(filepath.Join(s.dir, "statcache"))
	for _, e := range caches {
		os.Remove(filepath.Join(s.dir, "statcache", e.Name()))
	}
}

// storedSize returns the content size of the blob file for d's hash (its size
// is not in its name): the raw file's size less its tag, or what its zstd stream
// decodes to.
func (s *Store) storedSize(d Digest) (int64, error) {
	f, err := os.Open(s.blobPath(d))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var tag [1]byte
	if _, err := f.Read(tag[:]); err != nil {
		return 0, &CorruptError{d, "empty blob file"}
	}
	switch tag[0] {
	case tagRaw:
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size() - 1, nil
	case tagZstd:
		zr, err := zstd.NewReader(bufio.NewReader(f), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return 0, &CorruptError{d, err.Error()}
		}
		defer zr.Close()
		n, err := copyCtx(context.Background(), discard{}, zr)
		if err != nil {
			return 0, &CorruptError{d, "cannot decompress: " + err.Error()}
		}
		return n, nil
	}
	return 0, &CorruptError{d, "unknown blob format"}
}

// Usage counts the blobs the store holds and the bytes their files take at rest
// (compressed where that saved space).
func (s *Store) Usage() (blobs int, bytes int64, err error) {
	root := filepath.Join(s.dir, "blobs")
	fans, err := os.ReadDir(root)
	if err != nil {
		return 0, 0, err
	}
	for _, fan := range fans {
		ents, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				continue
			}
			if fi, err := e.Info(); err == nil {
				blobs++
				bytes += fi.Size()
			}
		}
	}
	return blobs, bytes, nil
}
