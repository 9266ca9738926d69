package dir_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// collect reads events until want is seen (by path) or the watch ends.
func collect(t *testing.T, w *dir.Watcher, until string) map[string]dir.WatchOp {
	t.Helper()
	got := map[string]dir.WatchOp{}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return got
			}
			got[ev.Path] |= ev.Op
			if ev.Path == until {
				return got
			}
		case <-deadline:
			t.Fatalf("no event for %s; got %v", until, got)
		}
	}
}

func TestWatchFeedHidesPaths(t *testing.T) {
	m := memory.New()
	feed := dir.NewChangeFeed()
	host, _ := dir.New(m, dir.WithHooks(feed))
	guest, _ := dir.New(m, dir.WithHooks(feed), dir.WithPolicy(policy.Defaults()))
	w, err := guest.Watch(bg, dir.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	host.MkdirAll(bg, "home/.ssh")
	host.WriteFile(bg, "home/.ssh/id_rsa", []byte("k"), 0o600)
	host.WriteFile(bg, ".env", []byte("SECRET=1"), 0o600)
	host.WriteFile(bg, "a.txt", []byte("a"), 0o644)
	host.Move(bg, "a.txt", "b.txt")
	host.WriteFile(bg, "done", nil, 0o644)
	got := collect(t, w, "done")
	for p := range got {
		if p == ".env" || p == "home/.ssh" || p == "home/.ssh/id_rsa" {
			t.Fatalf("hidden path %q in events %v", p, got)
		}
	}
	if got["a.txt"]&dir.WatchWrite == 0 || got["a.txt"]&dir.WatchRename == 0 || got["b.txt"]&dir.WatchCreate == 0 {
		t.Fatalf("events %v", got)
	}
}

func TestWatchPhysicalHidesPaths(t *testing.T) {
	root := t.TempDir()
	b, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	guest, _ := dir.New(b, dir.WithPolicy(policy.Defaults()))
	sub, _ := guest.ReadOnly().Sub(bg, ".")
	os.Mkdir(filepath.Join(root, "src"), 0o755)
	w, err := sub.Watch(bg, dir.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.WriteFile(filepath.Join(root, ".env"), []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(root, "src", ".ssh"), 0o700)
	time.Sleep(50 * time.Millisecond) // let the new directory's watch be added
	os.WriteFile(filepath.Join(root, "src", ".ssh", "id_rsa"), []byte("k"), 0o600)
	os.WriteFile(filepath.Join(root, "src", "main.go"), []byte("package main"), 0o644)
	os.Mkdir(filepath.Join(root, "newdir"), 0o755)
	time.Sleep(50 * time.Millisecond)
	os.WriteFile(filepath.Join(root, "newdir", "f"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "done"), nil, 0o644)
	got := collect(t, w, "done")
	for p := range got {
		if p == ".env" || p == "src/.ssh" || p == "src/.ssh/id_rsa" {
			t.Fatalf("hidden path %q in events %v", p, got)
		}
	}
	if got["src/main.go"]&dir.WatchCreate == 0 || got["newdir"]&dir.WatchCreate == 0 {
		t.Fatalf("events %v", got)
	}
}

// A storm of 100,000 events against a consumer that does not read: memory
// stays bounded by the buffer, and the consumer is told to rescan.
func TestWatchStormBoundedMemory(t *testing.T) {
	feed := dir.NewChangeFeed()
	d, _ := dir.New(memory.New(), dir.WithHooks(feed))
	w, err := d.Watch(bg, dir.WatchOptions{Buffer: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 100_000 {
		feed.After(bg, &policy.Request{Op: policy.OpCreate, Path: fmt.Sprintf("d%03d/file-%06d", i%100, i)}, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Fatalf("heap grew %d bytes under the storm", grew)
	}
	first := <-w.Events()
	if first.Op != dir.WatchRescan {
		t.Fatalf("first event %+v, want a rescan", first)
	}
	n := 1
	for n < 1001 {
		select {
		case <-w.Events():
			n++
			continue
		case <-time.After(500 * time.Millisecond):
		}
		break
	}
	if n > 1001 {
		t.Fatalf("%d events delivered from a buffer of 1000", n)
	}
}

func TestWatchEndsOnRevoke(t *testing.T) {
	feed := dir.NewChangeFeed()
	d, ctl := dir.New(memory.New(), dir.WithHooks(feed))
	w, err := d.Watch(bg, dir.WatchOptions{Patterns: []string{"**/*.go"}})
	if err != nil {
		t.Fatal(err)
	}
	d.WriteFile(bg, "x.txt", nil, 0o644)
	d.WriteFile(bg, "a/b.go", nil, 0o644)
	d.MkdirAll(bg, "a")
	d.WriteFile(bg, "a/b.go", nil, 0o644)
	if ev := <-w.Events(); ev.Path != "a/b.go" {
		t.Fatalf("pattern: %+v", ev)
	}
	ctl.Revoke()
	for range w.Events() {
	}
	if vfs.CodeOf(w.Err()) != vfs.CodeRevoked {
		t.Fatalf("Err = %v", w.Err())
	}
	if _, err := d.Watch(bg, dir.WatchOptions{}); vfs.CodeOf(err) != vfs.CodeRevoked {
		t.Fatalf("Watch after revoke: %v", err)
	}
}

func TestWatchNotSupported(t *testing.T) {
	d, _ := dir.New(memory.New())
	if _, err := d.Watch(bg, dir.WatchOptions{}); vfs.CodeOf(err) != vfs.CodeNotSupported {
		t.Fatalf("err = %v", err)
	}
}
