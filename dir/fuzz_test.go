package dir_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// FuzzGlob checks Glob on arbitrary patterns, at the root and in a Sub: it never
// panics; errors are invalid_path or path_outside_sandbox; results are sorted,
// unique, valid io/fs names that exist in the Dir that globbed them and match the
// pattern.
func FuzzGlob(f *testing.F) {
	for _, s := range []string{"**/*.go", "*", "**", "{a,dir}/*", "dir/**/e.txt", "[", "../x", "/**/d.go",
		"a/**/b", `\*`, "dir/sub/[cd]*", "{,}", "**/", "./*", "dir//sub/*", "*/*/*/*", "[!a]*", "{a,b", "a\x00"} {
		f.Add(s)
	}
	m := memory.New()
	seedBackend(f, m)
	root, _ := dir.New(m)
	sub, err := root.Sub(bg, "dir")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		for _, d := range []*dir.Dir{root, sub} {
			got, err := d.Glob(bg, pattern)
			if err != nil {
				if c := vfs.CodeOf(err); c != vfs.CodeInvalidPath && c != vfs.CodeOutside {
					t.Fatalf("Glob(%q): %v", pattern, err)
				}
				continue
			}
			if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("Glob(%q) not sorted and unique: %q", pattern, got)
			}
			plain := !strings.HasPrefix(pattern, "/") && !strings.Contains(pattern, "//") &&
				!strings.HasPrefix(pattern, "./") && !strings.Contains(pattern, "/./") &&
				!strings.HasSuffix(pattern, "/") && !strings.HasSuffix(pattern, "/.") && pattern != "."
			for _, p := range got {
				if !fs.ValidPath(p) {
					t.Fatalf("Glob(%q) returned invalid name %q", pattern, p)
				}
				if _, err := d.Lstat(bg, p); err != nil {
					t.Fatalf("Glob(%q) returned %q, which does not exist: %v", pattern, p, err)
				}
				if plain {
					ok, _ := doublestar.Match(pattern, p)
					// Glob documents that "x/**" includes x itself; doublestar's
					// Match agrees for a literal x ("sub/**") but not for a
					// wildcard one ("*b*/**" or "*b*/**/**" against "sub").
					for q := pattern; !ok && strings.HasSuffix(q, "/**"); {
						q = strings.TrimSuffix(q, "/**")
						ok, _ = doublestar.Match(q, p)
					}
					if !ok {
						// A directory also matches a pattern whose alternative ends in
						// a slash ("{*/}" against "dir"), as "*/" does.
						if fi, err := d.Stat(bg, p); err == nil && fi.IsDir() {
							ok, _ = doublestar.Match(pattern, p+"/")
						}
					}
					if !ok && p != "." {
						t.Fatalf("Glob(%q) returned %q, which does not match", pattern, p)
					}
				}
			}
		}
	})
}
