//go:build linux

package search_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/search"
	"github.com/capfs/capfs/internal/testenv"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// writeFiles writes files (slash paths to contents) under the host directory
// root, making their directories.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// physicalTree writes files under a new temporary directory and returns a Dir
// over it through the physical backend, whose Files report their status at
// the open (the engine's read path without a Stat), and the directory.
func physicalTree(t *testing.T, files map[string]string) (*dir.Dir, string) {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, files)
	b, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	d, _ := dir.New(b, dir.WithPolicy(policy.Defaults()))
	return d, root
}

// TestPhysicalAgainstReference runs the reference comparison over the
// physical backend with files around the engine's read boundaries: empty, one
// byte, just under and over binarySniff (8000) and the first chunk (64 KiB),
// large files with matches on either side of those offsets and a line that
// spans them, and NUL bytes just inside and just past the first 8000 bytes of
// a large file.
func TestPhysicalAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	line := func() string {
		words := []string{"foo", "bar", "func New", "Needle", "x", "kelvin", "ſ", "needle"}
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		if rng.IntN(8) == 0 {
			b.WriteByte('\r')
		}
		b.WriteByte('\n')
		return b.String()
	}
	fill := func(size int) string {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(line())
		}
		return b.String()[:size]
	}
	files := map[string]string{"empty": "", "one": "x", "nl": "\n"}
	for i, size := range []int{7999, 8000, 8001, 65535, 65536, 65537, 100000} {
		files[fmt.Sprintf("s/%d.txt", i)] = fill(size)
	}
	long := fill(70000)
	files["long/spans"] = long[:60000] + strings.Repeat("y", 10000) + "needle" + long[60000:]
	nul := fill(100000)
	files["bin/early"] = nul[:7999] + "\x00" + nul[8000:]
	files["bin/late"] = nul[:8000] + "\x00" + nul[8001:]
	files["bin/small"] = "needle\x00\n"
	d, _ := physicalTree(t, files)
	for _, pat := range []string{"needle", `func New\b`, `bar \r?$`, "y+needle|Needle"} {
		for _, ic := range []bool{false, true} {
			for _, mode := range []search.Mode{search.FilesWithMatches, search.Count, search.Content} {
				expr := pat
				if ic {
					expr = "(?i)" + pat
				}
				want := reference(files, regexp.MustCompile(expr), mode, 1, 1)
				before, after := 0, 0
				if mode == search.Content {
					before, after = 1, 1
				}
				got, sum := run(t, d, ".", search.Options{Pattern: pat, IgnoreCase: ic, Mode: mode, Before: before, After: after})
				if g := render(got, mode); g != want {
					t.Fatalf("pattern %q ic=%v mode=%d:\ngot:\n%.3000s\nwant:\n%.3000s", pat, ic, mode, g, want)
				}
				if sum.Binary != 2 {
					t.Errorf("pattern %q: %d binary files, want 2 (bin/early, bin/small)", pat, sum.Binary)
				}
			}
		}
	}
}

// TestPhysicalSpecialFiles checks that a FIFO met by the walk is neither
// opened nor reported, over the physical backend: the search ends (a FIFO
// opened for reading would block it) and finds the regular file beside it.
func TestPhysicalSpecialFiles(t *testing.T) {
	d, hp := physicalTree(t, map[string]string{"a/file": "needle\n"})
	if err := syscall.Mkfifo(filepath.Join(hp, "a", "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	got, sum := run(t, d, ".", search.Options{Pattern: "needle", Mode: search.FilesWithMatches})
	if len(got) != 1 || got[0].Path != "a/file" || sum.Searched != 1 {
		t.Fatalf("got %v, searched %d; want a/file alone", got, sum.Searched)
	}
	// Named as the root, the FIFO is not searched either.
	got, sum = run(t, d, "a/fifo", search.Options{Pattern: "needle"})
	if len(got) != 0 || sum.Searched != 0 {
		t.Fatalf("a FIFO as the root: got %v, searched %d", got, sum.Searched)
	}
}

// TestFilesWithMatchesStopsAtFirst checks that FilesWithMatches and Count
// report what Content finds, and that FilesWithMatches reports one match and
// no lines per file (its scan ends at the first match).
func TestFilesWithMatchesStopsAtFirst(t *testing.T) {
	files := map[string]string{"a": strings.Repeat("needle\n", 1000), "b": "no\n", "c/d": "x\nneedle needle\n"}
	d := tree(t, files)
	fw, _ := run(t, d, ".", search.Options{Pattern: "needle", Mode: search.FilesWithMatches})
	cnt, _ := run(t, d, ".", search.Options{Pattern: "needle", Mode: search.Count})
	if len(fw) != 2 || len(cnt) != 2 {
		t.Fatalf("files %d, counts %d; want 2 each", len(fw), len(cnt))
	}
	for i, f := range fw {
		if f.Path != cnt[i].Path || f.Count != 1 || len(f.Lines) != 0 {
			t.Errorf("files_with_matches %d: %q count %d, %d lines; count mode %q", i, f.Path, f.Count, len(f.Lines), cnt[i].Path)
		}
	}
	if cnt[0].Count != 1000 || cnt[1].Count != 1 {
		t.Errorf("counts %d, %d; want 1000, 1", cnt[0].Count, cnt[1].Count)
	}
}

// TestCustomSkipBinary checks Options.SkipBinary: with it, Custom sees only
// the text files (binary ones are counted in Summary.Binary, a NUL byte past
// the first 8000 bytes does not make a file binary); without it, Custom sees
// every file, binary ones whole.
func TestCustomSkipBinary(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 10000)
	files := map[string]string{
		"text":      "hello\n",
		"bin/small": "a\x00b",
		"bin/large": "x\x00" + big,
		"late":      big[:9000] + "\x00" + big,
	}
	for _, d := range []*dir.Dir{tree(t, files), func() *dir.Dir { d, _ := physicalTree(t, files); return d }()} {
		for _, skip := range []bool{false, true} {
			seen := map[string]int{}
			var mu sync.Mutex
			_, sum := run(t, d, ".", search.Options{SkipBinary: skip, Custom: func(p string, data []byte) (any, bool) {
				mu.Lock()
				seen[p] = len(data)
				mu.Unlock()
				return nil, false
			}})
			want := map[string]int{"text": 6, "late": len(files["late"])}
			if !skip {
				want["bin/small"], want["bin/large"] = len(files["bin/small"]), len(files["bin/large"])
			}
			if fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Errorf("SkipBinary %v: Custom saw %v, want %v", skip, seen, want)
			}
			if wantBin := map[bool]int{false: 0, true: 2}[skip]; sum.Binary != wantBin {
				t.Errorf("SkipBinary %v: %d binary, want %d", skip, sum.Binary, wantBin)
			}
		}
	}
}

// counting is a backend that counts the files opened.
type counting struct {
	vfs.Backend
	opens atomic.Int64
}

func (c *counting) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	c.opens.Add(1)
	return c.Backend.OpenFile(ctx, p, flag, perm)
}

// TestLimitBoundsReadAhead checks that a search cut at Options.Limit early in
// a large tree opens a bounded number of files (what is read ahead of the
// results: at most 64 batches of 16), not the tree.
func TestLimitBoundsReadAhead(t *testing.T) {
	m := memory.New()
	plain, _ := dir.New(m)
	ctx := context.Background()
	const n = 6000
	for i := range n {
		p := fmt.Sprintf("d%02d/f%04d.txt", i%40, i)
		if err := plain.MkdirAll(ctx, path.Dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := plain.WriteFile(ctx, p, []byte("hit\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &counting{Backend: m}
	d, _ := dir.New(c)
	got, sum := run(t, d, ".", search.Options{Pattern: "hit", Mode: search.FilesWithMatches, Limit: 10})
	if len(got) != 10 || !sum.Truncated {
		t.Fatalf("%d files, truncated %v; want 10, true", len(got), sum.Truncated)
	}
	// 64 batches of 16 ahead of the results, one being filled, one per worker.
	if opened := c.opens.Load(); opened > (64+1+4)*16+10 {
		t.Errorf("a search cut at 10 files opened %d of %d", opened, n)
	}
}

// TestPhysicalSearchRacesSwaps races searches (whose opens of listed files
// carry vfs.ExpectRegular) against a host that keeps exchanging names, with each
// resolver, under a policy that denies reads of the root's vault/:
//
//   - a matching file exchanged with a FIFO holding matching bytes: the FIFO is
//     never read (its bytes are all still in it afterwards) and no search waits
//     on it;
//   - a directory exchanged with a symlink to the root: sub/vault/note, listed
//     while sub was real, reaches vault/note through the link, which the policy
//     decides on, so the vault's content never appears (a hinted open that
//     followed the link would decide on sub/vault/note and read it).
func TestPhysicalSearchRacesSwaps(t *testing.T) {
	for _, r := range []struct {
		name string
		mode physical.ResolverMode
	}{{"openat2", physical.ResolverOpenat2}, {"portable", physical.ResolverPortable}} {
		t.Run(r.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{
				"a/file":         "needle plain\n",
				"vault/note":     "needle VAULT\n",
				"sub/vault/note": "needle decoy\n",
				"sub/other":      "needle other\n",
			}
			writeFiles(t, root, files)
			const inFIFO = "needle FIFO\n"
			fifoLeft := testenv.HeldFIFO(t, filepath.Join(root, "a", "fifo"), inFIFO)
			if err := os.Symlink(".", filepath.Join(root, "rootlink")); err != nil {
				t.Fatal(err)
			}
			b, err := physical.New(root, physical.WithResolver(r.mode))
			if err != nil {
				if vfs.CodeOf(err) == vfs.CodeNotSupported {
					t.Skipf("no openat2 here: %v", err)
				}
				t.Fatal(err)
			}
			defer b.Close()
			pol, err := policy.New(policy.Config{Rules: []policy.Rule{{
				Effect: policy.Deny, Ops: []policy.Op{policy.OpRead},
				Paths: []string{"vault", "vault/**"}, Reason: "the vault",
			}}})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := dir.New(b, dir.WithPolicy(pol))
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			seen := map[string]int{}
			testenv.Exchanging(t, root, [][2]string{{"a/file", "a/fifo"}, {"sub", "rootlink"}}, func() {
				for range 40 {
					_, err := search.Search(ctx, d, ".", search.Options{Pattern: "needle", Mode: search.Content}, func(f *search.File) error {
						for _, l := range f.Lines {
							seen[string(l.Text)]++
						}
						return nil
					})
					if err != nil {
						t.Fatalf("search: %v (a search that waits on a special file runs into the deadline)", err)
					}
				}
			})
			for text, n := range seen {
				if strings.Contains(text, "VAULT") || strings.Contains(text, "FIFO") {
					t.Errorf("a search reported %q (%d times): the vault or the FIFO was read", text, n)
				}
			}
			if got := fifoLeft(); got != inFIFO {
				t.Errorf("the FIFO holds %q after the race; want %q: something read it", got, inFIFO)
			}
			t.Logf("lines seen: %v", seen)
		})
	}
}
