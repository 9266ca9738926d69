package mcpserver

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/vfs"
)

type treeIn struct {
	Path      string   `json:"path,omitempty" jsonschema:"the directory to show (default the root)"`
	Depth     int      `json:"depth,omitempty" jsonschema:"how many levels to descend (default 3)"`
	Exclude   []string `json:"exclude,omitempty" jsonschema:"glob patterns of entries to leave out, matched against the name and the path from the tree's directory, e.g. .git or **/node_modules"`
	HeadLimit int      `json:"head_limit,omitempty" jsonschema:"the most entries to show (default 250)"`
}

func (s *server) tree(ctx context.Context, in treeIn) (listOut, string, error) {
	root := in.Path
	if root == "" {
		root = "."
	}
	out := listOut{Path: root, Entries: []listEntry{}}
	depth, err := treeDepth(in)
	if err != nil {
		return out, "", err
	}
	w := &treeWalk{root: root, exclude: in.Exclude, depth: depth, limit: s.headLimit(in.HeadLimit), out: &out}
	w.k.add = w.add
	if err := s.root.Walk(w.k.context(ctx), root, w.visit); err != nil {
		return out, "", err
	}
	s.describeWalked(ctx, out.Entries, w.pending)
	var b strings.Builder
	for _, e := range out.Entries {
		writeTreeEntry(&b, e)
	}
	if out.More > 0 {
		fmt.Fprintf(&b, "(%d more entries not shown: raise head_limit, lower depth or add exclude patterns)\n", out.More)
	}
	return out, b.String(), nil
}

// treeDepth checks tree's arguments and returns the depth to descend.
func treeDepth(in treeIn) (int, error) {
	if in.Depth < 0 {
		return 0, argErrorf("argument \"depth\" must not be negative, got %d", in.Depth)
	}
	if in.HeadLimit < 0 {
		return 0, argErrorf("argument \"head_limit\" must not be negative, got %d", in.HeadLimit)
	}
	depth := in.Depth
	if depth == 0 {
		depth = DefaultTreeDepth
	}
	for _, x := range in.Exclude {
		if !doublestar.ValidatePattern(x) {
			return 0, argErrorf("argument \"exclude\": malformed glob pattern %q", x)
		}
	}
	return depth, nil
}

// treeWalk is one tree call's walk: it lists entries into out, up to limit
// (counting the rest in out.More), and leaves their description for after
// the walk (pending).
type treeWalk struct {
	root    string
	exclude []string
	depth   int
	limit   int
	out     *listOut
	pending []walked
	k       skippedNames
}

// add lists e, or counts it past the limit.
func (w *treeWalk) add(e listEntry) {
	if len(w.out.Entries) >= w.limit {
		w.out.More++
		return
	}
	w.out.Entries = append(w.out.Entries, e)
}

// visit is the walk's callback for p.
func (w *treeWalk) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return w.failed(p, err)
	}
	rel := relTo(w.root, p)
	lvl := relDepth(w.root, p)
	if rel != "." && excluded(w.exclude, rel) {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	if len(w.out.Entries) >= w.limit {
		w.out.More++
		return nil
	}
	name := rel
	if rel == "." {
		name = cleanGuest(w.root)
	}
	// Described after the walk, in parallel (each Info is a Dir call).
	w.out.Entries = append(w.out.Entries, listEntry{Name: name, Depth: lvl})
	w.pending = append(w.pending, walked{idx: len(w.out.Entries) - 1, dir: path.Dir(p), d: d})
	if d.IsDir() && lvl >= w.depth {
		return fs.SkipDir
	}
	if d.IsDir() {
		w.k.at(rel, lvl+1) // Walk lists it next
	}
	return nil
}

// failed lists p, which the walk could not read, as hidden (refused by the
// policy) or unreadable; a revoked Dir or an unreadable root ends the walk.
func (w *treeWalk) failed(p string, err error) error {
	if vfs.CodeOf(err) == vfs.CodeRevoked || p == cleanGuest(w.root) {
		return err
	}
	if w.out.More > 0 || len(w.out.Entries) >= w.limit {
		w.out.More++
		return nil
	}
	le := listEntry{Name: relTo(w.root, p), Depth: relDepth(w.root, p), Type: "unreadable"}
	if c := vfs.CodeOf(err); c == vfs.CodePermission || c == vfs.CodeOutside {
		le.Type = "hidden"
	}
	w.out.Entries = append(w.out.Entries, le)
	return nil
}

// writeTreeEntry writes e as a line of the tree, indented by its depth.
func writeTreeEntry(b *strings.Builder, e listEntry) {
	name := esc(path.Base(e.Name))
	if e.Depth == 0 {
		name = esc(e.Name)
	}
	ind := indent(e.Depth)
	switch e.Type {
	case "directory":
		fmt.Fprintf(b, "%s%s/\n", ind, name)
	case "symlink":
		fmt.Fprintf(b, "%s%s -> %s\n", ind, name, esc(e.Target))
	case "file":
		fmt.Fprintf(b, "%s%s (%d bytes)\n", ind, name, e.Size)
	case "hidden":
		fmt.Fprintf(b, "%s%s (hidden: refused by the policy)\n", ind, name)
	case "unreadable":
		fmt.Fprintf(b, "%s%s (unreadable)\n", ind, name)
	case "unaddressable":
		fmt.Fprintf(b, "%s%s (cannot be addressed: %s)\n", ind, name, e.Reason)
	default:
		fmt.Fprintf(b, "%s%s (special)\n", ind, name)
	}
}

func indent(n int) string { return strings.Repeat("  ", n) }
