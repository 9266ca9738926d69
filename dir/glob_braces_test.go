package dir_test

import (
	"slices"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestGlobBraceExpansion checks the documented rule that "{}" groups expand
// before matching, and that each alternative is cleaned and confined like a
// whole pattern.
func TestGlobBraceExpansion(t *testing.T) {
	m := memory.New()
	seedBackend(t, m)
	root, _ := dir.New(m)
	sub, err := root.Sub(bg, "dir")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pattern string
		want    []string
		code    vfs.Code
	}{
		{"{.}{.}/x", nil, vfs.CodeOutside},
		{"{a,..}/x", nil, vfs.CodeOutside},
		{"{*/}", []string{"dir", "empty", "other"}, ""}, // as "*/": directories
		{"*{/}/", []string{"dir", "empty", "other"}, ""},
		{"{,0*/}*", nil, ""}, // "*" and "0*/*": the root's names only
	} {
		for _, d := range []*dir.Dir{root, sub} {
			got, err := d.Glob(bg, c.pattern)
			if vfs.CodeOf(err) != c.code {
				t.Fatalf("Glob(%q) error %v; want %q", c.pattern, err, c.code)
			}
			if c.code != "" || d == sub {
				continue
			}
			if c.want != nil && !slices.Equal(got, c.want) {
				t.Errorf("Glob(%q) = %q; want %q", c.pattern, got, c.want)
			}
			for _, p := range got {
				if slices.Contains([]byte(p), '/') {
					t.Errorf("Glob(%q) returned %q, below the root", c.pattern, p)
				}
			}
		}
	}
}
