//go:build linux

package materialize_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// manyDirs fills d with n directories, each holding a file and a subdirectory
// holding another, plus swap/keep.go.
func manyDirs(t *testing.T, d *dir.Dir, n int) {
	t.Helper()
	for i := range n {
		must(t, d.MkdirAll(ctx, fmt.Sprintf("p%02d/s", i)))
		must(t, d.WriteFile(ctx, fmt.Sprintf("p%02d/x.go", i), []byte("x"), 0o644))
		must(t, d.WriteFile(ctx, fmt.Sprintf("p%02d/s/y.go", i), []byte("y"), 0o644))
	}
	must(t, d.MkdirAll(ctx, "swap"))
	must(t, d.WriteFile(ctx, "swap/keep.go", []byte("keep"), 0o644))
}

// TestDiffConcurrentSwapStaysInside runs Diff over a checkout of many directories
// in which the sandbox planted links to an outside directory (absolute and
// escaping relative ones) and FIFOs, while a directory is swapped, over and
// over, with a link to the outside. inotify on the outside directory proves that
// nothing there is opened or read; every Diff either fails cleanly or reports
// only what is in the checkout; the last one, after the swapping, is exact.
func TestDiffConcurrentSwapStaysInside(t *testing.T) {
	const dirs = 40
	d, _ := dir.New(memory.New())
	manyDirs(t, d, dirs)
	tr := checkout(t, d, materialize.Options{})
	root := tr.Path()
	outside := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(outside, "inner"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "inner", "secret2"), []byte("host"), 0o644))
	// what the sandbox planted, and the Diff it makes
	want := map[string]string{}
	for i := range dirs {
		p := filepath.Join(root, fmt.Sprintf("p%02d", i))
		must(t, os.Symlink(outside, filepath.Join(p, "out")))
		must(t, os.Symlink("../../../../..", filepath.Join(p, "up")))
		must(t, os.Symlink(filepath.Join(outside, "inner"), filepath.Join(p, "s", "in")))
		must(t, unix.Mkfifo(filepath.Join(p, "fifo"), 0o644))
		rel := fmt.Sprintf("p%02d/", i)
		want[rel+"out"] = "added l " + outside
		want[rel+"up"] = "added l ../../../../.."
		want[rel+"s/in"] = "added l " + filepath.Join(outside, "inner")
		want[rel+"fifo"] = "added p "
	}
	must(t, os.Symlink(outside, filepath.Join(root, "alt")))
	want["alt"] = "added l " + outside
	describe := func(c materialize.Change) string {
		typ := "-"
		if c.New != nil {
			switch c.New.Type {
			case 0:
				typ = "f"
			case fs.ModeDir:
				typ = "d"
			case fs.ModeSymlink:
				typ = "l"
			case fs.ModeNamedPipe:
				typ = "p"
			default:
				typ = c.New.Type.String()
			}
			typ += " " + c.New.Target
		}
		return string(c.Kind) + " " + typ
	}

	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	must(t, err)
	defer unix.Close(in)
	for _, p := range []string{outside, filepath.Join(outside, "inner")} {
		if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN|unix.IN_ACCESS); err != nil {
			t.Fatal(err)
		}
	}

	// swap and alt trade places (a directory, a link out) until stopped.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	swaps := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "swap"), unix.AT_FDCWD, filepath.Join(root, "alt"), unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			swaps++
		}
	}()
	for range 30 {
		cs, err := tr.Diff(ctx)
		if err != nil {
			// A race the walk lost (a link read as it became a directory) fails
			// cleanly, naming no host path.
			var ve *vfs.Error
			if !errors.As(err, &ve) || strings.Contains(err.Error(), root) || strings.Contains(err.Error(), outside) {
				t.Fatalf("Diff during swaps: %v", err)
			}
			continue
		}
		for _, c := range cs {
			switch {
			case strings.Contains(c.Path, "secret"):
				t.Fatalf("walked outside: %s", c.Path)
			case want[c.Path] != "" && describe(c) != want[c.Path] && c.Path != "alt":
				t.Fatalf("%s: %s, want %s", c.Path, describe(c), want[c.Path])
			case c.Path == "swap" || c.Path == "alt" || c.Path == "swap/keep.go" || c.Path == "alt/keep.go" || want[c.Path] != "":
			default:
				t.Fatalf("unexpected change %s: %s", c.Path, describe(c))
			}
		}
	}
	close(stop)
	wg.Wait()
	if swaps%2 == 1 {
		must(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "swap"), unix.AT_FDCWD, filepath.Join(root, "alt"), unix.RENAME_EXCHANGE))
	}
	cs, err := tr.Diff(ctx)
	must(t, err)
	got := map[string]string{}
	for _, c := range cs {
		got[c.Path] = describe(c)
	}
	sameMap(t, got, want)

	buf := make([]byte, 4096)
	if n, err := unix.Read(in, buf); err != unix.EAGAIN {
		t.Fatalf("something opened or read the outside directory (%d bytes of inotify events, %v)", n, err)
	}
}

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	return len(ents)
}

// TestDiffClosesDescriptors checks that a Diff, a canceled one and a scan
// stopped by a limit leave no descriptor open.
func TestDiffClosesDescriptors(t *testing.T) {
	d, _ := dir.New(memory.New())
	manyDirs(t, d, 150) // more than 256 entries: the scan looks at ctx
	tr := checkout(t, d, materialize.Options{})
	root := tr.Path()
	for i := range 150 {
		must(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("p%02d/s/new.go", i)), []byte("new"), 0o644))
		must(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("p%02d/x.go", i)), []byte("changed"), 0o644))
	}
	if _, err := tr.Diff(ctx); err != nil { // warm up whatever the runtime opens once
		t.Fatal(err)
	}
	before := openFds(t)
	cs, err := tr.Diff(ctx)
	if err != nil || len(cs) != 300 {
		t.Fatalf("Diff: %d changes, %v", len(cs), err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tr.Diff(canceled); vfs.CodeOf(err) != vfs.CodeCanceled {
		t.Fatalf("canceled Diff: %v", err)
	}
	rep, err := syncback.Run(ctx, tr, syncback.Options{DryRun: true, Limits: materialize.Limits{MaxFiles: 3}})
	if vfs.CodeOf(err) != vfs.CodeQuota || len(rep.Refused) != 1 {
		t.Fatalf("SyncBack over the limit: %v", err)
	}
	if after := openFds(t); after != before {
		t.Fatalf("open descriptors: %d before, %d after", before, after)
	}
}
