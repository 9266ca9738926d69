package dir_test

import (
	"errors"
	"io/fs"
	"testing"

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
