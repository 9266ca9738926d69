package dir_test

import (
	"io/fs"
	"path"
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
					fi, err := d.Stat(bg, p)
					ok := globOracle(pattern, p, err == nil && fi.IsDir())
					if !ok && p != "." {
						t.Fatalf("Glob(%q) returned %q, which does not match", pattern, p)
					}
				}
			}
		}
	})
}

// globOracle reports whether name matches pattern by Glob's documented rules,
// using doublestar.Match on each textual expansion of pattern's "{,}" groups
// (Glob expands them before matching, so "*{*}" is "**"), cleaned as a path is.
// "x/**" also matches x itself, and an alternative that ends in a slash matches
// the directories its slashless form matches ("{*/}", "*/**/{}").
func globOracle(pattern, name string, isDir bool) bool {
	for _, q := range expandBraces(pattern, 4096) {
		// Each alternative is cleaned as a path is: "*//" is "*/".
		slash := strings.HasSuffix(q, "/")
		q = path.Clean("/" + q)[1:]
		if q == "" {
			q = "."
		}
		if slash && !isDir {
			continue // a trailing slash asks for directories
		}
		if ok, _ := doublestar.Match(q, name); ok {
			return true
		}
		for r := q; strings.HasSuffix(r, "/**"); {
			r = strings.TrimSuffix(r, "/**")
			if ok, _ := doublestar.Match(r, name); ok {
				return true
			}
		}
	}
	return false
}

// expandBraces expands the first complete, unescaped "{...}" group of pattern into
// its comma-separated alternatives, recursively, returning at most limit patterns.
// A pattern without a complete group is returned as it is.
func expandBraces(pattern string, limit int) []string {
	open, depth := -1, 0
	var commas []int
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open, commas = i, nil
			}
			depth++
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth > 0 {
				continue
			}
			var out []string
			prev := open + 1
			for _, c := range append(commas, i) {
				alt := pattern[:open] + pattern[prev:c] + pattern[i+1:]
				out = append(out, expandBraces(alt, limit-len(out))...)
				if len(out) >= limit {
					return out[:limit]
				}
				prev = c + 1
			}
			return out
		}
	}
	return []string{pattern}
}
