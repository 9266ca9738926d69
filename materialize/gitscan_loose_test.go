//go:build linux

package materialize

import (
	"bytes"
	"compress/zlib"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// writeLoose stores raw (a header and a body) as the zlib-compressed loose
// object id under gitdir.
func writeLoose(t *testing.T, gitdir, id string, raw ...[]byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	for _, r := range raw {
		zw.Write(r)
	}
	zw.Close()
	p := filepath.Join(gitdir, "objects", id[:2], id[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestGitScanLooseBounded: the scan's loose-object reader inflates no more than
// an object's declared size, and no object declaring more than maxLooseObject;
// a body of another type than asked for is not inflated at all. On the code
// before, every loose object was inflated whole into memory, whatever it
// declared (a few kilobytes of zlib can inflate to gigabytes).
func TestGitScanLooseBounded(t *testing.T) {
	gitdir := t.TempDir()
	const (
		bomb   = "1111111111111111111111111111111111111111"
		liar   = "2222222222222222222222222222222222222222"
		empty  = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
		short  = "3333333333333333333333333333333333333333"
		blobID = "5555555555555555555555555555555555555555"
	)
	zeros := make([]byte, 1<<20)
	// Declares 128 MiB (the bound refuses it before inflating); the body is
	// kept short so the test is quick.
	writeLoose(t, gitdir, bomb, []byte("tree 134217728\x00"), zeros)
	writeLoose(t, gitdir, liar, []byte("tree 5\x00"), []byte("0123456789"))
	writeLoose(t, gitdir, short, []byte("tree 50\x00"), []byte("0123456789"))
	writeLoose(t, gitdir, empty, []byte("tree 0\x00"))
	writeLoose(t, gitdir, blobID, []byte("blob 134217728\x00"), zeros)
	l := newLooseFirst(nil, gitdir)
	defer l.close()

	if _, err := l.loose(plumbing.NewHash(bomb), plumbing.TreeObject); err == nil {
		t.Error("an object past maxLooseObject was read")
	}
	for _, id := range []string{liar, short} {
		if _, err := l.loose(plumbing.NewHash(id), plumbing.TreeObject); err == nil {
			t.Errorf("object %s, whose size disagrees with its header, was read", id[:4])
		}
	}
	o, err := l.loose(plumbing.NewHash(empty), plumbing.TreeObject)
	if err != nil || o.Size() != 0 || o.Type() != plumbing.TreeObject {
		t.Errorf("the empty tree: %v, %v", o, err)
	}
	if _, err := l.loose(plumbing.NewHash(blobID), plumbing.TreeObject); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("a blob asked for as a tree: %v, want ErrObjectNotFound (body not read)", err)
	}
}

// TestGitLooseHeaderOneParser: the listing of loose objects (typed by their
// header alone) and the reader of one (looseFirst.loose) parse the header
// with one parser, so they agree on every header: both accept a well-formed
// one with the same type, both refuse any other. On the code before, the
// listing had its own parser, which took the type from "blob x\x00" or a
// header with no size or end at all, where the reader refused them.
func TestGitLooseHeaderOneParser(t *testing.T) {
	const id = "6666666666666666666666666666666666666666"
	for _, raw := range []string{
		"blob 5\x00hello", "commit 0\x00", "tree 0\x00",
		"blob x\x00hello", "blob 5", "blob\x00", "blob5\x00hello", "blab 5\x00hello", "blob -1\x00",
		"blob 99999999999999999999999\x00", "blob " + strings.Repeat("0", 40) + "5\x00hello", "",
	} {
		gitdir := t.TempDir()
		writeLoose(t, gitdir, id, []byte(raw))
		listed, lerr := plumbing.InvalidObject, error(nil)
		lerr = looseObjects(t.Context(), gitdir, nil, func(_ plumbing.Hash, typ plumbing.ObjectType) error {
			listed = typ
			return nil
		})
		l := newLooseFirst(nil, gitdir)
		o, rerr := l.loose(plumbing.NewHash(id), plumbing.AnyObject)
		l.close()
		switch {
		case (lerr == nil) != (rerr == nil):
			t.Errorf("%q: the listing says %v (%v), the reader %v", raw, listed, lerr, rerr)
		case lerr == nil && o.Type() != listed:
			t.Errorf("%q: the listing says %v, the reader %v", raw, listed, o.Type())
		}
	}
}

// TestGitScanTakesTheWalk: on a scan after a fingerprint, the loose objects
// are those the fingerprint's walk saw (objects/ is not listed a second
// time): one removed since (packed by a git gc) is skipped, not an error, and
// one added since is not scanned, as it is not among the objects shown.
func TestGitScanTakesTheWalk(t *testing.T) {
	gitdir := t.TempDir()
	const (
		kept  = "6666666666666666666666666666666666666666"
		gone  = "7777777777777777777777777777777777777777"
		added = "8888888888888888888888888888888888888888"
	)
	writeLoose(t, gitdir, kept, []byte("blob 5\x00hello"))
	_, walked, err := gitFingerprint(gitdir)
	if err != nil {
		t.Fatal(err)
	}
	walked["objects/77/"+gone[2:]] = true
	writeLoose(t, gitdir, added, []byte("blob 5\x00hello"))
	h, err := scanGitPaths(t.Context(), gitdir, 100, walked)
	if err != nil {
		t.Fatal(err)
	}
	if want := "objects/66/" + kept[2:]; len(h.Unnamed) != 1 || h.Unnamed[0] != want {
		t.Errorf("unnamed %v, want [%s]", h.Unnamed, want)
	}
	h, err = scanGitPaths(t.Context(), gitdir, 100, nil)
	if err != nil || len(h.Unnamed) != 2 {
		t.Errorf("a scan listing objects/ itself: unnamed %v, %v; want both objects", h.Unnamed, err)
	}
}
