//go:build linux

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

// TestCreatorOwns (root): an entry a process creates through the mount is
// its own, as on disk: owner its uid, group its gid, or the directory's group
// where the directory has the setgid bit.
func TestCreatorOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create entries as other uids")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "w"), 0o777))
	must(t, os.Chmod(filepath.Join(root, "w"), 0o777))
	must(t, os.Mkdir(filepath.Join(root, "sg"), 0o777))
	must(t, os.Chown(filepath.Join(root, "sg"), 0, 777))
	must(t, os.Chmod(filepath.Join(root, "sg"), 0o777|os.ModeSetgid))
	b, err := physical.New(root)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	d, _ := dir.New(b)
	mp, _ := mountT(t, d, Options{AllowOther: true})
	for _, p := range []string{filepath.Dir(mp), filepath.Dir(filepath.Dir(mp))} {
		must(t, os.Chmod(p, 0o755))
	}
	c := exec.Command(sh, "-c", "set -e; cd "+mp+"; echo x > w/f; : > w/g; mkdir w/d; ln -s f w/l; echo y > sg/f; mkdir sg/d")
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1234, Gid: 4321}}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("creating as uid 1234: %v: %s", err, out)
	}
	for _, n := range []string{"w/f", "w/g", "w/d", "w/l"} {
		wantOwner(t, "host "+n, filepath.Join(root, n), 1234, 4321)
		wantOwner(t, n+" through the mount", filepath.Join(mp, n), 1234, 4321)
	}
	for _, n := range []string{"sg/f", "sg/d"} {
		wantOwner(t, "host "+n+" (setgid directory)", filepath.Join(root, n), 1234, 777)
	}
	// Opening an existing file with O_CREAT gives nothing away.
	must(t, os.WriteFile(filepath.Join(root, "w", "mine"), nil, 0o666))
	must(t, os.Chmod(filepath.Join(root, "w", "mine"), 0o666))
	appendAs1234(t, sh, filepath.Join(mp, "w", "mine"))
	wantOwner(t, "host w/mine after an O_CREAT open of it", filepath.Join(root, "w", "mine"), 0, 0)
	// Nor does one the kernel still believes absent (a negative entry from a
	// lookup before the host made the file), for which it sends CREATE.
	if _, err := os.Stat(filepath.Join(mp, "w", "late")); !os.IsNotExist(err) {
		t.Fatalf("w/late before the host made it: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(root, "w", "late"), nil, 0o666))
	must(t, os.Chmod(filepath.Join(root, "w", "late"), 0o666))
	appendAs1234(t, sh, filepath.Join(mp, "w", "late"))
	wantOwner(t, "host w/late after an O_CREAT open of it", filepath.Join(root, "w", "late"), 0, 0)
	if data, err := os.ReadFile(filepath.Join(root, "w", "late")); err != nil || string(data) != "z\n" {
		t.Errorf("host w/late = %q, %v; want the appended line", data, err)
	}
}

// appendAs1234 appends a line to name as uid 1234, gid 4321, with O_CREAT.
func appendAs1234(t *testing.T, sh, name string) {
	t.Helper()
	c := exec.Command(sh, "-c", "echo z >> "+name)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1234, Gid: 4321}}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("appending to %s as uid 1234: %v: %s", name, err, out)
	}
}
