//go:build linux

package physical

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// owner returns the host owner of path itself (not following a final link).
func owner(t *testing.T, path string) (int, int) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner to another user needs root; run the tests as root to cover it")
	}
}

// TestInfoOwner: Stat, Lstat, ReadDirInfo and an open file's Stat report the
// host's st_uid and st_gid, and the link's own for Lstat.
func TestInfoOwner(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		h.writeHost(h.in("f"), "x")
		h.plant("f", "l")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		wu, wg := owner(t, h.in("f"))
		for _, c := range []struct {
			name string
			stat func() (vfs.Info, error)
		}{
			{"Stat(f)", func() (vfs.Info, error) { return f.Stat(ctx, P("f")) }},
			{"Lstat(f)", func() (vfs.Info, error) { return f.Lstat(ctx, P("f")) }},
			{"Stat(l)", func() (vfs.Info, error) { return f.Stat(ctx, P("l")) }},
			{"Lstat(l)", func() (vfs.Info, error) { return f.Lstat(ctx, P("l")) }},
		} {
			info, err := c.stat()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if u, g := info.Owner(); !info.HasOwner || u != wu || g != wg {
				t.Errorf("%s owner = %v %d:%d, want %d:%d", c.name, info.HasOwner, u, g, wu, wg)
			}
		}
		infos, err := vfs.ReadDirInfo(ctx, f, vfs.Root)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			if !i.HasOwner || i.Uid != wu || i.Gid != wg {
				t.Errorf("ReadDirInfo %s owner = %v %d:%d, want %d:%d", i.Name, i.HasOwner, i.Uid, i.Gid, wu, wg)
			}
		}
		if u, g := (vfs.Info{}).Owner(); u != -1 || g != -1 {
			t.Errorf("the zero Info's owner = %d:%d, want unknown (-1:-1)", u, g)
		}
	})
}

// TestChown: Chown follows a final link and changes its target, Lchown changes
// the link itself, -1 keeps an id, and the host's owner is what Stat reports.
func TestChown(t *testing.T) {
	needRoot(t)
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.Mkdir(h.in("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("d/f"), "x")
		h.plant("d/f", "l")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()

		if err := f.Chown(ctx, P("d/f"), 1234, 5678); err != nil {
			t.Fatalf("Chown(d/f): %v", err)
		}
		if u, g := owner(t, h.in("d/f")); u != 1234 || g != 5678 {
			t.Errorf("host owner of d/f = %d:%d, want 1234:5678", u, g)
		}
		info, err := f.Stat(ctx, P("d/f"))
		if err != nil || info.Uid != 1234 || info.Gid != 5678 {
			t.Errorf("Stat(d/f) = %d:%d, %v; want 1234:5678", info.Uid, info.Gid, err)
		}
		if err := f.Chown(ctx, P("d/f"), -1, 42); err != nil {
			t.Fatal(err)
		}
		if u, g := owner(t, h.in("d/f")); u != 1234 || g != 42 {
			t.Errorf("after Chown(-1, 42) host owner = %d:%d, want 1234:42", u, g)
		}
		if err := f.Chown(ctx, P("d/"), 7, -1); err != nil {
			t.Fatalf("Chown(d/): %v", err)
		}
		if u, _ := owner(t, h.in("d")); u != 7 {
			t.Errorf("host owner of d = %d, want 7", u)
		}

		// Through the link: the target changes, the link does not.
		lu, lg := owner(t, h.in("l"))
		if err := f.Chown(ctx, P("l"), 11, 12); err != nil {
			t.Fatalf("Chown(l): %v", err)
		}
		if u, g := owner(t, h.in("d/f")); u != 11 || g != 12 {
			t.Errorf("Chown(l): target owner = %d:%d, want 11:12", u, g)
		}
		if u, g := owner(t, h.in("l")); u != lu || g != lg {
			t.Errorf("Chown(l) changed the link itself to %d:%d", u, g)
		}
		// Lchown: the link changes, the target does not.
		if err := f.Lchown(ctx, P("l"), 21, 22); err != nil {
			t.Fatalf("Lchown(l): %v", err)
		}
		if u, g := owner(t, h.in("l")); u != 21 || g != 22 {
			t.Errorf("Lchown(l): link owner = %d:%d, want 21:22", u, g)
		}
		if u, g := owner(t, h.in("d/f")); u != 11 || g != 12 {
			t.Errorf("Lchown(l) changed the target to %d:%d", u, g)
		}
		info, err = f.Lstat(ctx, P("l"))
		if err != nil || info.Uid != 21 || info.Gid != 22 {
			t.Errorf("Lstat(l) = %d:%d, %v; want 21:22", info.Uid, info.Gid, err)
		}
		// Lchown of a file is Chown of it.
		if err := f.Lchown(ctx, P("d/f"), 31, 32); err != nil {
			t.Fatal(err)
		}
		if u, g := owner(t, h.in("d/f")); u != 31 || g != 32 {
			t.Errorf("Lchown(d/f): owner = %d:%d, want 31:32", u, g)
		}

		wantCode(t, f.Chown(ctx, P("missing"), 1, 1), vfs.CodeNotFound, "Chown(missing)")
		wantCode(t, f.Lchown(ctx, P("d/f/x"), 1, 1), vfs.CodeNotDir, "Lchown(d/f/x)")
		wantCode(t, f.Chown(ctx, P("d/f"), -2, 1), vfs.CodeInvalidPath, "Chown(uid -2)")
		wantCode(t, f.Chown(ctx, P("d/f"), 1, 1<<32), vfs.CodeInvalidPath, "Chown(gid 2^32)")
		if u, g := owner(t, h.in("d/f")); u != 31 || g != 32 {
			t.Errorf("a refused Chown changed the owner to %d:%d", u, g)
		}
	})
}

// TestChownConfined: no link in the path or at the final name redirects a
// chown outside the root; a link planted to an outside file is changed only
// itself by Lchown; files with other hard links and special files are refused.
func TestChownConfined(t *testing.T) {
	needRoot(t)
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		secretPath := filepath.Join(h.outside, "secret")
		h.plant(secretPath, "abs")
		h.plant("../outside/secret", "rel")
		h.plant("../outside", "dirlink")
		h.plant("/", "slash")
		if err := os.Link(secretPath, h.in("hl")); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(h.in("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("f"), "x")
		if err := os.Link(h.in("f"), h.in("f2")); err != nil {
			t.Fatal(err)
		}
		ou, og := owner(t, secretPath)
		du, dg := owner(t, h.outside)
		f := newAt(t, h.root, opts...)
		ctx := t.Context()

		for _, p := range []string{"abs", "rel", "dirlink/secret", "dirlink/", "dirlink/.", "slash/" + filepath.Join(h.outside[1:], "secret")} {
			if err := f.Chown(ctx, P(p), 4321, 4321); err == nil {
				t.Errorf("Chown(%s) succeeded; it leads outside the root", p)
			}
			if err := f.Lchown(ctx, P(p), 4321, 4321); err == nil && p != "abs" && p != "rel" {
				t.Errorf("Lchown(%s) succeeded; it leads outside the root", p)
			}
		}
		wantCode(t, f.Chown(ctx, P("abs"), 1, 1), vfs.CodeOutside, "Chown(abs)")
		wantCode(t, f.Chown(ctx, P("dirlink/secret"), 1, 1), vfs.CodeOutside, "Chown(dirlink/secret)")
		wantCode(t, f.Chown(ctx, P("hl"), 1, 1), vfs.CodePermission, "Chown(hl)")
		wantCode(t, f.Lchown(ctx, P("hl"), 1, 1), vfs.CodePermission, "Lchown(hl)")
		wantCode(t, f.Chown(ctx, P("f2"), 1, 1), vfs.CodePermission, "Chown(f2), a file with two names")
		wantCode(t, f.Chown(ctx, P("fifo"), 1, 1), vfs.CodeNotRegular, "Chown(fifo)")
		if u, g := owner(t, secretPath); u != ou || g != og {
			t.Errorf("the outside file's owner became %d:%d", u, g)
		}
		if u, g := owner(t, h.outside); u != du || g != dg {
			t.Errorf("the outside directory's owner became %d:%d", u, g)
		}
		// Lchown of the planted links changes the links, inside the root.
		for _, p := range []string{"abs", "rel"} {
			if err := f.Lchown(ctx, P(p), 4321, 4322); err != nil {
				t.Errorf("Lchown(%s): %v", p, err)
			}
			if u, g := owner(t, h.in(p)); u != 4321 || g != 4322 {
				t.Errorf("Lchown(%s): link owner = %d:%d", p, u, g)
			}
		}
		if u, g := owner(t, secretPath); u != ou || g != og {
			t.Errorf("the outside file's owner became %d:%d", u, g)
		}
	})
}

// TestChownForwarded: a Namespace forwards Chown and Lchown to the mount that
// serves the path, a ReadOnly view refuses both, a backend without ownership
// answers not_supported.
func TestChownForwarded(t *testing.T) {
	needRoot(t)
	h := newHost(t)
	h.writeHost(h.in("f"), "x")
	h.plant("f", "l")
	f := newAt(t, h.root)
	ctx := t.Context()
	ns := vfs.NewNamespace()
	if err := ns.Mount(P("m"), f, vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vfs.Chown(ctx, ns, P("m/l"), 51, 52, true); err != nil {
		t.Fatalf("Chown through the namespace: %v", err)
	}
	if u, g := owner(t, h.in("f")); u != 51 || g != 52 {
		t.Errorf("Chown(m/l) through the namespace: %d:%d", u, g)
	}
	if err := ns.Lchown(ctx, P("m/l"), 61, 62); err != nil {
		t.Fatalf("Lchown through the namespace: %v", err)
	}
	if u, g := owner(t, h.in("l")); u != 61 || g != 62 {
		t.Errorf("Lchown(m/l) through the namespace: %d:%d", u, g)
	}
	sub, err := ns.Sub(ctx, P("m"))
	if err != nil {
		t.Fatal(err)
	}
	if err := vfs.Chown(ctx, sub, P("f"), 71, -1, true); err != nil {
		t.Fatalf("Chown through a Sub: %v", err)
	}
	if u, _ := owner(t, h.in("f")); u != 71 {
		t.Errorf("Chown through a Sub: uid %d", u)
	}
	wantCode(t, vfs.Chown(ctx, ns, P("."), 1, 1, true), vfs.CodeReadOnly, "Chown of the synthetic root")
	ro := vfs.ReadOnly(f)
	wantCode(t, vfs.Chown(ctx, ro, P("f"), 1, 1, true), vfs.CodeReadOnly, "Chown through ReadOnly")
	wantCode(t, vfs.Chown(ctx, ro, P("l"), 1, 1, false), vfs.CodeReadOnly, "Lchown through ReadOnly")
	if u, _ := owner(t, h.in("f")); u != 71 {
		t.Errorf("a refused Chown changed the owner to %d", u)
	}
}

// TestChownUnprivileged: without the right, the host's EPERM is
// fs_permission_denied. Runs as an unprivileged user only.
func TestChownUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as an unprivileged user only (root may give files away)")
	}
	h := newHost(t)
	h.writeHost(h.in("f"), "x")
	f := newAt(t, h.root)
	err := f.Chown(t.Context(), P("f"), os.Geteuid()+1, -1)
	wantCode(t, err, vfs.CodePermission, "Chown to another user")
}

// TestChownResolvedMark: a Resolved path follows no symlink; a directory on it
// swapped for a link after the resolution fails the chown with conflict and
// changes nothing.
func TestChownResolvedMark(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.Mkdir(h.in("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("d/f"), "x")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		loc, err := f.Resolve(ctx, P("d/f"), true)
		if err != nil || !loc.Found {
			t.Fatalf("Resolve: %+v, %v", loc, err)
		}
		if err := os.Rename(h.in("d"), h.in("d2")); err != nil {
			t.Fatal(err)
		}
		// A link to another directory of the root, which the decision was not
		// made on ("protected").
		if err := os.Mkdir(h.in("protected"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("protected/f"), "p")
		h.plant("protected", "d")
		ou, og := owner(t, h.in("protected/f"))
		wantCode(t, f.Chown(ctx, loc.Path, -1, og+1), vfs.CodeConflict, "Chown of a Resolved path through a swapped-in link")
		wantCode(t, f.Lchown(ctx, loc.Path, -1, og+1), vfs.CodeConflict, "Lchown of a Resolved path through a swapped-in link")
		if u, g := owner(t, h.in("protected/f")); u != ou || g != og {
			t.Errorf("protected/f's owner became %d:%d", u, g)
		}
	})
}
