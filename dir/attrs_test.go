package dir_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// attrTree is a Dir over memory holding f, locked/g and a link l to f, with
// a policy refusing chmod and chtimes beneath locked/, and its audit ring.
func attrTree(t *testing.T) (*dir.Dir, *dir.Control, *memory.FS, *audit.Ring) {
	t.Helper()
	m := memory.New()
	ring := audit.NewRing(100)
	pol := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if (r.Op == policy.OpChmod || r.Op == policy.OpChtimes) && strings.HasPrefix(r.Path, "locked/") {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:locked", Reason: "locked"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "allow"}
	})
	d, ctl := dir.New(m, dir.WithPolicy(pol), dir.WithAudit(ring))
	must(t, d.WriteFile(bg, "f", []byte("f"), 0o644))
	must(t, d.MkdirAll(bg, "locked"))
	must(t, d.WriteFile(bg, "locked/g", []byte("g"), 0o644))
	must(t, d.Symlink(bg, "f", "l"))
	return d, ctl, m, ring
}

var someTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// TestLchtimes: Lchtimes sets a link's own time, not its target's; it is a
// chtimes decided on the link's own path, refused by a read-only Dir, and
// audited.
func TestLchtimes(t *testing.T) {
	d, _, _, ring := attrTree(t)
	before, err := d.Stat(bg, "f")
	must(t, err)
	must(t, d.Lchtimes(bg, "l", time.Time{}, someTime))
	li, err := d.Lstat(bg, "l")
	must(t, err)
	if !li.ModTime().Equal(someTime) {
		t.Errorf("the link's mtime is %v, want %v", li.ModTime(), someTime)
	}
	if fi, _ := d.Stat(bg, "f"); !fi.ModTime().Equal(before.ModTime()) {
		t.Errorf("the target's mtime changed to %v", fi.ModTime())
	}
	// A plain entry is its own entry.
	must(t, d.Lchtimes(bg, "f", time.Time{}, someTime))
	wantCode(t, d.Lchtimes(bg, "locked/g", time.Time{}, someTime), vfs.CodePermission)
	wantCode(t, d.Lchtimes(bg, "missing", time.Time{}, someTime), vfs.CodeNotFound)
	wantCode(t, d.ReadOnly().Lchtimes(bg, "l", time.Time{}, someTime), vfs.CodeReadOnly)
	evs := ring.Events()
	last := evs[len(evs)-1]
	if last.Op != "chtimes" || last.Path != "l" || last.Outcome != audit.Denied {
		t.Errorf("the read-only refusal audited as %+v", last)
	}
	// The Backend view is a vfs.LinkTimer that decides the same way.
	lt, ok := d.Backend().(vfs.LinkTimer)
	if !ok {
		t.Fatal("the Backend view is not a vfs.LinkTimer")
	}
	must(t, lt.Lchtimes(bg, vfs.MustParse("l"), time.Time{}, someTime))
	wantCode(t, lt.Lchtimes(bg, vfs.MustParse("locked/g"), time.Time{}, someTime), vfs.CodePermission)
}

// TestHandleAttrs: Handle.Chmod and Chtimes change the open file after its
// name is gone; they are writes (refused read-only, write-locked and revoked),
// decided on the Handle's path, audited, and setuid is refused.
func TestHandleAttrs(t *testing.T) {
	d, ctl, _, ring := attrTree(t)
	h, err := d.Open(bg, "f", os.O_RDWR, 0)
	must(t, err)
	defer h.Close()
	must(t, d.Remove(bg, "f"))
	must(t, h.Chmod(0o600))
	must(t, h.Chtimes(time.Time{}, someTime))
	fi, err := h.Stat()
	must(t, err)
	if fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(someTime) {
		t.Errorf("after fchmod and futimens: %v %v", fi.Mode(), fi.ModTime())
	}
	last := ring.Events()[len(ring.Events())-1]
	if last.Op != "chtimes" || last.Path != "f" || last.Outcome != audit.OK {
		t.Errorf("Chtimes audited as %+v", last)
	}
	wantCode(t, h.Chmod(0o4755), vfs.CodePermission)

	g, err := d.Open(bg, "locked/g", os.O_RDONLY, 0)
	must(t, err)
	defer g.Close()
	wantCode(t, g.Chmod(0o600), vfs.CodePermission)
	if last := ring.Events()[len(ring.Events())-1]; last.Rule != "deny:locked" || last.Outcome != audit.Denied {
		t.Errorf("the policy's refusal audited as %+v", last)
	}

	r, err := d.ReadOnly().Open(bg, "locked/g", os.O_RDONLY, 0)
	must(t, err)
	defer r.Close()
	wantCode(t, r.Chtimes(time.Time{}, someTime), vfs.CodeReadOnly)

	ctl.SetWritable(false)
	wantCode(t, h.Chmod(0o644), vfs.CodeReadOnly)
	ctl.SetWritable(true)
	ctl.Revoke()
	wantCode(t, h.Chtimes(time.Time{}, someTime), vfs.CodeRevoked)
}

// TestHandleAttrsThroughBackendView: the Backend view's files are
// vfs.AttrFiles where the backend's are, checked as Handle's.
func TestHandleAttrsThroughBackendView(t *testing.T) {
	d, _, _, _ := attrTree(t)
	f, err := d.Backend().OpenFile(bg, vfs.MustParse("f"), os.O_RDONLY, 0)
	must(t, err)
	defer f.Close()
	if _, ok := f.(vfs.AttrFile); !ok {
		t.Fatalf("%T is no vfs.AttrFile", f)
	}
	must(t, vfs.FileChmod(f, 0o640))
	ro, err := d.ReadOnly().Backend().OpenFile(bg, vfs.MustParse("f"), os.O_RDONLY, 0)
	must(t, err)
	defer ro.Close()
	wantCode(t, vfs.FileChmod(ro, 0o600), vfs.CodeReadOnly)
	fi, err := d.Stat(bg, "f")
	must(t, err)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode())
	}
}

// TestStatFS: a Dir reports the figures of the backend that holds the path:
// in a namespace, the mount's; a memory backend's quota; not_supported
// without one, or on a synthetic directory.
func TestStatFS(t *testing.T) {
	ns := vfs.NewNamespace()
	must(t, ns.Mount(vfs.MustParse("q/a"), memory.New(memory.WithQuota(1<<20)), vfs.MountOptions{}))
	must(t, ns.Mount(vfs.MustParse("free"), memory.New(), vfs.MountOptions{}))
	d, _ := dir.New(ns)
	st, err := d.StatFS(bg, "q/a")
	must(t, err)
	if st.Total != 1<<20 || st.Free != 1<<20 {
		t.Errorf("StatFS(q/a) = %+v, want the quota, all free", st)
	}
	must(t, d.WriteFile(bg, "q/a/x", make([]byte, 4096), 0o644))
	st, err = d.StatFS(bg, "q/a/x")
	must(t, err)
	if st.Free > 1<<20-4096 {
		t.Errorf("StatFS after a 4 KiB write = %+v", st)
	}
	_, err = d.StatFS(bg, "free")
	wantCode(t, err, vfs.CodeNotSupported)
	_, err = d.StatFS(bg, "q")
	wantCode(t, err, vfs.CodeNotSupported)
	_, err = d.StatFS(bg, "q/a/missing")
	wantCode(t, err, vfs.CodeNotFound)
	_, err = d.StatFS(bg, "../x")
	wantCode(t, err, vfs.CodeOutside)
	if _, ok := d.Backend().(vfs.StatFSer); !ok {
		t.Error("the Backend view is not a vfs.StatFSer")
	}
}

// chmodHook refuses chmod and counts its calls.
type chmodHook struct{ before, after int }

func (h *chmodHook) Before(_ context.Context, r *policy.Request) error {
	h.before++
	if r.Op == policy.OpChmod {
		return vfs.NewError(vfs.CodePermission, "hook", vfs.MustParse(r.GuestPath), "no chmod")
	}
	return nil
}

func (h *chmodHook) After(context.Context, *policy.Request, error) { h.after++ }

// TestHandleAttrsRunHooks: an open file's Chmod and Chtimes run the Dir's
// Before hooks (GitGuard's place) as a path's do, and their After.
func TestHandleAttrsRunHooks(t *testing.T) {
	hk := &chmodHook{}
	d, _ := dir.New(memory.New(), dir.WithHooks(hk))
	must(t, d.WriteFile(bg, "f", []byte("f"), 0o644))
	h, err := d.Open(bg, "f", os.O_RDONLY, 0)
	must(t, err)
	defer h.Close()
	b, a := hk.before, hk.after
	wantCode(t, h.Chmod(0o755), vfs.CodePermission)
	must(t, h.Chtimes(time.Time{}, someTime))
	if hk.before-b != 2 || hk.after-a != 1 {
		t.Errorf("hooks: %d Before, %d After; want 2 and 1 (the refused one's After is not due)", hk.before-b, hk.after-a)
	}
	fi, err := d.Stat(bg, "f")
	must(t, err)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("the refused Chmod changed the mode to %v", fi.Mode())
	}
}
