package authority

import (
	"errors"
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
