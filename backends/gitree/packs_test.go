package gitree

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/capfs/capfs/backends/gitree/internal/gittest"
)

// TestPackedObjectsMatchGit reads every blob and tree of deltified packs
// (OFS_DELTA and REF_DELTA) through an FS's repository state, with the direct
// pack reader and without it, and compares them with the git CLI's reading:
// blob bytes and sizes, tree entries as go-git decodes them. (The reader
// itself is tested in internal/pack.)
func TestPackedObjectsMatchGit(t *testing.T) {
	for _, ref := range []bool{false, true} {
		d := gittest.DeltaRepo(t, ref)
		objs := gittest.Objects(t, d)
		g, err := Open(d, "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		plain, err := Open(d, "HEAD", WithDirectPacks(false))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if g.r.packs == nil || plain.r.packs != nil {
			t.Fatalf("direct packs: %v, plain: %v", g.r.packs != nil, plain.r.packs != nil)
		}
		for h, o := range objs {
			switch o.Type {
			case "blob":
				data, err := g.r.readBlob(h)
				if err != nil || !bytes.Equal(data, o.Data) {
					t.Fatalf("blob %s: %d bytes (want %d), %v", h, len(data), len(o.Data), err)
				}
				size, err := g.r.blobSize(h)
				if err != nil || size != int64(len(o.Data)) {
					t.Fatalf("blob %s size %d (want %d), %v", h, size, len(o.Data), err)
				}
			case "tree":
				got, err := parseTree(o.Data)
				if err != nil {
					t.Fatal(err)
				}
				direct, err := g.r.loadDir(node{mode: filemode.Dir, hash: h})
				if err != nil {
					t.Fatal(err)
				}
				viaGoGit, err := plain.r.loadDir(node{mode: filemode.Dir, hash: h})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(direct) != fmt.Sprint(viaGoGit) || fmt.Sprint(got) != fmt.Sprint(direct) {
					t.Fatalf("tree %s:\n direct %v\n go-git %v", h, direct, viaGoGit)
				}
			default:
				// A commit is not a blob: readBlob refuses it.
				if _, err := g.r.readBlob(h); err == nil {
					t.Fatalf("%s %s read as a blob", o.Type, h)
				}
			}
		}
	}
}

// TestMismatchedPackRefused changes a pack's trailer so that it no longer
// matches its index: git refuses such a pack, and so does Open, without
// handing its objects to go-git. HEAD's commit is one of them: Open fails
// (go-git's revision resolution reports it as not found), naming no host path.
func TestMismatchedPackRefused(t *testing.T) {
	d := gittest.DeltaRepo(t, false)
	packs, _ := filepath.Glob(filepath.Join(d, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(packs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Open(d, "HEAD")
	if err == nil {
		g.Close()
		t.Fatal("opened a repository whose only pack does not match its index")
	}
	if strings.Contains(err.Error(), d) {
		t.Fatalf("open with a mismatched pack: %v", err)
	}
}
