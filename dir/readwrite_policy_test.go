package dir_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// denyReadsUnder refuses reads (only reads) of paths under prefix.
func denyReadsUnder(prefix string) policy.Policy {
	return policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if r.Op == policy.OpRead && strings.HasPrefix(r.Path, prefix) {
			return policy.Decision{Effect: policy.Deny, Rule: "no-read:" + prefix}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "allow"}
	})
}

// An open for reading and writing is a read too: a policy that guards reads of a
// path cannot be bypassed with O_RDWR, through Dir.Open, File.Open or the Backend
// view; a write-only open stays a write.
func TestOpenReadWriteIsDecidedAsARead(t *testing.T) {
	ring := audit.NewRing(64)
	d, _, m := newTree(t)
	g, _ := dir.New(m, dir.WithPolicy(denyReadsUnder("dir/")), dir.WithAudit(ring))

	_, err := g.Open(bg, "dir/b.txt", os.O_RDWR, 0)
	wantCode(t, err, vfs.CodePermission)
	_, err = g.Open(bg, "dir/new.txt", os.O_RDWR|os.O_CREATE, 0o644)
	wantCode(t, err, vfs.CodePermission)
	if ok, _ := d.Exists(bg, "dir/new.txt"); ok {
		t.Error("a refused O_RDWR|O_CREATE created the file")
	}
	h, err := g.Open(bg, "dir/b.txt", os.O_WRONLY, 0)
	must(t, err)
	must(t, h.Close())

	f, err := g.OpenFile(bg, "dir/b.txt")
	must(t, err)
	_, err = f.Open(bg, os.O_RDWR)
	wantCode(t, err, vfs.CodePermission)

	_, err = g.Backend().OpenFile(bg, vfs.MustParse("dir/b.txt"), os.O_RDWR, 0)
	wantCode(t, err, vfs.CodePermission)

	// Outside the guarded prefix, O_RDWR works.
	h, err = g.Open(bg, "a.txt", os.O_RDWR, 0)
	must(t, err)
	must(t, h.Close())

	for _, e := range ring.Events() {
		if e.Outcome == audit.Denied && e.Rule != "no-read:dir/" {
			t.Errorf("denied event names rule %q, want no-read:dir/: %+v", e.Rule, e)
		}
	}
}

// A composite call refused because of a path inside it is audited as denied, with
// the rule that refused the inner path.
func TestInnerRefusalIsAuditedAsDenied(t *testing.T) {
	ring := audit.NewRing(16)
	_, _, m := newTree(t)
	g, _ := dir.New(m, dir.WithPolicy(denyReadsUnder("dir/sub/deep")), dir.WithAudit(ring))
	err := g.Copy(bg, "dir", "copy")
	wantCode(t, err, vfs.CodePermission)
	ev := ring.Events()
	if len(ev) != 1 {
		t.Fatalf("got %d events, want 1: %+v", len(ev), ev)
	}
	if ev[0].Outcome != audit.Denied || ev[0].Rule != "no-read:dir/sub/deep" || ev[0].Code != string(vfs.CodePermission) {
		t.Errorf("event = %+v, want denied by no-read:dir/sub/deep", ev[0])
	}
}
