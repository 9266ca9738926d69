//go:build linux

package vfs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// A host file opened through a Namespace mount below its root keeps its
// host descriptor (for FUSE passthrough, as the run's tool mount serves
// physical caches), and its errors name the namespace path.
func TestNamespaceFileKeepsHostFd(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	n := vfs.NewNamespace()
	if err := n.Mount(vfs.MustParse("cache"), fs, vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := n.OpenFile(context.Background(), vfs.MustParse("cache/f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fd, ok := hostfd.Of(f); !ok || fd < 0 {
		t.Errorf("hostfd.Of(namespace file %T) = %d, %v; want the physical file's descriptor", f, fd, ok)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); vfs.CodeOf(err) != vfs.CodeClosed || err.(*vfs.Error).Path != "cache/f" {
		t.Errorf("Sync after Close: %v, want closed on cache/f", err)
	}
}
