package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/capfs/capfs/vfs/vfstest"
)

func TestSnapshotRestore(t *testing.T) {
	f, name := newFS(t, WithChunkSize(64<<10))
	must(t, f.Mkdir(bg, P("d"), 0o755))
	must(t, vfstest.WriteFile(bg, f, P("d/a"), make([]byte, 200_000)))
	must(t, f.Symlink(bg, "d/a", P("link")))
	want := snapshotTree(t, f)
	snap := filepath.Join(t.TempDir(), "snap.db")
	must(t, f.Snapshot(bg, snap))
	if err := f.Snapshot(bg, snap); !errors.Is(err, os.ErrExist) {
		t.Fatalf("snapshot over an existing file: %v", err)
	}
	// Change everything after the snapshot.
	must(t, vfstest.WriteFile(bg, f, P("d/a"), []byte("changed")))
	must(t, f.Remove(bg, P("link")))
	must(t, vfstest.WriteFile(bg, f, P("new"), []byte("new")))

	// The snapshot opens on its own, as of the call.
	s, err := Open(snap, WithReadOnly())
	must(t, err)
	if got := snapshotTree(t, s); !slices.Equal(got, want) {
		t.Fatalf("snapshot:\n%v\nwant\n%v", got, want)
	}
	must(t, s.Close())

	if err := Restore(snap, name); !errors.Is(err, ErrLocked) {
		t.Fatalf("restore over an open file: %v, want ErrLocked", err)
	}
	must(t, f.Close())
	must(t, Restore(snap, name))
	g, err := Open(name)
	must(t, err)
	defer g.Close()
	if got := snapshotTree(t, g); !slices.Equal(got, want) {
		t.Fatalf("restored:\n%v\nwant\n%v", got, want)
	}
	// A foreign file is not restored.
	junk := filepath.Join(t.TempDir(), "junk")
	must(t, os.WriteFile(junk, []byte("not a database at all, not at all"), 0o600))
	if err := Restore(junk, name); !errors.Is(err, ErrForeign) {
		t.Fatalf("restore from junk: %v, want ErrForeign", err)
	}
}

// TestSnapshotConcurrent takes snapshots while writers run: each is a
// consistent file holding whole operations.
func TestSnapshotConcurrent(t *testing.T) {
	f, _ := newFS(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := []byte(fmt.Sprintf("%d-%d-%s", w, i, make([]byte, 3000)))
				if err := vfstest.WriteFile(bg, f, P(fmt.Sprintf("w%d-%d", w, i%20)), data); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	dir := t.TempDir()
	for i := range 3 {
		snap := filepath.Join(dir, fmt.Sprintf("s%d.db", i))
		must(t, f.Snapshot(bg, snap))
		s, err := Open(snap, WithReadOnly())
		must(t, err)
		snapshotTree(t, s)
		s.Close()
	}
	close(stop)
	wg.Wait()
}

// TestReadOnlyPinned: a read-only FS opened beside a writer keeps seeing the
// file as of its Open, metadata and data alike.
func TestReadOnlyPinned(t *testing.T) {
	f, name := newFS(t, WithChunkSize(64<<10))
	v1 := bytes.Repeat([]byte("1"), 150_000)
	must(t, f.WriteFile(bg, P("a"), v1, 0o644))
	ro, err := Open(name, WithReadOnly())
	must(t, err)
	defer ro.Close()
	must(t, f.WriteFile(bg, P("a"), bytes.Repeat([]byte("2"), 100_000), 0o644))
	must(t, f.WriteFile(bg, P("b"), []byte("new"), 0o644))
	must(t, f.Sync())
	got, err := vfstest.ReadFile(bg, ro, P("a"))
	if err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("read-only view of a: %d bytes (%q...), %v", len(got), got[:min(len(got), 4)], err)
	}
	if _, err := ro.Stat(bg, P("b")); err == nil {
		t.Fatal("the read-only view sees a file created after its Open")
	}
	// The writer closes while the view holds its snapshot: not an error (the
	// WAL the view holds stays for the next Open to fold in).
	must(t, f.Close())
	g, err := Open(name)
	must(t, err)
	defer g.Close()
	if got, _ := vfstest.ReadFile(bg, g, P("b")); string(got) != "new" {
		t.Fatalf("after reopen: b = %q", got)
	}
}
