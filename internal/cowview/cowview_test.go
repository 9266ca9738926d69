package cowview

import (
	"context"
	"io"
	"io/fs"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// ent is an entry of the fake lower tree: a directory (kids), a symlink
// (target) or a file (data). The zero *ent is no directory.
type ent struct {
	typ    fs.FileMode
	kids   map[string]*ent
	data   string
	target string
}

type fakeLower struct{}

func (fakeLower) Entries(_ context.Context, lo *ent) ([]string, []*ent, error) {
	if lo == nil {
		return nil, nil, nil
	}
	names := make([]string, 0, len(lo.kids))
	for n := range lo.kids {
		names = append(names, n)
	}
	sort.Strings(names)
	nodes := make([]*ent, len(names))
	for i, n := range names {
		nodes[i] = lo.kids[n]
	}
	return names, nodes, nil
}

func (fakeLower) Type(lo *ent) fs.FileMode       { return lo.typ }
func (fakeLower) Target(lo *ent) (string, error) { return lo.target, nil }

var baseTime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func (fakeLower) Info(_ string, _ vfs.Path, lo *ent, name string) (vfs.Info, error) {
	if name == "" {
		name = "."
	}
	i := vfs.Info{Name: name, ModTime: baseTime, Nlink: 1, Mode: lo.typ | 0o644, Size: int64(len(lo.data))}
	switch lo.typ {
	case fs.ModeDir:
		i.Mode, i.Size = fs.ModeDir|0o755, 0
	case fs.ModeSymlink:
		i.Mode, i.Size = fs.ModeSymlink|0o777, int64(len(lo.target))
	}
	return i, nil
}

func (l fakeLower) Open(_ context.Context, op string, p vfs.Path, lo *ent, name string) (vfs.File, error) {
	i, _ := l.Info(op, p, lo, name)
	return rofile.NewData(p, i, []byte(lo.data), "lower tree is read-only"), nil
}

func (fakeLower) CopyPerm(*ent) fs.FileMode { return 0o644 }

func (fakeLower) CopyData(_ context.Context, _ string, _ vfs.Path, lo *ent, w io.Writer) error {
	_, err := io.WriteString(w, lo.data)
	return err
}

func (fakeLower) Materialized(*Node[*ent])                         {}
func (fakeLower) DirSys(*Node[*ent]) any                           { return nil }
func (fakeLower) LookupErr(err error) error                        { return err }
func (fakeLower) ResolveErr(err error, _ string, _ vfs.Path) error { return err }
func (fakeLower) LowerErr(op string, p vfs.Path, err error) error  { return vfs.Errno(op, p, err) }

func lowerTree() *ent {
	return &ent{typ: fs.ModeDir, kids: map[string]*ent{
		"a.txt": {data: "alpha"},
		"d": {typ: fs.ModeDir, kids: map[string]*ent{
			"b.txt": {data: "beta"},
			"e":     {typ: fs.ModeDir, kids: map[string]*ent{"c.txt": {data: "gamma"}}},
		}},
		"l": {typ: fs.ModeSymlink, target: "a.txt"},
	}}
}

func newView(links bool, root *ent) (*Tree[*ent], *View[*ent]) {
	cfg := Config{Store: memory.New(), InoPrefix: "t", BaseTime: baseTime, Links: links, NoLinks: "no links here"}
	return New[*ent](fakeLower{}, cfg, root)
}

// The view passes the shared backend suite over an empty lower tree, with and
// without hard links.
func TestConformance(t *testing.T) {
	for _, links := range []bool{false, true} {
		t.Run(map[bool]string{false: "symlinks-in-nodes", true: "links"}[links], func(t *testing.T) {
			// The suite skips the hard-link cases when Features says so.
			vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
				_, v := newView(links, &ent{typ: fs.ModeDir})
				return v
			}})
		})
	}
}

// Writes, removals and renames show in the view and leave the lower tree as it
// was; a whiteout hides a lower entry, a lazy rename keeps the lower subtree.
func TestCopyOnWrite(t *testing.T) {
	ctx := context.Background()
	lower := lowerTree()
	tr, v := newView(false, lower)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := vfs.MustParse
	must(vfstest.WriteFile(ctx, v, p("d/b.txt"), []byte("BETA")))
	must(v.Remove(ctx, p("a.txt")))
	must(v.Rename(ctx, p("d/e"), p("moved"), 0))
	if got, err := vfstest.ReadFile(ctx, v, p("d/b.txt")); err != nil || string(got) != "BETA" {
		t.Fatalf("d/b.txt = %q, %v", got, err)
	}
	if _, err := v.Stat(ctx, p("a.txt")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("removed a.txt: %v", err)
	}
	if _, err := v.Stat(ctx, p("l")); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("l follows to the removed a.txt: %v", err)
	}
	if got, err := vfstest.ReadFile(ctx, v, p("moved/c.txt")); err != nil || string(got) != "gamma" {
		t.Fatalf("moved/c.txt = %q, %v", got, err)
	}
	ents, err := v.ReadDir(ctx, vfs.Root)
	must(err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if want := "[d l moved]"; fmtNames(names) != want {
		t.Fatalf("root lists %v, want %s", names, want)
	}
	// The lower tree is untouched, and the moved directory still overlays it.
	if lower.kids["a.txt"].data != "alpha" || lower.kids["d"].kids["b.txt"].data != "beta" || lower.kids["d"].kids["e"] == nil {
		t.Fatal("the lower tree changed")
	}
	root := tr.Root()
	if m := root.Ents["moved"]; m == nil || m.Lo != lower.kids["d"].kids["e"] || len(m.Ents) != 0 {
		t.Fatalf("moved is not a lazy reference to the lower directory: %+v", m)
	}
	if _, ok := root.White["a.txt"]; !ok {
		t.Fatal("no whiteout for a.txt")
	}
	if err := v.Link(ctx, p("d/b.txt"), p("x")); vfs.CodeOf(err) != vfs.CodeNotSupported {
		t.Fatalf("Link without Config.Links: %v", err)
	}
}

// With Links, a lower file linked is copied up first and both names share one
// store entry; renaming one link over the other does nothing, as POSIX says.
func TestLinks(t *testing.T) {
	ctx := context.Background()
	_, v := newView(true, lowerTree())
	p := vfs.MustParse
	if err := v.Link(ctx, p("a.txt"), p("b")); err != nil {
		t.Fatal(err)
	}
	if err := v.Rename(ctx, p("a.txt"), p("b"), 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.txt", "b"} {
		i, err := v.Stat(ctx, p(n))
		if err != nil || i.Nlink != 2 {
			t.Fatalf("%s: %+v, %v", n, i, err)
		}
	}
	f, err := v.OpenFile(ctx, p("b"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("shared")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := vfstest.ReadFile(ctx, v, p("a.txt")); err != nil || string(got) != "shared" {
		t.Fatalf("a.txt = %q, %v", got, err)
	}
}

func fmtNames(n []string) string {
	s := "["
	for i, x := range n {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s + "]"
}
