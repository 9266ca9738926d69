package memory

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

// sameAsInfo reports how fi differs from what Stat's info, renamed name, shows
// through fs.FileInfo; "" if it does not.
func sameAsInfo(fi fs.FileInfo, info vfs.Info, name string) string {
	switch {
	case fi.Name() != name:
		return "name " + fi.Name()
	case fi.Size() != info.Size:
		return "size"
	case fi.Mode() != info.Mode:
		return "mode " + fi.Mode().String()
	case fi.ModTime() != info.ModTime:
		return "modification time " + fi.ModTime().String()
	case fi.IsDir() != info.Mode.IsDir():
		return "IsDir"
	case fi.Sys() != nil:
		return "Sys"
	}
	return ""
}

// TestStatFileInfoMatchesStat checks StatFileInfo against Stat and Lstat on
// random trees of directories, files, hard links and symlinks (relative,
// climbing, dangling, looping), from the root and from a Sub, with and without a
// trailing slash: the same status under the name asked for, or the same error
// (code, op, path and text).
func TestStatFileInfoMatchesStat(t *testing.T) {
	segs := []string{"a", "b", "c", "l", "a-name-longer-than-twenty-four-bytes"}
	targets := []string{"a", "../a", "b/c", "..", "../../x", "l", "missing", "a/", ".", "c/../a"}
	var found, failed int
	for seed := range uint64(10) {
		r := rand.New(rand.NewPCG(seed, 11))
		m := New()
		randPath := func(maxDepth int) string {
			s := segs[r.IntN(len(segs))]
			for range r.IntN(maxDepth) {
				s += "/" + segs[r.IntN(len(segs))]
			}
			return s
		}
		for range 60 {
			p := P(randPath(4))
			switch r.IntN(5) {
			case 0, 1:
				m.Mkdir(bg, p, 0o755)
			case 2:
				if f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
					f.Write(make([]byte, r.IntN(100)))
					f.Close()
				}
			case 3:
				m.Symlink(bg, targets[r.IntN(len(targets))], p)
			case 4:
				m.Link(bg, P(randPath(4)), p)
			}
		}
		roots := []*FS{m}
		if sb, err := m.Sub(bg, P("a")); err == nil {
			roots = append(roots, sb.(*FS))
		}
		for range 300 {
			s := randPath(6)
			switch r.IntN(8) {
			case 0:
				s += "/"
			case 1:
				s = "."
			}
			p := P(s)
			for _, f := range roots {
				for _, follow := range []bool{false, true} {
					want, werr := f.Lstat(bg, p)
					if follow {
						want, werr = f.Stat(bg, p)
					}
					for _, name := range []string{"", p.Base(), "other", strings.Repeat("n", 40)} {
						fi, err := f.StatFileInfo(bg, p, follow, name)
						if name == "" {
							name = want.Name // Stat's own name
						}
						if werr != nil {
							failed++
							var we, ge *vfs.Error
							if !errors.As(werr, &we) || !errors.As(err, &ge) || *we != *ge || fi != nil {
								t.Fatalf("seed %d: StatFileInfo(%q, follow=%v) = %v, %v; Stat's error %v", seed, s, follow, fi, err, werr)
							}
							continue
						}
						found++
						if err != nil {
							t.Fatalf("seed %d: StatFileInfo(%q, follow=%v): %v; Stat: %+v", seed, s, follow, err, want)
						}
						if d := sameAsInfo(fi, want, name); d != "" {
							t.Fatalf("seed %d: StatFileInfo(%q, follow=%v, %q): %s differs from Stat's %+v", seed, s, follow, name, d, want)
						}
					}
				}
			}
		}
	}
	if found < 1000 || failed < 1000 {
		t.Fatalf("%d statuses and %d errors compared: the trees exercise too little", found, failed)
	}
}

// TestStatFileInfoSnapshot checks that a status is a snapshot: a change to the
// file (data, mode, time, a new name) never alters one already returned, the
// next call shows the change, and while nothing changes the same status comes
// back without allocating.
func TestStatFileInfoSnapshot(t *testing.T) {
	m := New(WithClock(fakeClock()))
	p := P("d/file")
	must(t, m.Mkdir(bg, P("d"), 0o755))
	f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()

	stat := func(p vfs.Path, name string) fs.FileInfo {
		t.Helper()
		fi, err := m.StatFileInfo(bg, p, true, name)
		must(t, err)
		info, err := m.Stat(bg, p)
		must(t, err)
		if d := sameAsInfo(fi, info, name); d != "" {
			t.Fatalf("StatFileInfo(%s): %s differs from Stat's %+v", p, d, info)
		}
		return fi
	}
	type shown struct {
		name string
		size int64
		mode fs.FileMode
		mod  time.Time
	}
	show := func(fi fs.FileInfo) shown { return shown{fi.Name(), fi.Size(), fi.Mode(), fi.ModTime()} }

	first := stat(p, "file")
	was := show(first)
	if again := stat(p, "file"); again != first {
		t.Fatalf("an unchanged file gave a new status")
	}
	if !raceEnabled {
		if n := testing.AllocsPerRun(100, func() { m.StatFileInfo(bg, p, true, "file") }); n != 0 {
			t.Fatalf("StatFileInfo of an unchanged file: %v allocations, want 0", n)
		}
	}
	var all []fs.FileInfo
	for _, change := range []struct {
		name string
		do   func() error
	}{
		{"write", func() error { _, err := f.Write([]byte("data")); return err }},
		{"chmod", func() error { return m.Chmod(bg, p, 0o600) }},
		{"chtimes", func() error { return m.Chtimes(bg, p, time.Time{}, time.Unix(1e9, 5)) }},
		{"truncate to the same size", func() error { return f.Truncate(4) }},
	} {
		must(t, change.do())
		fi := stat(p, "file")
		if fi == first || show(fi) == was {
			t.Errorf("after %s: the status did not change", change.name)
		}
		if show(first) != was {
			t.Fatalf("after %s: a status already returned changed from %+v to %+v", change.name, was, show(first))
		}
		first, was = fi, show(fi)
		all = append(all, fi)
	}
	// Another name for the node: each name gets its own status, and the first
	// is still right.
	must(t, m.Link(bg, p, P("a-second-name-longer-than-24-bytes")))
	other := stat(P("a-second-name-longer-than-24-bytes"), "a-second-name-longer-than-24-bytes")
	if other.Name() != "a-second-name-longer-than-24-bytes" {
		t.Fatalf("hard link's status named %q", other.Name())
	}
	stat(p, "file")
	// The root and a symlink followed: named as asked.
	must(t, m.Symlink(bg, "d/file", P("link")))
	if fi := stat(P("link"), "link"); fi.Mode().Type() != 0 || fi.Size() != 4 {
		t.Fatalf("followed link: %v", fi)
	}
	if fi := stat(vfs.Root, "."); !fi.IsDir() {
		t.Fatalf("root: %v", fi)
	}
	if got := len(all); got != 4 || show(all[0]) == show(all[3]) {
		t.Fatalf("statuses: %v", all)
	}
}

// TestStatFileInfoRaces has a writer append one byte at a time (each write
// moves the clock one second) and change the mode, while readers take
// statuses: every status is one consistent state (size and time agree, the
// mode is one the writer set) and never changes after it is returned.
func TestStatFileInfoRaces(t *testing.T) {
	var tick atomic.Int64
	base := time.Unix(1_700_000_000, 0)
	m := New(WithClock(func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }))
	p := P("f")
	f, err := m.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	defer f.Close()
	fi0, err := m.StatFileInfo(bg, p, true, "f")
	must(t, err)
	t0 := fi0.ModTime()

	const writes, readers = 20000, 2
	var wg, started sync.WaitGroup
	started.Add(readers)
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		started.Wait() // the readers are running
		for i := range writes {
			if _, err := f.Write([]byte{'x'}); err != nil {
				t.Error(err)
				return
			}
			if i%7 == 0 {
				m.Chmod(bg, p, fs.FileMode(0o600+i%2*0o44))
			}
		}
	})
	for range readers {
		wg.Go(func() {
			started.Done()
			var kept []fs.FileInfo
			var sizes []int64
			for {
				select {
				case <-done:
					for i, fi := range kept {
						if fi.Size() != sizes[i] || fi.ModTime().Sub(t0) != time.Duration(sizes[i])*time.Second {
							t.Errorf("a returned status changed: size %d, was %d", fi.Size(), sizes[i])
							return
						}
					}
					return
				default:
				}
				fi, err := m.StatFileInfo(bg, p, true, "f")
				if err != nil {
					t.Error(err)
					return
				}
				if d := fi.ModTime().Sub(t0); d != time.Duration(fi.Size())*time.Second {
					t.Errorf("torn status: size %d with time +%v", fi.Size(), d)
					return
				}
				if m := fi.Mode(); m != 0o644 && m != 0o600 {
					t.Errorf("torn status: mode %v", m)
					return
				}
				if len(kept) < 1000 {
					kept, sizes = append(kept, fi), append(sizes, fi.Size())
				}
			}
		})
	}
	wg.Wait()
	if fi, err := m.StatFileInfo(bg, p, true, "f"); err != nil || fi.Size() != writes {
		t.Fatalf("final status %v, %v", fi, err)
	}
}
