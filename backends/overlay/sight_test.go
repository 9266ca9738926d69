package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// countingLower counts the lower's Lstat and OpenFile calls.
type countingLower struct {
	vfs.Backend
	lstats, opens atomic.Int64
}

func (c *countingLower) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	c.lstats.Add(1)
	return c.Backend.Lstat(ctx, p)
}

func (c *countingLower) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	c.opens.Add(1)
	return c.Backend.OpenFile(ctx, p, flag, perm)
}

// sightOverlay is an Overlay over a physical directory holding files (name:
// contents), the directory, and the counting lower.
func sightOverlay(t *testing.T, files map[string]string) (*Overlay, string, *countingLower) {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	lower := &countingLower{Backend: pb}
	ov, err := NewOverlay(lower, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	return ov, root, lower
}

// vp is guest path s, which must be valid.
func vp(s string) vfs.Path {
	p, err := vfs.ParseGuest(s)
	if err != nil {
		panic(err)
	}
	return p
}

func digestOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// trustStat makes every status trusted (no hashing at sight) for the test.
func trustStat(t *testing.T) {
	old := sightRacy
	sightRacy = -time.Hour
	t.Cleanup(func() { sightRacy = old })
}

// TestSightBase: the Base of a file the host changed between the process's
// first lookup and its first write is the file as looked up: with a trusted
// status, its size and time with the contents unknown (a conflict at
// sync-back); with a racy one (hashed at sight), the contents seen, even
// when the host's edit kept the size. A later lookup does not move the
// sight; a file the host did not change gets the contents read at copy-up.
func TestSightBase(t *testing.T) {
	cases := []struct {
		name       string
		trust      bool
		edit       string // the host's edit between lookup and write ("": none)
		wantDigest string
		wantSize   int64
	}{
		{"trusted/unchanged", true, "", digestOf("base\n"), 5},
		{"trusted/edited", true, "host edit, longer\n", "", 5},
		{"racy/unchanged", false, "", digestOf("base\n"), 5},
		{"racy/edited-same-size", false, "HOST\n", digestOf("base\n"), 5},
		{"racy/edited", false, "host edit, longer\n", digestOf("base\n"), 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.trust {
				trustStat(t)
			}
			ov, root, _ := sightOverlay(t, map[string]string{"conf": "base\n"})
			before, err := ov.Lstat(bg, vp("conf"))
			if err != nil {
				t.Fatal(err)
			}
			if c.edit != "" {
				if err := os.WriteFile(filepath.Join(root, "conf"), []byte(c.edit), 0o644); err != nil {
					t.Fatal(err)
				}
				ov.Lstat(bg, vp("conf")) // seen again: the first sight stays
			}
			f, err := ov.OpenFile(bg, vp("conf"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			b := ov.Bases()["conf"]
			if b.Digest != c.wantDigest || b.Size != c.wantSize || !b.ModTime.Equal(before.ModTime) || b.Type != 0 || b.Mode != 0o644 {
				t.Errorf("base %+v; want digest %q, size %d, time %v, mode 0644", b, c.wantDigest, c.wantSize, before.ModTime)
			}
		})
	}
}

// TestSightCalls: a first lookup of a file whose status is trusted makes
// the one lower Lstat it made before (no call is added); a racy one is
// hashed once (one open), not at later lookups. On a backend without change
// times (memory), a file last modified long ago is trusted, a fresh one
// hashed.
func TestSightCalls(t *testing.T) {
	cases := []struct {
		name      string
		lower     func(t *testing.T) vfs.Backend
		wantOpens int64
	}{
		{"physical/old", func(t *testing.T) vfs.Backend { return physicalWith(t, time.Hour) }, 0},
		{"physical/fresh", func(t *testing.T) vfs.Backend { return physicalWith(t, 0) }, 1},
		{"memory/old", func(t *testing.T) vfs.Backend { return memoryWith(t, time.Now().Add(-time.Hour)) }, 0},
		{"memory/fresh", func(t *testing.T) vfs.Backend { return memoryWith(t, time.Time{}) }, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lower := &countingLower{Backend: c.lower(t)}
			ov, err := NewOverlay(lower, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer ov.Close()
			lower.lstats.Store(0) // NewOverlay's of the root
			for range 3 {
				if _, err := ov.Lstat(bg, vp("f")); err != nil {
					t.Fatal(err)
				}
			}
			if l, o := lower.lstats.Load(), lower.opens.Load(); l != 3 || o != c.wantOpens {
				t.Errorf("3 lookups made %d lower Lstats and %d opens; want 3 and %d", l, o, c.wantOpens)
			}
		})
	}
}

// physicalWith is a physical directory holding file f, its status trusted
// as if changed age ago (sightRacy moved for the test).
func physicalWith(t *testing.T, age time.Duration) vfs.Backend {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if age > 0 {
		trustStat(t)
	}
	pb, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// memoryWith is a memory backend holding file f, modified at mtime (now if
// zero).
func memoryWith(t *testing.T, mtime time.Time) vfs.Backend {
	mem := memory.New()
	d, _ := dir.New(mem)
	if err := d.WriteFile(bg, "f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := d.Chtimes(bg, "f", mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// TestSightDirBase: a directory's Base is its mode and time when first
// looked up, though the host changed its mode before the process wrote in it.
func TestSightDirBase(t *testing.T) {
	trustStat(t)
	ov, root, _ := sightOverlay(t, map[string]string{"d/a": "a"})
	if _, err := ov.Lstat(bg, vp("d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := ov.OpenFile(bg, vp("d/new"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, ok := ov.Bases()["d"]; !ok || b.Type != fs.ModeDir || b.Mode != 0o755 {
		t.Errorf("base of d: %+v, %v; want a directory of mode 0755", b, ok)
	}
}

// TestSightGone: a file the process saw, that the host then removed, gets
// the seen Base when the process makes it again (creating, renaming onto it,
// making a directory there): the sync-back then finds the removal. A name
// the process never saw gets none (it is new).
func TestSightGone(t *testing.T) {
	trustStat(t)
	makers := map[string]func(ov *Overlay, p vfs.Path) error{
		"create": func(ov *Overlay, p vfs.Path) error {
			f, err := ov.OpenFile(bg, p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err == nil {
				f.Close()
			}
			return err
		},
		"rename": func(ov *Overlay, p vfs.Path) error {
			f, err := ov.OpenFile(bg, vp("tmp"), os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			f.Close()
			return ov.Rename(bg, vp("tmp"), p, 0)
		},
		"mkdir": func(ov *Overlay, p vfs.Path) error { return ov.Mkdir(bg, p, 0o755) },
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			ov, root, _ := sightOverlay(t, map[string]string{"conf": "base\n", "unseen": "u"})
			if _, err := ov.Lstat(bg, vp("conf")); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"conf", "unseen"} {
				if err := os.Remove(filepath.Join(root, n)); err != nil {
					t.Fatal(err)
				}
				if err := mk(ov, vp(n)); err != nil {
					t.Fatal(err)
				}
			}
			bases := ov.Bases()
			if b, ok := bases["conf"]; !ok || b.Type != 0 || b.Size != 5 || b.Digest != "" {
				t.Errorf("base of conf: %+v, %v; want the file seen (5 bytes, contents unknown)", b, ok)
			}
			if b, ok := bases["unseen"]; ok {
				t.Errorf("a name never seen has a base: %+v", b)
			}
		})
	}
}

// TestSightAbsent: a name the process looked up and found absent, that the
// host then made, is new to the process: writing it records no Base (the
// sync-back then finds it "added in the source too"), and removing it
// removes nothing the sync-back would delete.
func TestSightAbsent(t *testing.T) {
	trustStat(t)
	ov, root, _ := sightOverlay(t, nil)
	for _, n := range []string{"w", "rm"} {
		if _, err := ov.Lstat(bg, vp(n)); vfs.CodeOf(err) != vfs.CodeNotFound {
			t.Fatalf("%s: %v, want not_found", n, err)
		}
		if err := os.WriteFile(filepath.Join(root, n), []byte("host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ov.Lstat(bg, vp(n)); err != nil {
			t.Fatal(err) // seen now, but first seen absent
		}
	}
	f, err := ov.OpenFile(bg, vp("w"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := ov.Remove(bg, vp("rm")); err != nil {
		t.Fatal(err)
	}
	if bs := ov.Bases(); len(bs) != 0 {
		t.Errorf("bases %+v; want none", bs)
	}
	cs, err := ov.Changes(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Path != "w" || cs[0].Kind != "added" {
		t.Errorf("changes %+v; want w added", cs)
	}
}
