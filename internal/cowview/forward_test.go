package cowview

import (
	"context"
	"io"
	"io/fs"
	"os"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// bent is an entry of a Backend seen as a Lower (backendLower); nil is no
// directory.
type bent struct {
	p   vfs.Path
	typ fs.FileMode
}

// backendLower is a vfs.Backend as the lower tree of a View, so that the
// vfstest forwarding checks, which wrap a Backend, can run over a View.
type backendLower struct{ b vfs.Backend }

func (l backendLower) Entries(ctx context.Context, lo *bent) ([]string, []*bent, error) {
	if lo == nil {
		return nil, nil, nil
	}
	ents, err := l.b.ReadDir(ctx, lo.p)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(ents))
	nodes := make([]*bent, len(ents))
	for i, e := range ents {
		c, err := lo.p.Child(e.Name)
		if err != nil {
			return nil, nil, err
		}
		names[i], nodes[i] = e.Name, &bent{p: c, typ: e.Type}
	}
	return names, nodes, nil
}

func (backendLower) Type(lo *bent) fs.FileMode { return lo.typ }

func (l backendLower) Target(lo *bent) (string, error) {
	return l.b.Readlink(context.Background(), lo.p)
}

func (l backendLower) Info(op string, p vfs.Path, lo *bent, name string) (vfs.Info, error) {
	i, err := l.b.Lstat(context.Background(), lo.p)
	if err != nil {
		return vfs.Info{}, vfs.Readdress(err, op, p.String(), "")
	}
	if name == "" {
		name = "."
	}
	i.Name = name
	return i, nil
}

func (l backendLower) Open(ctx context.Context, op string, p vfs.Path, lo *bent, name string) (vfs.File, error) {
	f, err := l.b.OpenFile(ctx, lo.p, os.O_RDONLY, 0)
	if err != nil {
		return nil, vfs.Readdress(err, op, p.String(), "")
	}
	return f, nil
}

func (backendLower) CopyPerm(*bent) fs.FileMode { return 0o644 }

func (l backendLower) CopyData(ctx context.Context, op string, p vfs.Path, lo *bent, w io.Writer) error {
	f, err := l.b.OpenFile(ctx, lo.p, os.O_RDONLY, 0)
	if err != nil {
		return vfs.Readdress(err, op, p.String(), "")
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func (backendLower) Materialized(*Node[*bent])                        {}
func (backendLower) DirSys(*Node[*bent]) any                          { return nil }
func (backendLower) LookupErr(err error) error                        { return err }
func (backendLower) ResolveErr(err error, _ string, _ vfs.Path) error { return err }
func (backendLower) LowerErr(op string, p vfs.Path, err error) error  { return vfs.Errno(op, p, err) }

// viewOver returns a View whose lower tree is b.
func viewOver(b vfs.Backend) vfs.Backend {
	cfg := Config{Store: memory.New(), InoPrefix: "t", BaseTime: baseTime, Links: true}
	_, v := New[*bent](backendLower{b}, cfg, &bent{p: vfs.Root, typ: fs.ModeDir})
	return v
}

// viewForwarding is what a View does with the optional interfaces. A View
// is two layers over a Lower (a git or CAS tree), not a wrapper of a
// Backend: it forwards none of the Backend interfaces, it answers Lchtimes
// and its Subs Locate themselves, and its files answer TypedFile themselves.
var viewForwarding = vfstest.Forwarding{
	Withheld: map[string]string{
		"StatResolver":     "the lower is a Lower, not a Backend: the view resolves in memory, one lookup per component",
		"OpenResolver":     "as StatResolver",
		"ListResolver":     "as StatResolver",
		"DirInfoReader":    "as StatResolver",
		"HostPather":       "the upper is in memory",
		"HostLinkResolver": "the lower is no host directory",
		"Locator":          "a View's root is the overlay's root; its Subs locate",
		"Chowner":          "the view keeps no ownership",
		"StatFSer":         "the upper is in memory and the lower is no storage: the view has no capacity to report",
		"OpenStater":       "neither the memory store's nor the lower trees' files (rofile) record a status at open",
		"hostfd.Filer":     "neither the memory store's nor the lower trees' files are host files",
		"AttrFile":         "a directory's handle is the store's root and a lower file's is the lower tree's (read, never written): fchmod through either would change the wrong object, or none",
	},
	Own: map[string]string{
		"TypedFile": "a view's file knows whether it is a directory",
		"LinkTimer": "the view keeps its entries' times itself",
	},
	Sub: &vfstest.Forwarding{
		Withheld: map[string]string{
			"StatResolver":     "as the view's",
			"OpenResolver":     "as the view's",
			"ListResolver":     "as the view's",
			"DirInfoReader":    "as the view's",
			"HostPather":       "as the view's",
			"HostLinkResolver": "as the view's",
			"Chowner":          "as the view's",
			"StatFSer":         "as the view's",
			"OpenStater":       "as the view's",
			"hostfd.Filer":     "as the view's",
			"AttrFile":         "as the view's",
		},
		Own: map[string]string{
			"Locator":   "the Sub finds its root in the view's tree",
			"TypedFile": "as the view's",
			"LinkTimer": "as the view's",
		},
	},
}

// A View claims only what it answers itself (its Subs' Locator, its files'
// TypedFile), and that works over any lower.
func TestViewForwarding(t *testing.T) {
	vfstest.CheckForwards(t, memory.New(), viewOver, viewForwarding)
}

func TestViewClaimsOnlyWhatWorks(t *testing.T) {
	vfstest.CheckClaims(t, memory.New(), viewOver)
}
