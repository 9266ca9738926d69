package dir_test

import (
	"context"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

type countHook struct{ before, after int }

func (h *countHook) Before(context.Context, *policy.Request) error { h.before++; return nil }
func (h *countHook) After(context.Context, *policy.Request, error) { h.after++ }

// TestCheck checks that Dir.Check answers as the real call's steps 1-4 would,
// without running hooks or touching the backend, and is audited as a check.
func TestCheck(t *testing.T) {
	m := memory.New()
	eng, err := policy.New(policy.Config{MaxFileSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ring := audit.NewRing(64)
	hook := &countHook{}
	root, ctl := dir.New(m, dir.WithPolicy(eng), dir.WithAudit(ring), dir.WithHooks(hook))
	cases := []struct {
		op         policy.Op
		path, dest string
		size       int64
		want       vfs.Code
	}{
		{policy.OpWrite, "src/main.go", "", 5, ""},
		{policy.OpWrite, "src/main.go", "", 11, vfs.CodePermission},           // size limit
		{policy.OpWrite, ".git/hooks/pre-commit", "", -1, vfs.CodePermission}, // persistence trap
		{policy.OpRead, "app/.env", "", -1, vfs.CodePermission},               // secret
		{policy.OpRename, "a", ".bashrc", -1, vfs.CodePermission},
		{policy.OpSymlink, "link", "../../etc/passwd", -1, ""}, // leaves the tree: data
		{policy.OpSymlink, "link", "/etc/passwd", -1, ""},
		{policy.OpSymlink, "link", "/etc\\passwd", -1, vfs.CodeInvalidPath},
		{policy.OpSymlink, ".git/hooks/pre-commit", "/bin/evil", -1, vfs.CodePermission}, // decided on its name
		{policy.OpMkdir, "../x", "", -1, vfs.CodeOutside},
		{policy.OpMkdir, "new/dir", "", -1, ""},
	}
	for _, c := range cases {
		err := root.Check(bg, c.op, c.path, c.dest, c.size)
		if got := vfs.CodeOf(err); got != c.want || (c.want == "" && err != nil) {
			t.Errorf("Check(%s, %q, %q, %d) = %v; want %q", c.op, c.path, c.dest, c.size, err, c.want)
		}
	}
	if hook.before != 0 || hook.after != 0 {
		t.Errorf("hooks ran %d/%d times; Check runs none", hook.before, hook.after)
	}
	if ents, err := m.ReadDir(bg, vfs.Root); err != nil || len(ents) != 0 {
		t.Errorf("the backend changed: %v, %v", ents, err)
	}
	evs := ring.Events()
	if len(evs) != len(cases) {
		t.Fatalf("%d audit events for %d checks", len(evs), len(cases))
	}
	if evs[0].Op != "check.write" || evs[0].Outcome != audit.OK || evs[1].Outcome != audit.Denied {
		t.Errorf("audit events: %+v, %+v", evs[0], evs[1])
	}
	if err := root.ReadOnly().Check(bg, policy.OpWrite, "x", "", 1); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Errorf("Check of a write on a read-only Dir: %v", err)
	}
	if err := root.ReadOnly().Check(bg, policy.OpRead, "x", "", -1); err != nil {
		t.Errorf("Check of a read on a read-only Dir: %v", err)
	}
	ctl.Revoke()
	if err := root.Check(bg, policy.OpRead, "x", "", -1); vfs.CodeOf(err) != vfs.CodeRevoked {
		t.Errorf("Check after Revoke: %v", err)
	}
}
