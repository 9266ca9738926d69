package gitree

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/capfs/capfs/vfs"
)

// deltaRepo builds a repository whose history makes git store most blobs as
// deltas: 12 text files edited over 4 commits, a binary file, an empty file and a
// symlink, then repacked into one pack, with OFS_DELTA entries or, when refDelta,
// REF_DELTA ones.
func deltaRepo(t *testing.T, refDelta bool) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	runGit(t, d, "init", "-q")
	rng := rand.New(rand.NewSource(1))
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
	lines := make([][]string, 12)
	for i := range lines {
		for j := 0; j < 300; j++ {
			lines[i] = append(lines[i], fmt.Sprintf("%d %s %s", j, words[rng.Intn(8)], words[rng.Intn(8)]))
		}
	}
	bin := make([]byte, 50000)
	rng.Read(bin)
	for c := 0; c < 4; c++ {
		for i := range lines {
			for k := 0; k < 3; k++ {
				lines[i][rng.Intn(len(lines[i]))] = fmt.Sprintf("edit %d %d", c, rng.Int())
			}
			write(t, filepath.Join(d, fmt.Sprintf("dir%d/f%d.txt", i%3, i)), strings.Join(lines[i], "\n"), 0o644)
		}
		bin[rng.Intn(len(bin))]++
		write(t, filepath.Join(d, "bin.dat"), string(bin), 0o755)
		runGit(t, d, "add", "-A")
		runGit(t, d, "commit", "-q", "-m", fmt.Sprint("c", c))
	}
	write(t, filepath.Join(d, "empty"), "", 0o644)
	symlink(t, "dir0/f0.txt", filepath.Join(d, "link"))
	runGit(t, d, "add", "-A")
	runGit(t, d, "commit", "-q", "-m", "last")
	runGit(t, d, "-c", "repack.useDeltaBaseOffset="+strconv.FormatBool(!refDelta), "repack", "-adfq")
	return d
}

// gitObjects returns every object of the repository at d with its type, as the
// git CLI reads it.
func gitObjects(t *testing.T, d string) map[plumbing.Hash]struct {
	typ  string
	data []byte
} {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch")
	cmd.Dir = d
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[plumbing.Hash]struct {
		typ  string
		data []byte
	}{}
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		f := strings.Fields(line)
		if err != nil || len(f) != 3 {
			t.Fatalf("cat-file: %q %v", line, err)
		}
		size, _ := strconv.Atoi(f[2])
		data := make([]byte, size+1)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		objs[plumbing.NewHash(f[0])] = struct {
			typ  string
			data []byte
		}{f[1], data[:size]}
	}
	return objs
}

// countEntries counts the entries of each pack type in the store's packs.
func countEntries(t *testing.T, ps *packStore) map[int]int {
	t.Helper()
	n := map[int]int{}
	var hb [maxHeader]byte
	for _, p := range ps.packs {
		for _, off := range p.ends[:len(p.ends)-1] {
			e, err := p.header(off, hb[:])
			if err != nil {
				t.Fatal(err)
			}
			n[e.typ]++
		}
	}
	return n
}

// TestPackReaderMatchesGit reads every object of deltified packs (OFS_DELTA and
// REF_DELTA, with and without the delta base cache) through the direct pack
// reader and compares it with the git CLI's reading: blob bytes and sizes, tree
// entries as go-git decodes them.
func TestPackReaderMatchesGit(t *testing.T) {
	for _, ref := range []bool{false, true} {
		d := deltaRepo(t, ref)
		objs := gitObjects(t, d)
		for _, cache := range []int64{DefaultDeltaBaseCacheSize, 0} {
			t.Run(fmt.Sprintf("ref=%v,cache=%d", ref, cache), func(t *testing.T) {
				g, err := Open(d, "HEAD", WithDeltaBaseCacheSize(cache))
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
				kinds := countEntries(t, g.r.packs)
				deltaKind := packOfsDelta
				if ref {
					deltaKind = packRefDelta
				}
				if kinds[deltaKind] < 10 {
					t.Fatalf("pack entries by type %v: want deltas of type %d", kinds, deltaKind)
				}
				blobs, trees := 0, 0
				for h, o := range objs {
					switch o.typ {
					case "blob":
						blobs++
						data, err := g.r.readBlob(h)
						if err != nil || !bytes.Equal(data, o.data) {
							t.Fatalf("blob %s: %d bytes (want %d), %v", h, len(data), len(o.data), err)
						}
						size, err := g.r.blobSize(h)
						if err != nil || size != int64(len(o.data)) {
							t.Fatalf("blob %s size %d (want %d), %v", h, size, len(o.data), err)
						}
					case "tree":
						trees++
						got, err := parseTree(o.data)
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
							t.Fatalf("%s %s read as a blob", o.typ, h)
						}
					}
				}
				if blobs < 40 || trees < 10 {
					t.Fatalf("%d blobs, %d trees", blobs, trees)
				}
			})
		}
	}
}

// TestPackReaderConcurrent reads every blob from several goroutines at once with
// a delta base cache too small to hold them all (run it with -race).
func TestPackReaderConcurrent(t *testing.T) {
	d := deltaRepo(t, false)
	objs := gitObjects(t, d)
	g, err := Open(d, "HEAD", WithDeltaBaseCacheSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var ids []plumbing.Hash
	for h, o := range objs {
		if o.typ == "blob" {
			ids = append(ids, h)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := range ids {
				h := ids[(i+w*7)%len(ids)]
				data, err := g.r.readBlob(h)
				if err != nil || !bytes.Equal(data, objs[h].data) {
					errs <- fmt.Errorf("blob %s: %d bytes, %v", h, len(data), err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if g.r.packs.bases.used > 64<<10 {
		t.Fatalf("delta base cache holds %d bytes over its budget", g.r.packs.bases.used)
	}
}

// TestApplyDeltaRejectsCorruption feeds applyDelta deltas that lie about sizes or
// copy outside the base.
func TestApplyDeltaRejectsCorruption(t *testing.T) {
	base := []byte("hello, world")
	good := []byte{12, 5, 0x91, 7, 5} // copy 5 bytes from offset 7
	if out, err := applyDelta(base, good); err != nil || string(out) != "world" {
		t.Fatalf("good delta: %q, %v", out, err)
	}
	for _, bad := range [][]byte{
		{11, 5, 0x91, 7, 5},       // wrong base size
		{12, 6, 0x91, 7, 5},       // wrong result size
		{12, 5, 0x91, 9, 5},       // copy past the base's end
		{12, 5, 0x00},             // reserved instruction
		{12, 3, 3, 'a', 'b'},      // insert past the delta's end
		{12, 5, 0x91, 7},          // truncated copy
		{0x80, 0x80, 0x80, 0x80},  // unterminated size
		{12, 2, 2, 'a', 'b', 'c'}, // output past the declared size
	} {
		if out, err := applyDelta(base, bad); err == nil {
			t.Fatalf("delta %v applied: %q", bad, out)
		}
	}
}

// TestCorruptPack flips bytes inside a pack's entries: every object then reads
// either correctly or with an error, never wrong bytes or a panic. A pack whose
// trailer no longer matches its index is refused, for every object it names.
func TestCorruptPack(t *testing.T) {
	d := deltaRepo(t, false)
	objs := gitObjects(t, d)
	packs, _ := filepath.Glob(filepath.Join(d, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	orig, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(5))
	for round := 0; round < 4; round++ {
		bad := bytes.Clone(orig)
		for k := 0; k < 20; k++ {
			bad[12+rng.Intn(len(bad)-32)] ^= byte(1 + rng.Intn(255))
		}
		if err := os.WriteFile(packs[0], bad, 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := Open(d, "HEAD", WithDeltaBaseCacheSize(int64(round%2)*DefaultDeltaBaseCacheSize))
		if err != nil {
			t.Fatal(err)
		}
		if g.r.packs == nil {
			t.Fatal("pack refused: only its entries were changed")
		}
		failed := 0
		for h, o := range objs {
			if o.typ != "blob" {
				continue
			}
			_, data, err := g.r.packs.read(h, -1)
			if err != nil {
				failed++
				continue
			}
			if !bytes.Equal(data, o.data) {
				t.Fatalf("round %d: blob %s read wrong bytes without an error", round, h)
			}
		}
		g.Close()
		if failed == 0 {
			t.Fatalf("round %d: 20 corrupted bytes went unnoticed", round)
		}
	}
	// A changed trailer no longer matches the index: git refuses such a pack,
	// and so does the reader, with io_error for every object the index names,
	// without handing it to go-git. HEAD's commit is one: Open fails (go-git's
	// revision resolution reports it as not found).
	bad := bytes.Clone(orig)
	bad[len(bad)-1] ^= 1
	if err := os.WriteFile(packs[0], bad, 0o644); err != nil {
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
	ps := openPacks(filepath.Join(d, ".git"), 0, false)
	if ps == nil || len(ps.packs) != 0 || len(ps.bad) != 1 {
		t.Fatalf("packs opened: %+v", ps)
	}
	for h := range objs {
		if _, _, err := ps.read(h, -1); vfs.CodeOf(err) != vfs.CodeIO || !strings.Contains(err.Error(), "does not match its index") {
			t.Fatalf("object %s of the mismatched pack: %v", h, err)
		}
		if _, _, err := ps.info(h); vfs.CodeOf(err) != vfs.CodeIO {
			t.Fatalf("object %s of the mismatched pack: info %v", h, err)
		}
	}
}
