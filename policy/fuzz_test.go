package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// FuzzRules compiles random patterns and decides random paths. It checks that
// nothing panics; that a compiled pattern (with its literal prefilter) matches
// exactly what doublestar matches (the shapes matched by string comparisons and the
// literal prefilter change no answer); and that the default engines never let a guest
// stat, read, write or copy from a path with a ".ssh" component (any case, when
// folding).
func FuzzRules(f *testing.F) {
	seeds := [][2]string{
		{"**/.ssh/**", "home/.ssh/id_rsa"}, {"**/*.pem", "a.pem.txt"}, {"{a,b/c}/d", "b/c/d"},
		{"[abc]x/**", "bx"}, {"**/[.]env", ".env"}, {"a?c/**/z*", "abc/q/zz"}, {"x/{a,[bc]}*y", "x/bzy"},
		{"**", "."}, {"*", "."}, {"/src/**", "src"}, {"a\\*b", "a*b"}, {"{**/,}k", "k"},
		{"**/*.[pk]e[my]", "b.pey"}, {"[!a]", "b"}, {"{a,b", "a"}, {"a//b", "a//b"}, {".SSH/**", ".ssh/x"},
		{"**/.ssh/**", ".SSH/id_rsa"}, {"x", ".\u017fsh"}, {"[]]", "]"}, {"[^]a]", "b"},
		{"**/.git/hooks/**", "a/.git/hooks"}, {"**/.git/config", "x.git/config"}, {"src/**", "srcx"},
		{"**/.env.*", "a/.env.local"}, {"**/a/b", "a/b"}, {"**/a*", "b/ab"}, {"**/*b", "a/xb"},
	}
	for i, s := range seeds {
		f.Add(s[0], s[1], uint8(i), i%2 == 0)
	}
	ctx := context.Background()
	defaults := Defaults()
	folding, err := New(Config{CaseInsensitive: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pat, path string, opIdx uint8, fold bool) {
		if len(pat) > 128 || len(path) > 512 {
			return // bound the work of backtracking matches
		}
		op := allOps[int(opIdx)%len(allOps)]
		// Any pattern: New accepts it or reports ErrInvalidConfig; never a panic.
		e, err := New(Config{CaseInsensitive: fold, SecretPatterns: []string{}, PersistencePatterns: []string{},
			Rules: []Rule{{Effect: Deny, Paths: []string{pat}}}})
		if err == nil {
			d := e.Decide(ctx, &Request{Op: op, Path: path, Dest: path, Size: -1})
			valid := refValidPath(path)
			if !valid && (d.Effect != Deny || d.Rule != RuleInvalidPath) {
				t.Fatalf("unclean path %q decided %+v", path, d)
			}
			if valid && path != "." {
				norm, p := strings.TrimPrefix(pat, "/"), path
				if fold {
					norm, p = foldCase(norm), foldCase(p)
				}
				if !doublestar.ValidatePattern(norm) {
					t.Fatalf("New accepted %q, doublestar rejects it", pat)
				}
				// Match (validating) can report a pattern it validated as bad after a
				// failed match ("[!0[]" on "0": it validates the rest of the pattern
				// from inside the class); the answer is no match either way.
				want := doublestar.MatchUnvalidated(norm, p)
				if got := d.Effect == Deny; got != want {
					t.Fatalf("pattern %q on %q (fold %v): denied=%v, doublestar matches=%v", pat, path, fold, got, want)
				}
				// The same pattern as a persistence pattern (the base-name index and
				// the leading-byte test), beside a default list, denies a write alike.
				pe, err := New(Config{CaseInsensitive: fold, SecretPatterns: []string{},
					PersistencePatterns: append([]string{pat}, DefaultPersistencePatterns()...)})
				if err != nil {
					t.Fatalf("pattern %q accepted as a rule, refused as a persistence pattern: %v", pat, err)
				}
				pd := pe.Decide(ctx, &Request{Op: OpWrite, Path: path, Size: -1})
				if got := pd.Rule == "persistence:"+pat; want && !got {
					t.Fatalf("persistence pattern %q on %q (fold %v): %+v, doublestar matches", pat, path, fold, pd)
				} else if got && !want {
					t.Fatalf("persistence pattern %q on %q (fold %v): %+v, doublestar does not match", pat, path, fold, pd)
				}
			}
		}
		// The defaults keep every path with a .ssh component out of reach.
		if !refValidPath(path) {
			return
		}
		exact, anyCase := false, false
		for _, el := range strings.Split(path, "/") {
			exact = exact || el == ".ssh"
			anyCase = anyCase || strings.EqualFold(el, ".ssh")
		}
		for _, c := range []struct {
			e    *Engine
			must bool
		}{{defaults, exact}, {folding, anyCase}} {
			if !c.must {
				continue
			}
			for _, r := range []Request{
				{Op: OpRead, Path: path}, {Op: OpStat, Path: path}, {Op: OpWrite, Path: path},
				{Op: OpCopy, Path: path, Dest: "copy"}, {Op: OpCopy, Path: "x", Dest: path},
				{Op: OpRename, Path: path, Dest: "moved"}, {Op: OpSymlink, Path: "link", Dest: path},
				{Op: OpLink, Path: path, Dest: "alias"}, {Op: OpList, Path: path}, {Op: op, Path: path},
			} {
				r.Size = -1
				if d := c.e.Decide(ctx, &r); d.Effect != Deny {
					t.Fatalf("%s %q -> %q allowed: %+v", r.Op, r.Path, r.Dest, d)
				}
			}
		}
	})
}
