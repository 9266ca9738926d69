package dir_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestEntryInfoAsksPolicy checks that a listing's entries give no metadata of a
// path whose Stat the policy refuses: the name is listed, Info is refused, and
// entries the policy allows still answer. It covers ReadDir and a directory
// Handle's ReadDir, at the root and in a Sub.
func TestEntryInfoAsksPolicy(t *testing.T) {
	m := memory.New()
	root0, _ := dir.New(m)
	if err := root0.MkdirAll(bg, "app"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"app/.env", "app/main.go"} {
		if err := root0.WriteFile(bg, f, []byte("SECRET=1"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := policy.New(policy.Config{Default: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := dir.New(m, dir.WithPolicy(eng))
	sub, err := root.Sub(bg, "app")
	if err != nil {
		t.Fatal(err)
	}
	check := func(where string, ents []fs.DirEntry) {
		t.Helper()
		seen := 0
		for _, e := range ents {
			info, err := e.Info()
			switch e.Name() {
			case ".env":
				seen++
				if err == nil || vfs.CodeOf(err) != vfs.CodePermission || !errors.Is(err, fs.ErrPermission) {
					t.Fatalf("%s: Info of .env = %v, %v; want fs_permission_denied", where, info, err)
				}
			case "main.go":
				seen++
				if err != nil || info.Size() != 8 {
					t.Fatalf("%s: Info of main.go = %v, %v", where, info, err)
				}
			}
		}
		if seen != 2 {
			t.Fatalf("%s: listed %d of the two files", where, seen)
		}
	}
	ents, err := root.ReadDir(bg, "app")
	if err != nil {
		t.Fatal(err)
	}
	check("root.List", ents)
	if ents, err = sub.ReadDir(bg, "."); err != nil {
		t.Fatal(err)
	}
	check("sub.List", ents)
	h, err := sub.Open(bg, ".", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if ents, err = h.ReadDir(-1); err != nil {
		t.Fatal(err)
	}
	check("Handle.ReadDir", ents)
	if _, err := root.Stat(bg, "app/.env"); vfs.CodeOf(err) != vfs.CodePermission {
		t.Fatalf("Stat of app/.env: %v; want fs_permission_denied (the rule Info follows)", err)
	}
}

// TestBackendViewReadDirInfo: the Backend view lists a directory with every
// entry's status (vfs.DirInfoReader) as ReadDir and an Lstat of each entry
// through it would: the same entries and status where the policy allows them;
// an entry it refuses keeps its name and type and carries fs_permission_denied
// naming it (also when the directory is reached through a link), audited as a
// denied stat beside the readdir.
func TestBackendViewReadDirInfo(t *testing.T) {
	m := memory.New()
	root0, _ := dir.New(m)
	for _, d := range []string{"app", "pub"} {
		if err := root0.MkdirAll(bg, d); err != nil {
			t.Fatal(err)
		}
	}
	for f, data := range map[string]string{"app/.env": "SECRET=1", "app/main.go": "package main", "pub/a": "A", "pub/b": "BB"} {
		if err := root0.WriteFile(bg, f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := root0.Symlink(bg, "app", "lapp"); err != nil {
		t.Fatal(err)
	}
	ring := audit.NewRing(16)
	denyEnv := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		if strings.HasSuffix(r.Path, ".env") {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:**/.env"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "default"}
	})
	root, _ := dir.New(m, dir.WithPolicy(denyEnv), dir.WithAudit(ring))
	view := root.Backend()
	if _, ok := view.(vfs.DirInfoReader); !ok {
		t.Fatal("the Backend view is not a vfs.DirInfoReader")
	}
	infos, err := vfs.ReadDirInfo(bg, view, vfs.MustParse("pub"))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Name != "a" || infos[0].Size != 1 || infos[1].Name != "b" || infos[1].Size != 2 || infos[0].Err != nil || infos[1].Err != nil {
		t.Fatalf("ReadDirInfo(pub) = %+v", infos)
	}
	for _, in := range infos {
		w, err := view.Lstat(bg, vfs.MustParse("pub/"+in.Name))
		if err != nil || w.Mode != in.Mode || !w.ModTime.Equal(in.ModTime) || w.ID != in.ID {
			t.Errorf("pub/%s: ReadDirInfo says %+v, Lstat %+v, %v", in.Name, in, w, err)
		}
	}
	for _, p := range []string{"app", "lapp"} {
		ring.Reset()
		infos, err := vfs.ReadDirInfo(bg, view, vfs.MustParse(p))
		if err != nil || len(infos) != 2 {
			t.Fatalf("ReadDirInfo(%s) = %+v, %v", p, infos, err)
		}
		env, main := infos[0], infos[1]
		if env.Name != ".env" || vfs.CodeOf(env.Err) != vfs.CodePermission || !strings.Contains(env.Err.Error(), p+"/.env") || env.Size != 0 || !env.Mode.IsRegular() {
			t.Errorf("ReadDirInfo(%s): .env = %+v; want its name and type, no size, fs_permission_denied naming %s/.env", p, env, p)
		}
		if main.Name != "main.go" || main.Err != nil || main.Size != 12 {
			t.Errorf("ReadDirInfo(%s): main.go = %+v", p, main)
		}
		var denied, listed int
		for _, ev := range ring.Events() {
			switch {
			case ev.Outcome == audit.Denied && ev.Rule == "deny:**/.env" && ev.Path == "app/.env":
				denied++
			case ev.Outcome == audit.OK:
				listed++
			}
		}
		if denied != 1 || listed != 1 {
			t.Errorf("ReadDirInfo(%s) audited as %+v; want the readdir and one denied stat of app/.env", p, ring.Events())
		}
	}
}
