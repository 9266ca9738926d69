package sqlite

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestConcurrentMixedOps runs goroutines mixing every mutating operation over a
// small set of names (creates, writes through shared and private handles,
// truncates, renames with every flag, links, symlinks, removals, chmods), then
// checks that the in-memory cache and the file agree: the tree read before
// Close equals the tree a fresh Open loads. Run with -race; CAPFS_STRESS=1
// runs longer.
func TestConcurrentMixedOps(t *testing.T) {
	workers, iters := 6, 250
	if os.Getenv("CAPFS_STRESS") != "" {
		iters = 5000
	}
	f, name := newFS(t, WithChunkSize(64<<10), WithQuota(8<<20))
	for _, d := range []string{"d0", "d1", "d2"} {
		must(t, f.Mkdir(bg, P(d), 0o755))
	}
	pick := func(r *rand.Rand) vfs.Path {
		dirs := []string{"d0", "d1", "d2", "d0/d1", "d1/d2"}
		leaf := []string{"a", "b", "c", "d1", "d2"}
		return P(dirs[r.IntN(len(dirs))] + "/" + leaf[r.IntN(len(leaf))])
	}
	shared, err := f.OpenFile(bg, P("shared"), os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range iters {
				p, q := pick(r), pick(r)
				var err error
				switch r.IntN(14) {
				case 0, 1:
					var h vfs.File
					if h, err = f.OpenFile(bg, p, os.O_RDWR|os.O_CREATE, 0o644); err == nil {
						_, err = h.WriteAt(bytes.Repeat([]byte{byte(i)}, r.IntN(150_000)), int64(r.IntN(70_000)))
						h.Close()
					}
				case 2:
					var h vfs.File
					if h, err = f.OpenFile(bg, p, os.O_WRONLY, 0); err == nil {
						err = h.Truncate(int64(r.IntN(100_000)))
						h.Close()
					}
				case 3:
					err = f.Mkdir(bg, p, 0o755)
				case 4:
					err = f.Remove(bg, p)
				case 5:
					err = f.Rename(bg, p, q, 0)
				case 6:
					err = f.Rename(bg, p, q, vfs.RenameNoReplace)
				case 7:
					err = f.Rename(bg, p, q, vfs.RenameExchange)
				case 8:
					err = f.Link(bg, p, q)
				case 9:
					err = f.Symlink(bg, "../"+q.String(), p)
				case 10:
					err = f.Chmod(bg, p, 0o600)
				case 11:
					_, err = shared.WriteAt([]byte(fmt.Sprintf("%d:%d;", w, i)), int64(r.IntN(300_000)))
				case 12:
					b := make([]byte, r.IntN(100_000))
					_, err = shared.ReadAt(b, int64(r.IntN(300_000)))
				default:
					_, err = f.ReadDir(bg, p.Dir())
				}
				if err != nil && vfs.CodeOf(err) == vfs.CodeIO {
					t.Errorf("%v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	must(t, shared.Close())
	before := snapshotTree(t, f)
	used := f.Usage()
	g := reopen(t, f, name, WithChunkSize(64<<10), WithQuota(8<<20))
	if after := snapshotTree(t, g); !slices.Equal(before, after) {
		t.Fatalf("cache and file disagree:\nin memory:\n%v\nloaded:\n%v", before, after)
	}
	if g.Usage() != used {
		t.Fatalf("usage %d in memory, %d loaded", used, g.Usage())
	}
	if n := countRows(t, name, "inode"); n != countInodes(t, g) {
		t.Fatalf("%d inode rows, %d reachable inodes: a row leaked", n, countInodes(t, g))
	}
}

// countInodes counts the distinct inodes reachable in f, the root included.
func countInodes(t *testing.T, f *FS) int {
	seen := map[uint64]bool{}
	var walk func(p vfs.Path)
	walk = func(p vfs.Path) {
		info, err := f.Lstat(bg, p)
		must(t, err)
		seen[info.ID] = true
		if !info.Mode.IsDir() {
			return
		}
		ents, err := f.ReadDir(bg, p)
		must(t, err)
		for _, e := range ents {
			c, _ := p.Child(e.Name)
			walk(c)
		}
	}
	walk(vfs.Root)
	return len(seen)
}
