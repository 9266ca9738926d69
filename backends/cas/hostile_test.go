package cas

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The hostile tree corpus: Directory messages written byte by byte (so that
// Encode's checks do not stop them), stored, and read back by every reader
// of trees. Each must be refused before anything is written.

func pbTag(b []byte, field, wire int) []byte { return binary.AppendUvarint(b, uint64(field<<3|wire)) }

func pbBytes(b []byte, field int, v []byte) []byte {
	b = pbTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func pbDigest(d Digest) []byte {
	b := pbBytes(nil, fDigestHash, []byte(d.Hex()))
	b = pbTag(b, fDigestSize, wireVarint)
	return binary.AppendUvarint(b, uint64(d.Size))
}

// pbNode is a FileNode or DirectoryNode message.
func pbNode(name string, d Digest) []byte {
	return pbBytes(pbBytes(nil, fNodeName, []byte(name)), fNodeDigest, pbDigest(d))
}

type rawEnt struct {
	field  int // fDirFiles, fDirDirs or fDirSymlinks
	name   string
	d      Digest
	target string
}

// rawDir encodes a Directory of ents in the order given, valid or not.
func rawDir(ents ...rawEnt) []byte {
	var b []byte
	for _, e := range ents {
		if e.field == fDirSymlinks {
			b = pbBytes(b, e.field, pbBytes(pbBytes(nil, fNodeName, []byte(e.name)), fNodeTarget, []byte(e.target)))
			continue
		}
		b = pbBytes(b, e.field, pbNode(e.name, e.d))
	}
	return b
}

type hostileTree struct {
	name string
	root func(t *testing.T, s *Store) Digest
	// lazy: the tree is refused by Materialize but a lazy mount may list
	// what is sound in it (its reads fail where it is not).
	lazy bool
	// stored: every message and blob is stored and well formed (VerifyTree
	// passes): the tree is refused for its shape, not its storage.
	stored bool
}

func put(t *testing.T, s *Store, b []byte) Digest {
	t.Helper()
	d, err := s.PutBytes(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func hostileTrees() []hostileTree {
	file := func(t *testing.T, s *Store) Digest { return put(t, s, []byte("data")) }
	one := func(ents func(t *testing.T, s *Store) []rawEnt) func(t *testing.T, s *Store) Digest {
		return func(t *testing.T, s *Store) Digest { return put(t, s, rawDir(ents(t, s)...)) }
	}
	return []hostileTree{
		{name: "unsorted names", root: one(func(t *testing.T, s *Store) []rawEnt {
			f := file(t, s)
			return []rawEnt{{fDirFiles, "b", f, ""}, {fDirFiles, "a", f, ""}}
		})},
		{name: "a name twice across lists", root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirFiles, "a", file(t, s), ""}, {fDirDirs, "a", put(t, s, nil), ""}}
		})},
		{name: "dot-dot name", root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirFiles, "..", file(t, s), ""}}
		})},
		{name: "slash in a name", root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirFiles, "a/b", file(t, s), ""}}
		})},
		{name: "unknown field", root: func(t *testing.T, s *Store) Digest {
			return put(t, s, pbBytes(rawDir(), 9, []byte("x")))
		}},
		{name: "bad digest hash", root: func(t *testing.T, s *Store) Digest {
			n := pbBytes(pbBytes(nil, fNodeName, []byte("f")), fNodeDigest, pbBytes(nil, fDigestHash, []byte("zz")))
			return put(t, s, pbBytes(nil, fDirFiles, n))
		}},
		{name: "NUL in a symlink target", lazy: true, stored: true, root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirSymlinks, "l", Digest{}, "../x\x00/etc/passwd"}}
		})},
		{name: "subdirectory not a Directory", lazy: true, root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirDirs, "d", put(t, s, []byte{0xff, 0xff, 0xff}), ""}}
		})},
		{name: "subdirectory missing", lazy: true, root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirDirs, "d", Digest{Hash: sha256.Sum256([]byte("absent")), Size: 3}, ""}}
		})},
		{name: "file declaring a petabyte", lazy: true, root: one(func(t *testing.T, s *Store) []rawEnt {
			f := file(t, s)
			f.Size = 1 << 50
			return []rawEnt{{fDirFiles, "big", f, ""}}
		})},
		{name: "file missing", lazy: true, root: one(func(t *testing.T, s *Store) []rawEnt {
			return []rawEnt{{fDirFiles, "gone", Digest{Hash: sha256.Sum256([]byte("absent")), Size: 6}, ""}}
		})},
		{name: "shared-directory bomb", lazy: true, stored: true, root: func(t *testing.T, s *Store) Digest {
			d := put(t, s, rawDir(rawEnt{fDirFiles, "f", file(t, s), ""}))
			for range 40 { // 2^40 paths from 41 messages
				d = put(t, s, rawDir(rawEnt{fDirDirs, "a", d, ""}, rawEnt{fDirDirs, "b", d, ""}))
			}
			return d
		}},
	}
}

// TestHostileTrees: Materialize refuses each hostile tree and leaves no
// destination behind, VerifyTree reports each whose storage is unsound, and a
// lazy mount refuses to list the malformed ones. On 8a35f16 Materialize left
// a partial destination for a missing file blob and for one shorter than its
// node declares.
func TestHostileTrees(t *testing.T) {
	for _, c := range hostileTrees() {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			root := c.root(t, s)
			if err := s.VerifyTree(bg, root); (err == nil) != c.stored {
				t.Fatalf("VerifyTree: %v", err)
			}
			dest := filepath.Join(t.TempDir(), "out")
			_, err := s.Materialize(bg, root, dest, MaterializeOptions{MaxEntries: 100_000})
			if err == nil {
				t.Fatal("Materialize accepted it")
			}
			if _, serr := os.Lstat(dest); !errors.Is(serr, fs.ErrNotExist) {
				t.Fatalf("Materialize refused it (%v) but wrote %s", err, dest)
			}
			f, err := s.Mount(bg, root, testTime)
			if err != nil {
				return
			}
			if _, err := f.ReadDir(bg, P(".")); err == nil && !c.lazy {
				t.Fatal("a lazy mount lists it")
			}
		})
	}
}
