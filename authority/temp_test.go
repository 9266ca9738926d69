package authority

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/vfs"
)

func TestTempWorkspace(t *testing.T) {
	for _, kind := range []TempBackend{TempMemory, TempPhysical, TempSQLite} {
		a := New(WithTempBase(filepath.Join(t.TempDir(), "base")))
		d, w, err := a.CreateTempWorkspace(ctx, TempOptions{Subject: agent, Backend: kind, Quota: 1 << 20})
		must(t, err)
		must(t, d.WriteFile(ctx, "scratch.txt", []byte("x"), 0o644))
		if g := w.Grant(); g.Kind != KindTemp || g.Subject != agent || !g.Has(Archive) {
			t.Fatalf("grant %+v", g)
		}
		// The quota holds.
		if err := d.WriteFile(ctx, "big", make([]byte, 2<<20), 0o644); err == nil {
			t.Fatalf("%d: quota not enforced", kind)
		}
		// Another subject cannot be granted it.
		if _, _, err := a.Grant(ctx, GrantRequest{Subject: Subject{Kind: KindAgentRun, ID: "other"}, Root: w.Root(), Reason: "x", Source: SourceCore}); err == nil {
			t.Fatal("temp granted to a non-owner")
		}
		if kind != TempMemory {
			fi, err := os.Stat(w.host)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("workspace dir: %v %v", fi, err)
			}
		}
		must(t, w.Close())
		if _, err := d.ReadFile(ctx, "scratch.txt"); vfs.CodeOf(err) != vfs.CodeRevoked {
			t.Fatalf("after Close: %v", err)
		}
		if kind != TempMemory {
			if _, err := os.Stat(w.host); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("files left: %v", err)
			}
		}
		must(t, w.Close())
	}
}

func TestReapTemp(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	a := New(WithTempBase(base))
	_, live, err := a.CreateTempWorkspace(ctx, TempOptions{Subject: agent, Backend: TempPhysical})
	must(t, err)
	defer live.Close()
	d, crashed, err := a.CreateTempWorkspace(ctx, TempOptions{Subject: agent, Backend: TempPhysical})
	must(t, err)
	must(t, d.WriteFile(ctx, "left-behind", []byte("x"), 0o644))
	crashed.lock.Close() // what the kernel does when the owner dies
	n, err := ReapTemp(base)
	must(t, err)
	if n != 1 {
		t.Fatalf("reaped %d, want 1", n)
	}
	if _, err := os.Stat(crashed.host); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("crashed workspace left")
	}
	if _, err := os.Stat(live.host); err != nil {
		t.Fatal("live workspace reaped")
	}
}

// TestTempWorkspaceTotalQuota: the quota bounds what the whole workspace holds,
// on every backend: many files each under the limit stop fitting once their sum
// reaches it, a hard link counts again, and removing, truncating or replacing a
// file makes room again.
func TestTempWorkspaceTotalQuota(t *testing.T) {
	for _, kind := range []TempBackend{TempMemory, TempPhysical, TempSQLite} {
		a := New(WithTempBase(filepath.Join(t.TempDir(), "base")))
		d, w, err := a.CreateTempWorkspace(ctx, TempOptions{Subject: agent, Backend: kind, Quota: 256 << 10})
		must(t, err)
		chunk := make([]byte, 40<<10)
		written := 0
		var werr error
		for i := 0; i < 20; i++ {
			if werr = d.WriteFile(ctx, fmt.Sprintf("f%02d", i), chunk, 0o644); werr != nil {
				break
			}
			written++
		}
		if written < 4 || written > 7 || vfs.CodeOf(werr) != vfs.CodeQuota {
			t.Fatalf("%d: %d files of 40 KiB fit under 256 KiB, then %v; want 4-6 then quota_exceeded", kind, written, werr)
		}
		// Room comes back when a file goes, or shrinks.
		must(t, d.Remove(ctx, "f00"))
		must(t, d.WriteFile(ctx, "again", chunk, 0o644))
		if err := d.WriteFile(ctx, "more", chunk, 0o644); vfs.CodeOf(err) != vfs.CodeQuota {
			t.Fatalf("%d: past the quota again: %v", kind, err)
		}
		h, err := d.Open(ctx, "f01", os.O_WRONLY, 0)
		must(t, err)
		must(t, h.Truncate(0))
		must(t, h.Close())
		must(t, d.WriteFile(ctx, "more", chunk, 0o644))
		// Replacing a file charges only the difference.
		must(t, d.WriteFile(ctx, "more", chunk[:1], 0o644))
		must(t, d.WriteFile(ctx, "more2", chunk, 0o644))
		must(t, w.Close())
	}
}
