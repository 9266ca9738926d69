package mcpserver

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/vfs"
)

type globIn struct {
	Pattern   string   `json:"pattern" jsonschema:"a glob pattern: * and ? within a name, ** across directories, {a,b} alternatives, e.g. **/*.go"`
	Path      string   `json:"path,omitempty" jsonschema:"the directory the pattern is relative to (default the root)"`
	Exclude   []string `json:"exclude,omitempty" jsonschema:"glob patterns of paths to leave out, matched against each name in the path and the path itself, e.g. node_modules or **/*_test.go"`
	HeadLimit int      `json:"head_limit,omitempty" jsonschema:"the most paths to return (default 250)"`
}

type globOut struct {
	Paths []string `json:"paths" jsonschema:"matching paths, newest first"`
	More  int      `json:"more,omitempty" jsonschema:"matches not shown (raise head_limit)"`
	// Unaddressable names the host entries the walk met that no path can name,
	// with the reason: never matched, never dropped silently.
	Unaddressable []string `json:"unaddressable,omitempty" jsonschema:"entries no path can name (not matched), with the reason"`
}

func excluded(patterns []string, rel string) bool {
	base := path.Base(rel)
	for _, x := range patterns {
		if ok, _ := doublestar.Match(x, rel); ok {
			return true
		}
		if ok, _ := doublestar.Match(x, base); ok {
			return true
		}
	}
	return false
}

// quoteGlob escapes the glob metacharacters of a literal path.
func quoteGlob(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *server) glob(ctx context.Context, in globIn) (globOut, string, error) {
	out := globOut{Paths: []string{}}
	if err := checkGlobArgs(in); err != nil {
		return out, "", err
	}
	pattern, base, err := s.globPattern(ctx, in)
	if err != nil {
		return out, "", err
	}
	var skipped searchSkips
	matches, err := s.root.Glob(skipped.context(ctx), pattern)
	if err != nil {
		return out, "", err
	}
	out.Unaddressable = skipped.names()
	hits := make([]globHit, 0, len(matches))
	for _, m := range matches {
		if len(in.Exclude) > 0 && excludedPath(in.Exclude, relTo(base, m)) {
			continue
		}
		hits = append(hits, globHit{p: m})
	}
	if err := s.globTimes(ctx, hits); err != nil {
		return out, "", err
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if !hits[i].t.Equal(hits[j].t) {
			return hits[i].t.After(hits[j].t)
		}
		return hits[i].p < hits[j].p
	})
	if len(hits) == 0 {
		return out, "(no matches)\n" + skipped.text(), nil
	}
	limit := s.headLimit(in.HeadLimit)
	var b strings.Builder
	for i, h := range hits {
		if i == limit {
			out.More = len(hits) - i
			fmt.Fprintf(&b, "(%d more matches not shown: raise head_limit or narrow the pattern)\n", out.More)
			break
		}
		out.Paths = append(out.Paths, h.p)
		b.WriteString(esc(h.p))
		b.WriteByte('\n')
	}
	b.WriteString(skipped.text())
	return out, b.String(), nil
}

// checkGlobArgs checks glob's pattern, exclude patterns and head_limit.
func checkGlobArgs(in globIn) error {
	if in.Pattern == "" {
		return argErrorf("argument \"pattern\" is empty; give a glob such as **/*.go")
	}
	if !doublestar.ValidatePattern(in.Pattern) {
		return argErrorf("argument \"pattern\": malformed glob %q (check brackets and braces)", in.Pattern)
	}
	for _, x := range in.Exclude {
		if !doublestar.ValidatePattern(x) {
			return argErrorf("argument \"exclude\": malformed glob pattern %q", x)
		}
	}
	if in.HeadLimit < 0 {
		return argErrorf("argument \"head_limit\" must not be negative, got %d", in.HeadLimit)
	}
	return nil
}

// globPattern is the pattern to match from the root and the base directory
// it is relative to: a relative pattern is joined to path, as a literal,
// once the Dir has checked path (confinement, existence) is a directory.
func (s *server) globPattern(ctx context.Context, in globIn) (pattern, base string, err error) {
	pattern, base = in.Pattern, "."
	if in.Path == "" || strings.HasPrefix(pattern, "/") {
		return pattern, base, nil
	}
	info, err := s.root.Stat(ctx, in.Path)
	if err != nil {
		return "", "", err
	}
	if !info.IsDir() {
		return "", "", toolError(vfs.CodeNotDir, "glob", in.Path, "path must be a directory")
	}
	if base = cleanGuest(in.Path); base != "." {
		pattern = quoteGlob(base) + "/" + pattern
	}
	return pattern, base, nil
}

// globHit is a path glob matched and its modification time.
type globHit struct {
	p string
	t time.Time
}

// globTimes fills in the hits' modification times, in parallel (each is a
// Dir call); a time that cannot be read stays zero, but a revoked Dir is an
// error.
func (s *server) globTimes(ctx context.Context, hits []globHit) error {
	var revoked atomic.Pointer[error]
	eachParallel(len(hits), func(i int) {
		if info, err := s.root.Lstat(ctx, hits[i].p); err == nil {
			hits[i].t = info.ModTime()
		} else if vfs.CodeOf(err) == vfs.CodeRevoked {
			revoked.Store(&err)
		}
	})
	if e := revoked.Load(); e != nil {
		return *e
	}
	return nil
}

// excludedPath reports whether rel, or any of its leading directories, is
// excluded.
func excludedPath(patterns []string, rel string) bool {
	for p := rel; p != "." && p != "" && p != "/"; p = path.Dir(p) {
		if excluded(patterns, p) {
			return true
		}
	}
	return false
}
