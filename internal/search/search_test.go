package search_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/search"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

func tree(t *testing.T, files map[string]string, opts ...dir.Option) *dir.Dir {
	t.Helper()
	m := memory.New()
	plain, _ := dir.New(m)
	ctx := context.Background()
	for p, c := range files {
		if err := plain.MkdirAll(ctx, path.Dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := plain.WriteFile(ctx, p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := dir.New(m, opts...)
	return d
}

func run(t *testing.T, d *dir.Dir, root string, o search.Options) ([]*search.File, search.Summary) {
	t.Helper()
	var out []*search.File
	sum, err := search.Search(context.Background(), d, root, o, func(f *search.File) error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, sum
}

// render prints results as grep -n would, with -- between groups.
func render(files []*search.File, mode search.Mode) string {
	var b strings.Builder
	for _, f := range files {
		switch mode {
		case search.FilesWithMatches:
			b.WriteString(f.Path + "\n")
		case search.Count:
			fmt.Fprintf(&b, "%s:%d\n", f.Path, f.Count)
		default:
			for i, l := range f.Lines {
				if i > 0 && l.Num != f.Lines[i-1].Num+1 {
					b.WriteString("--\n")
				}
				sep := "-"
				if l.Match {
					sep = ":"
				}
				fmt.Fprintf(&b, "%s%s%d%s%s\n", f.Path, sep, l.Num, sep, l.Text)
			}
		}
	}
	return b.String()
}

// reference is the obvious implementation: every file, every line, the
// expression on the line.
func reference(files map[string]string, re *regexp.Regexp, mode search.Mode, before, after int) string {
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	// Walk order: depth first with sorted names = sorted by path components.
	slices.SortFunc(names, func(a, b string) int {
		return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
	})
	var b strings.Builder
	for _, p := range names {
		c := files[p]
		if strings.IndexByte(c[:min(len(c), 8000)], 0) >= 0 {
			continue
		}
		lines := strings.Split(c, "\n")
		if strings.HasSuffix(c, "\n") {
			lines = lines[:len(lines)-1]
		}
		if c == "" {
			lines = nil
		}
		for i := range lines {
			lines[i] = strings.TrimSuffix(lines[i], "\r")
		}
		var hits []int
		for i, l := range lines {
			if re.MatchString(l) {
				hits = append(hits, i)
			}
		}
		if len(hits) == 0 {
			continue
		}
		switch mode {
		case search.FilesWithMatches:
			b.WriteString(p + "\n")
		case search.Count:
			fmt.Fprintf(&b, "%s:%d\n", p, len(hits))
		default:
			show := map[int]bool{}
			for _, h := range hits {
				for j := max(0, h-before); j <= min(len(lines)-1, h+after); j++ {
					show[j] = true
				}
			}
			last := -2
			for j := range lines {
				if !show[j] {
					continue
				}
				if last >= 0 && j != last+1 {
					b.WriteString("--\n")
				}
				sep := "-"
				if re.MatchString(lines[j]) {
					sep = ":"
				}
				fmt.Fprintf(&b, "%s%s%d%s%s\n", p, sep, j+1, sep, lines[j])
				last = j
			}
		}
	}
	return b.String()
}

func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"foo", "Foo", "FOO", "bar", "func", "main", "kelvin", "x", "", " ", "\t", "foobar", "ſ"}
	for iter := range 8 {
		files := map[string]string{}
		for i := range 1 + rng.IntN(30) {
			dirs := []string{"a", "b", "a/c", "a/c/d", "zz", "."}
			p := path.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("f%d.txt", i))
			var c strings.Builder
			for range rng.IntN(40) {
				for range rng.IntN(5) {
					c.WriteString(words[rng.IntN(len(words))])
					c.WriteByte(' ')
				}
				switch rng.IntN(6) {
				case 0:
					c.WriteString("\r\n")
				case 1:
				default:
					c.WriteString("\n")
				}
			}
			if rng.IntN(15) == 0 {
				c.WriteString("\x00bin")
			}
			files[p] = c.String()
		}
		d := tree(t, files)
		for _, pat := range []string{"foo", "Foo", "^foo", "bar $", "fo+b", "func|main", `\bx\b`, "^$", "o$", "kel", "[^a-z]foo", `\s`,
			`\w+bar\b`, `o (bar|main) `, `(foo){1,}bar`, `x?foobar$`, "oob", "ain", `f(oo)?`} {
			for _, ic := range []bool{false, true} {
				for _, mode := range []search.Mode{search.FilesWithMatches, search.Count, search.Content} {
					before, after := 0, 0
					if mode == search.Content {
						before, after = rng.IntN(3), rng.IntN(3)
					}
					expr := pat
					if ic {
						expr = "(?i)" + pat
					}
					want := reference(files, regexp.MustCompile(expr), mode, before, after)
					got, _ := run(t, d, ".", search.Options{Pattern: pat, IgnoreCase: ic, Mode: mode, Before: before, After: after, Workers: 1 + iter%4})
					if g := render(got, mode); g != want {
						t.Fatalf("iter %d pattern %q ic=%v mode=%d B=%d A=%d:\ngot:\n%s\nwant:\n%s", iter, pat, ic, mode, before, after, g, want)
					}
				}
			}
		}
	}
}

func TestIgnoreAndGit(t *testing.T) {
	d := tree(t, map[string]string{
		".gitignore":        "build/\n*.log\n!keep.log\n",
		"a.go":              "needle\n",
		"x.log":             "needle\n",
		"keep.log":          "needle\n",
		"build/out.go":      "needle\n",
		".git/config":       "needle\n",
		"sub/.gitignore":    "local.txt\n",
		"sub/local.txt":     "needle\n",
		"sub/other.txt":     "needle\n",
		"other/local.txt":   "needle\n",
		"node_modules/m.js": "needle\n",
	})
	got, _ := run(t, d, ".", search.Options{Pattern: "needle"})
	if g, want := render(got, search.FilesWithMatches), "a.go\nkeep.log\nnode_modules/m.js\nother/local.txt\nsub/other.txt\n"; g != want {
		t.Errorf("default: got\n%s want\n%s", g, want)
	}
	got, _ = run(t, d, ".", search.Options{Pattern: "needle", NoIgnore: true, Exclude: []string{"node_modules"}})
	if g, want := render(got, search.FilesWithMatches), ".git/config\na.go\nbuild/out.go\nkeep.log\nother/local.txt\nsub/local.txt\nsub/other.txt\nx.log\n"; g != want {
		t.Errorf("NoIgnore: got\n%s want\n%s", g, want)
	}
	got, _ = run(t, d, ".", search.Options{Pattern: "needle", Include: []string{"*.txt"}})
	if g, want := render(got, search.FilesWithMatches), "other/local.txt\nsub/other.txt\n"; g != want {
		t.Errorf("Include: got\n%s want\n%s", g, want)
	}
	got, _ = run(t, d, "x.log", search.Options{Pattern: "needle"})
	if len(got) != 1 || got[0].Path != "x.log" {
		t.Errorf("an explicit root is searched even if ignored: %v", got)
	}
}

func TestLimitAndSkips(t *testing.T) {
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%03d/f.txt", i)] = "hit\nmiss\nhit\n"
	}
	files["big/huge.txt"] = strings.Repeat("hit\n", 1000)
	files["bin/b.dat"] = "hit\x00"
	files["secret/.env"] = "hit\n"
	d := tree(t, files)
	for _, workers := range []int{1, 3, 8} {
		got, sum := run(t, d, ".", search.Options{Pattern: "hit", Limit: 7, Workers: workers})
		if len(got) != 7 || !sum.Truncated || got[0].Path != "big/huge.txt" {
			t.Fatalf("workers %d: %d files, truncated %v, first %s", workers, len(got), sum.Truncated, got[0].Path)
		}
		if got[6].Path != "d005/f.txt" {
			t.Errorf("workers %d: the cut is not deterministic: last %s", workers, got[6].Path)
		}
		got, sum = run(t, d, ".", search.Options{Pattern: "hit", Mode: search.Content, Limit: 5, Workers: workers})
		if n := len(got); n != 1 || got[0].Count != 5 || len(got[0].Lines) != 5 || !sum.Truncated {
			t.Errorf("content limit: %d files, last count %d", n, got[len(got)-1].Count)
		}
		got, sum = run(t, d, ".", search.Options{Pattern: "hit", Mode: search.Content, Limit: 5, Workers: workers, Exclude: []string{"big"}})
		if n := len(got); n != 3 || got[2].Path != "d002/f.txt" || got[2].Count != 1 || len(got[2].Lines) != 1 || !sum.Truncated {
			t.Errorf("content limit across files: %d files, last %+v", n, got[len(got)-1])
		}
	}
	_, sum := run(t, d, ".", search.Options{Pattern: "hit", MaxFileSize: 1000})
	if sum.Binary != 1 || len(sum.Skipped) != 1 || sum.Skipped[0].Path != "big/huge.txt" || sum.Skipped[0].Reason != search.SkipTooLarge || sum.Skipped[0].Size != 4000 {
		t.Errorf("skips: %+v", sum)
	}

	// A file the policy refuses is reported as denied, not passed over.
	m := memory.New()
	plain, _ := dir.New(m)
	ctx := context.Background()
	_ = plain.MkdirAll(ctx, "p")
	_ = plain.WriteFile(ctx, "p/.env", []byte("hit\n"), 0o644)
	_ = plain.WriteFile(ctx, "p/ok.txt", []byte("hit\n"), 0o644)
	pd, _ := dir.New(m, dir.WithPolicy(policy.Defaults()))
	got, sum := run(t, pd, ".", search.Options{Pattern: "hit"})
	if len(got) != 1 || len(sum.Skipped) != 1 || sum.Skipped[0].Reason != search.SkipDenied {
		t.Errorf("policy: files %d, %+v", len(got), sum)
	}
}

func TestBadOptions(t *testing.T) {
	d := tree(t, map[string]string{"a": "x"})
	for _, o := range []search.Options{{Pattern: ""}, {Pattern: "("}, {Pattern: "x", Include: []string{"[a"}}, {Pattern: "x", Before: -1}} {
		_, err := search.Search(context.Background(), d, ".", o, func(*search.File) error { return nil })
		if vfs.CodeOf(err) != search.CodeInvalidArgument {
			t.Errorf("%+v: %v", o, err)
		}
	}
	_, err := search.Search(context.Background(), d, "missing", search.Options{Pattern: "x"}, func(*search.File) error { return nil })
	if vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Errorf("missing root: %v", err)
	}
	stop := errors.New("stop")
	_, err = search.Search(context.Background(), d, ".", search.Options{Pattern: "x"}, func(*search.File) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("emit's error: %v", err)
	}
}

// TestStopEarly: an error from emit, or a cancelled context, ends a search of
// a tree larger than its queues without waiting for the rest, and no
// goroutine of it is left running.
func TestStopEarly(t *testing.T) {
	files := map[string]string{}
	for i := range 3000 {
		files[fmt.Sprintf("d%02d/f%04d.txt", i%30, i)] = "hit\n"
	}
	d := tree(t, files)
	before := runtime.NumGoroutine()
	stop := errors.New("stop")
	_, err := search.Search(context.Background(), d, ".", search.Options{Pattern: "hit", Workers: 2}, func(*search.File) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("emit's error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err = search.Search(ctx, d, ".", search.Options{Pattern: "hit"}, func(*search.File) error {
		if n++; n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v after %d files", err, n)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("%d goroutines before, %d after", before, after)
	}
}

// TestRareByteFinder checks the literal search against strings.Index on
// literals whose rarest byte is not the first, at every alignment.
func TestRareByteFinder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alpha := "func New(eNwz\n "
	for range 2000 {
		var h strings.Builder
		for range rng.IntN(60) {
			h.WriteByte(alpha[rng.IntN(len(alpha))])
		}
		lit := []string{"func New", "New", "eN", "wz", "z", "Nw", "c Ne", "(e"}[rng.IntN(8)]
		want := strings.Index(h.String(), lit)
		d := tree(t, map[string]string{"f": h.String()})
		got, _ := run(t, d, ".", search.Options{Pattern: lit, Fixed: true, Mode: search.Content})
		if (want >= 0) != (len(got) == 1) {
			t.Fatalf("%q in %q: want index %d, got %v", lit, h.String(), want, got)
		}
		if want >= 0 {
			line := strings.Count(h.String()[:want], "\n") + 1
			if got[0].Lines[0].Num != line {
				t.Fatalf("%q in %q: first match on line %d, want %d", lit, h.String(), got[0].Lines[0].Num, line)
			}
		}
	}
}

// TestWalkOptions: the options grep's command line needs: .gitignore files
// above the root, .git and .gitignore separately, file and directory
// excludes by name, no size limit, and a custom matcher.
func TestWalkOptions(t *testing.T) {
	d := tree(t, map[string]string{
		".gitignore":        "*.log\n",
		"src/a.go":          "hit\n",
		"src/b.log":         "hit\n",
		"src/.gitignore":    "gen_*\n",
		"src/gen_x.go":      "hit\n",
		"src/vendor/v.go":   "hit\n",
		"src/big.txt":       strings.Repeat("hit\n", 100),
		".git/config":       "hit\n",
		"src/sub/.git/HEAD": "hit\n",
		"src/sub/c_test.go": "hit\n",
		"src/sub/d.bin":     "hit\x00\n",
	})
	names := func(o search.Options, root string) string {
		got, _ := run(t, d, root, o)
		var ps []string
		for _, f := range got {
			ps = append(ps, f.Path)
		}
		return strings.Join(ps, " ")
	}
	// From src, the root's .gitignore (*.log) holds only with IgnoreAbove.
	if got := names(search.Options{Pattern: "hit"}, "src"); got != "src/a.go src/b.log src/big.txt src/sub/c_test.go src/vendor/v.go" {
		t.Errorf("without IgnoreAbove: %s", got)
	}
	if got := names(search.Options{Pattern: "hit", IgnoreAbove: "."}, "src"); got != "src/a.go src/big.txt src/sub/c_test.go src/vendor/v.go" {
		t.Errorf("IgnoreAbove: %s", got)
	}
	if got := names(search.Options{Pattern: "hit", DotGit: true}, "."); got != ".git/config src/a.go src/big.txt src/sub/.git/HEAD src/sub/c_test.go src/vendor/v.go" {
		t.Errorf("DotGit: %s", got)
	}
	if got := names(search.Options{Pattern: "hit", NoGitignore: true}, "."); got != "src/a.go src/b.log src/big.txt src/gen_x.go src/sub/c_test.go src/vendor/v.go" {
		t.Errorf("NoGitignore: %s", got)
	}
	if got := names(search.Options{Pattern: "hit", ExcludeDirs: []string{"vend*"}, ExcludeFiles: []string{"*_test.go", "big.*"}}, "."); got != "src/a.go" {
		t.Errorf("ExcludeDirs, ExcludeFiles: %s", got)
	}
	if got := names(search.Options{Pattern: "hit", ExcludeFiles: []string{"*.go"}}, "src/a.go"); got != "src/a.go" {
		t.Errorf("a named root excluded: %s", got)
	}
	_, sum := run(t, d, ".", search.Options{Pattern: "hit", MaxFileSize: 100})
	if len(sum.Skipped) != 1 || sum.Skipped[0].Path != "src/big.txt" {
		t.Errorf("MaxFileSize 100: skipped %+v", sum.Skipped)
	}
	if _, sum = run(t, d, ".", search.Options{Pattern: "hit", MaxFileSize: -1}); len(sum.Skipped) != 0 {
		t.Errorf("MaxFileSize -1: skipped %+v", sum.Skipped)
	}
	// Custom sees every file, binary ones too, and its value comes back in order.
	got, _ := run(t, d, "src", search.Options{Custom: func(p string, data []byte) (any, bool) {
		return len(data), strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".bin")
	}})
	var b strings.Builder
	for _, f := range got {
		fmt.Fprintf(&b, "%s=%v ", f.Path, f.Value)
	}
	if b.String() != "src/a.go=4 src/sub/c_test.go=4 src/sub/d.bin=5 src/vendor/v.go=4 " {
		t.Errorf("Custom: %s", b.String())
	}
}

// hintRecorder is a backend that records, for every open, whether the call
// carried vfs.ExpectRegular's hint.
type hintRecorder struct {
	vfs.Backend
	mu    sync.Mutex
	opens map[string][]bool
}

func (h *hintRecorder) record(ctx context.Context, p vfs.Path) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opens[p.String()] = append(h.opens[p.String()], vfs.ExpectsRegular(ctx))
}

func (h *hintRecorder) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	h.record(ctx, p)
	return h.Backend.OpenFile(ctx, p, flag, perm)
}

func (h *hintRecorder) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	h.record(ctx, p)
	return vfs.ResolveOpen(ctx, h.Backend, p, decide)
}

// TestSearchExpectsRegular: the engine opens the files its walk listed as
// regular with vfs.ExpectRegular (with a policy, through the fused route, and
// without), and a file the caller names as the root without it, since nothing
// listed it.
func TestSearchExpectsRegular(t *testing.T) {
	for _, withPolicy := range []bool{false, true} {
		m := memory.New()
		plain, _ := dir.New(m)
		ctx := context.Background()
		for _, p := range []string{"a.txt", "sub/b.txt", "sub/deep/c.go"} {
			if err := plain.MkdirAll(ctx, path.Dir(p)); err != nil {
				t.Fatal(err)
			}
			if err := plain.WriteFile(ctx, p, []byte("needle\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rec := &hintRecorder{Backend: m, opens: map[string][]bool{}}
		var opts []dir.Option
		if withPolicy {
			opts = append(opts, dir.WithPolicy(policy.Defaults()))
		}
		d, _ := dir.New(rec, opts...)
		files, _ := run(t, d, ".", search.Options{Pattern: "needle", Mode: search.FilesWithMatches})
		if len(files) != 3 {
			t.Fatalf("policy %v: %d files matched, want 3", withPolicy, len(files))
		}
		for _, p := range []string{"a.txt", "sub/b.txt", "sub/deep/c.go"} {
			if got := rec.opens[p]; !slices.Equal(got, []bool{true}) {
				t.Errorf("policy %v: %s opened with hints %v; want one open with the hint", withPolicy, p, got)
			}
		}
		clear(rec.opens)
		run(t, d, "sub/b.txt", search.Options{Pattern: "needle", Mode: search.FilesWithMatches})
		if got := rec.opens["sub/b.txt"]; !slices.Equal(got, []bool{false}) {
			t.Errorf("policy %v: the named root opened with hints %v; want one open without", withPolicy, got)
		}
	}
}
