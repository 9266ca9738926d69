package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
)

type listIn struct {
	Path string `json:"path,omitempty" jsonschema:"the directory to list, relative to the root (default the root)"`
}

type treeIn struct {
	Path      string   `json:"path,omitempty" jsonschema:"the directory to show (default the root)"`
	Depth     int      `json:"depth,omitempty" jsonschema:"how many levels to descend (default 3)"`
	Exclude   []string `json:"exclude,omitempty" jsonschema:"glob patterns of entries to leave out, matched against the name and the path from the tree's directory, e.g. .git or **/node_modules"`
	HeadLimit int      `json:"head_limit,omitempty" jsonschema:"the most entries to show (default 250)"`
}

type globIn struct {
	Pattern   string `json:"pattern" jsonschema:"a glob pattern: * and ? within a name, ** across directories, {a,b} alternatives, e.g. **/*.go"`
	Path      string `json:"path,omitempty" jsonschema:"the directory the pattern is relative to (default the root)"`
	HeadLimit int    `json:"head_limit,omitempty" jsonschema:"the most paths to return (default 250)"`
}

type statIn struct {
	Path string `json:"path" jsonschema:"the entry to describe"`
}

type noIn struct{}

// listing entries shown per list call, at most.
const maxList = 10000

func (s *server) list(ctx context.Context, in listIn) (string, error) {
	p := in.Path
	if p == "" {
		p = "."
	}
	ents, err := s.root.ReadDir(ctx, p)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if len(ents) == 0 {
		b.WriteString("(empty directory)\n")
	}
	for i, e := range ents {
		if i == maxList {
			fmt.Fprintf(&b, "(%d more entries not shown)\n", len(ents)-i)
			break
		}
		info, ierr := e.Info()
		switch {
		case ierr != nil:
			fmt.Fprintf(&b, "[?]    %s (%s)\n", esc(e.Name()), vfs.CodeOf(ierr))
		case e.IsDir():
			fmt.Fprintf(&b, "[DIR]  %s/\n", esc(e.Name()))
		case info.Mode()&fs.ModeSymlink != 0:
			target, lerr := s.root.Readlink(ctx, joinGuest(p, e.Name()))
			if lerr != nil {
				target = "?"
			}
			fmt.Fprintf(&b, "[LINK] %s -> %s\n", esc(e.Name()), esc(target))
		case info.Mode().IsRegular():
			fmt.Fprintf(&b, "[FILE] %s  %d bytes\n", esc(e.Name()), info.Size())
		default:
			fmt.Fprintf(&b, "[SPECIAL] %s (%s)\n", esc(e.Name()), info.Mode().Type())
		}
	}
	return b.String(), nil
}

// esc escapes a guest-controlled name, path or symlink target for a text result:
// control characters, bidi overrides and invalid UTF-8 are written as Go/JSON
// escapes (\n, \u001b, \u202e, \xff) and backslashes doubled, so one entry is
// one line and a name cannot forge another (see internal/termsafe). Every text
// result puts each name through it once; JSON results (stat, mounts) hold raw
// names, which JSON escapes itself.
func esc(s string) string { return termsafe.Escape(s) }

func joinGuest(dir, name string) string {
	if dir == "" || dir == "." || dir == "/" {
		return name
	}
	return strings.TrimSuffix(dir, "/") + "/" + name
}

func (s *server) headLimit(n int) int {
	if n <= 0 {
		return s.opts.HeadLimit
	}
	return n
}

func (s *server) tree(ctx context.Context, in treeIn) (string, error) {
	root := in.Path
	if root == "" {
		root = "."
	}
	if in.Depth < 0 {
		return "", toolError(vfs.CodeInvalidPath, "tree", root, "depth must not be negative")
	}
	depth := in.Depth
	if depth == 0 {
		depth = DefaultTreeDepth
	}
	for _, x := range in.Exclude {
		if !doublestar.ValidatePattern(x) {
			return "", toolError(vfs.CodeInvalidPath, "tree", root, "malformed exclude pattern %q", x)
		}
	}
	limit := s.headLimit(in.HeadLimit)
	var b strings.Builder
	shown, more := 0, 0
	err := s.root.Walk(ctx, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if vfs.CodeOf(err) == vfs.CodeRevoked || p == cleanGuest(root) {
				return err
			}
			fmt.Fprintf(&b, "%s%s (%s)\n", indent(relDepth(root, p)), esc(path.Base(p)), vfs.CodeOf(err))
			return nil
		}
		rel := relTo(root, p)
		lvl := relDepth(root, p)
		if rel != "." && excluded(in.Exclude, rel) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if shown >= limit {
			more++
			return nil
		}
		shown++
		name := path.Base(p)
		if rel == "." {
			name = cleanGuest(root)
		}
		name = esc(name)
		switch {
		case d.IsDir():
			fmt.Fprintf(&b, "%s%s/\n", indent(lvl), name)
			if lvl >= depth {
				return fs.SkipDir
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, lerr := s.root.Readlink(ctx, p)
			if lerr != nil {
				target = "?"
			}
			fmt.Fprintf(&b, "%s%s -> %s\n", indent(lvl), name, esc(target))
		default:
			size := int64(-1)
			if info, ierr := d.Info(); ierr == nil {
				size = info.Size()
			}
			fmt.Fprintf(&b, "%s%s (%d bytes)\n", indent(lvl), name, size)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if more > 0 {
		fmt.Fprintf(&b, "(%d more entries not shown: raise head_limit, lower depth or add exclude patterns)\n", more)
	}
	return b.String(), nil
}

func indent(n int) string { return strings.Repeat("  ", n) }

// cleanGuest is the path as Walk reports the root: cleaned, "." for the root.
func cleanGuest(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// relTo is p relative to root, both as Walk reports them.
func relTo(root, p string) string {
	r := cleanGuest(root)
	if r == "." {
		return p
	}
	if p == r {
		return "."
	}
	return strings.TrimPrefix(p, r+"/")
}

func relDepth(root, p string) int {
	rel := relTo(root, p)
	if rel == "." {
		return 0
	}
	return strings.Count(rel, "/") + 1
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

func (s *server) glob(ctx context.Context, in globIn) (string, error) {
	if in.Pattern == "" {
		return "", toolError(vfs.CodeInvalidPath, "glob", "", "pattern is empty")
	}
	pattern := in.Pattern
	if in.Path != "" && !strings.HasPrefix(pattern, "/") {
		// The base directory is checked by the Dir (confinement, existence) and
		// then joined to the pattern as a literal.
		info, err := s.root.Stat(ctx, in.Path)
		if err != nil {
			return "", err
		}
		if !info.IsDir() {
			return "", toolError(vfs.CodeNotDir, "glob", in.Path, "path must be a directory")
		}
		if base := cleanGuest(in.Path); base != "." {
			pattern = quoteGlob(base) + "/" + pattern
		}
	}
	matches, err := s.root.Glob(ctx, pattern)
	if err != nil {
		return "", err
	}
	type hit struct {
		p string
		t time.Time
	}
	hits := make([]hit, 0, len(matches))
	for _, m := range matches {
		h := hit{p: m}
		if info, err := s.root.Lstat(ctx, m); err == nil {
			h.t = info.ModTime()
		} else if vfs.CodeOf(err) == vfs.CodeRevoked {
			return "", err
		}
		hits = append(hits, h)
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if !hits[i].t.Equal(hits[j].t) {
			return hits[i].t.After(hits[j].t)
		}
		return hits[i].p < hits[j].p
	})
	if len(hits) == 0 {
		return "(no matches)\n", nil
	}
	limit := s.headLimit(in.HeadLimit)
	var b strings.Builder
	for i, h := range hits {
		if i == limit {
			fmt.Fprintf(&b, "(%d more matches not shown: raise head_limit or narrow the pattern)\n", len(hits)-i)
			break
		}
		b.WriteString(esc(h.p))
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// statOut is the stat tool's answer.
type statOut struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	ModTime    string `json:"mod_time"`
	Target     string `json:"target,omitempty"`
	TargetType string `json:"target_type,omitempty"`
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	default:
		return "special"
	}
}

func (s *server) stat(ctx context.Context, in statIn) (string, error) {
	info, err := s.root.Lstat(ctx, in.Path)
	if err != nil {
		return "", err
	}
	out := statOut{Path: in.Path, Type: typeName(info.Mode()), Size: info.Size(),
		Mode: info.Mode().String(), ModTime: info.ModTime().UTC().Format(time.RFC3339Nano)}
	if info.Mode()&fs.ModeSymlink != 0 {
		if out.Target, err = s.root.Readlink(ctx, in.Path); err != nil {
			return "", err
		}
		if ti, terr := s.root.Stat(ctx, in.Path); terr == nil {
			out.TargetType = typeName(ti.Mode())
		} else {
			out.TargetType = "unreachable (" + string(vfs.CodeOf(terr)) + ")"
		}
	}
	return jsonText(out)
}

func jsonText(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}

func (s *server) mounts(ctx context.Context, _ noIn) (string, error) {
	if err := s.guard(ctx); err != nil {
		return "", err
	}
	var ms []MountInfo
	if s.opts.Mounts != nil {
		ms = s.opts.Mounts()
	} else {
		ms = []MountInfo{{Path: "/", Backend: "capfs", ReadOnly: s.root.IsReadOnly()}}
	}
	if ms == nil {
		ms = []MountInfo{}
	}
	return jsonText(ms)
}

func (s *server) help(ctx context.Context, _ noIn) (string, error) {
	if err := s.guard(ctx); err != nil {
		return "", err
	}
	return toolHelp + "\n" + s.root.Help(), nil
}

const toolHelp = `The tools of this server call the capability described below:
read/read_many = ReadFile (numbered lines), write = WriteFile (atomic), append = Append,
edit and apply_patch = ReadFile then WriteFile, list = ReadDir, tree = Walk, glob = Glob,
grep = Walk + ReadFile, stat = Lstat, mkdir = MkdirAll, move = Move, copy = Copy,
remove = Remove / RemoveAll. Every call is checked and recorded as described below.
In text results, names holding control characters, bidi controls or invalid UTF-8
are shown escaped as in a JSON string (\n, \t, \u001b, \u202e; \xff for a byte
that is not UTF-8) and a backslash in a name is shown doubled; write the name the
same way inside a JSON string argument to address it. stat and mounts answer in
JSON, with names as they are.
`
