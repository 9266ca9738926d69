//go:build linux

package dir_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// countingFS is a physical backend counting the lookups a listing makes.
type countingFS struct {
	*physical.FS
	n *lookups
}

type lookups struct{ resolves, readdirs, fused atomic.Int64 }

func (c countingFS) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	c.n.resolves.Add(1)
	return c.FS.Resolve(ctx, p, follow)
}

func (c countingFS) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	c.n.readdirs.Add(1)
	return c.FS.ReadDir(ctx, p)
}

func (c countingFS) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	c.n.fused.Add(1)
	return c.FS.ResolveReadDir(ctx, p, decide)
}

func (c countingFS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	s, err := c.FS.Sub(ctx, p)
	if err != nil {
		return nil, err
	}
	return countingFS{FS: s.(*physical.FS), n: c.n}, nil
}

// A read-only or Sub'd physical Dir lists with the one fused lookup an
// unwrapped one makes, not a Resolve and a ReadDir (issue 28: the wrappers
// hid vfs.ListResolver).
func TestWrappedPhysicalListsInOneLookup(t *testing.T) {
	wraps := map[string]func(t *testing.T, b vfs.Backend) vfs.Backend{
		"bare":     func(t *testing.T, b vfs.Backend) vfs.Backend { return b },
		"ReadOnly": func(t *testing.T, b vfs.Backend) vfs.Backend { return vfs.ReadOnly(b) },
		"Namespace.Sub": func(t *testing.T, b vfs.Backend) vfs.Backend {
			n := vfs.NewNamespace()
			must(t, n.Mount(vfs.MustParse("m"), b, vfs.MountOptions{}))
			s, err := n.Sub(bg, vfs.MustParse("m"))
			must(t, err)
			return s
		},
	}
	for name, wrap := range wraps {
		t.Run(name, func(t *testing.T) {
			fs, err := physical.New(t.TempDir())
			must(t, err)
			t.Cleanup(func() { fs.Close() })
			must(t, fs.Mkdir(bg, vfs.MustParse("d"), 0o755))
			c := countingFS{FS: fs, n: &lookups{}}
			d, _ := dir.New(wrap(t, c), dir.WithPolicy(secretPolicy(t)))
			if _, err := d.ReadDir(bg, "d"); err != nil {
				t.Fatal(err)
			}
			if r, l, f := c.n.resolves.Load(), c.n.readdirs.Load(), c.n.fused.Load(); r != 0 || l != 0 || f != 1 {
				t.Errorf("ReadDir(d): %d Resolve, %d ReadDir, %d ResolveReadDir; want one ResolveReadDir only", r, l, f)
			}
		})
	}
}
