package fuseexport

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// statOwner is the owner os.Lstat reports for p.
func statOwner(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

func wantOwner(t *testing.T, what, p string, uid, gid int) {
	t.Helper()
	if u, g := statOwner(t, p); u != uid || g != gid {
		t.Errorf("%s: owner %d:%d, want %d:%d", what, u, g, uid, gid)
	}
}

// TestChownThroughMount (root): chown through the mount changes the host
// file's owner and stat through the mount shows it; lchown changes a link
// itself; the policy's refusal is EPERM; a read-only Dir is EROFS; owners set
// on the host are what the mount reports.
func TestChownThroughMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	root := t.TempDir()
	for _, d := range []string{"d", "locked"} {
		must(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	for _, f := range []string{"f", "locked/g", "h"} {
		must(t, os.WriteFile(filepath.Join(root, f), []byte(f), 0o644))
	}
	must(t, os.Symlink("f", filepath.Join(root, "l")))
	must(t, os.Lchown(filepath.Join(root, "h"), 777, 888))
	b, err := physical.New(root)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	pol := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if r.Op == policy.OpChown && strings.HasPrefix(r.Path, "locked/") {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:locked"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "allow"}
	})
	d, _ := dir.New(b, dir.WithPolicy(pol))
	mp, _ := mountT(t, d, Options{})

	wantOwner(t, "a file chowned on the host, through the mount", filepath.Join(mp, "h"), 777, 888)

	must(t, os.Chown(filepath.Join(mp, "f"), 1234, 5678))
	wantOwner(t, "host f after chown", filepath.Join(root, "f"), 1234, 5678)
	wantOwner(t, "f through the mount after chown", filepath.Join(mp, "f"), 1234, 5678)

	must(t, os.Chown(filepath.Join(mp, "f"), -1, 42))
	wantOwner(t, "host f after chown(-1, 42)", filepath.Join(root, "f"), 1234, 42)

	lu, lg := statOwner(t, filepath.Join(root, "l"))
	must(t, os.Chown(filepath.Join(mp, "l"), 11, 12)) // follows the link
	wantOwner(t, "host f after chown through l", filepath.Join(root, "f"), 11, 12)
	wantOwner(t, "host l after chown through it", filepath.Join(root, "l"), lu, lg)

	must(t, os.Lchown(filepath.Join(mp, "l"), 21, 22))
	wantOwner(t, "host l after lchown", filepath.Join(root, "l"), 21, 22)
	wantOwner(t, "l through the mount after lchown", filepath.Join(mp, "l"), 21, 22)
	wantOwner(t, "host f after lchown of l", filepath.Join(root, "f"), 11, 12)

	must(t, os.Chown(filepath.Join(mp, "d"), 31, 32))
	wantOwner(t, "host d after chown", filepath.Join(root, "d"), 31, 32)

	gu, gg := statOwner(t, filepath.Join(root, "locked", "g"))
	wantErrno(t, "chown of a path the policy locks", os.Chown(filepath.Join(mp, "locked", "g"), 1, 1), syscall.EPERM)
	wantOwner(t, "host locked/g after a refused chown", filepath.Join(root, "locked", "g"), gu, gg)

	// A read-only Dir.
	mpRO, _ := mountT(t, d.ReadOnly(), Options{})
	wantErrno(t, "chown on a read-only mount", os.Chown(filepath.Join(mpRO, "f"), 1, 1), syscall.EROFS)
	wantOwner(t, "host f after a read-only refusal", filepath.Join(root, "f"), 11, 12)
}

// TestChownNoOwners: a backend that keeps no owners shows every entry as the
// mount's own; a chown to that owner succeeds, any other is EPERM.
func TestChownNoOwners(t *testing.T) {
	d, _ := dir.New(memory.New())
	mp, s := mountT(t, d, Options{})
	p := filepath.Join(mp, "x")
	must(t, os.WriteFile(p, []byte("x"), 0o644))
	wantOwner(t, "a memory file", p, int(s.uid), int(s.gid))
	must(t, os.Chown(p, int(s.uid), int(s.gid)))
	must(t, os.Chown(p, -1, -1))
	wantErrno(t, "chown to another owner on memory", os.Chown(p, int(s.uid)+1, -1), syscall.EPERM)
}

// TestOwnerPermissions (root): with default_permissions the kernel checks mode
// bits against the owner the backend reports: a 0600 file owned by uid 1234
// is readable by that uid and EACCES for any other non-root uid.
func TestOwnerPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run readers under other uids")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	root := t.TempDir()
	b, err := physical.New(root)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	d, _ := dir.New(b)
	mp, _ := mountT(t, d, Options{AllowOther: true})
	for _, p := range []string{filepath.Dir(mp), filepath.Dir(filepath.Dir(mp))} {
		must(t, os.Chmod(p, 0o755))
	}
	p := filepath.Join(mp, "mine")
	must(t, os.WriteFile(p, []byte("secret"), 0o600))
	must(t, os.Chown(p, 1234, 1234))
	run := func(uid uint32) error {
		c := exec.Command(cat, p)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := run(1234); err != nil {
		t.Errorf("the owner reading its 0600 file: %v", err)
	}
	if err := run(65534); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("another user reading a 0600 file: %v; want permission denied", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
