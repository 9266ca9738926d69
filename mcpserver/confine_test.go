package mcpserver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// hostTree builds, under t.TempDir():
//
//	allowed/file.txt            the granted directory
//	allowed/escape -> ../outside
//	allowed/escfile -> ../allowed_evil/secret.txt
//	allowed_evil/secret.txt     the CVE-2025-53110 sibling with the same prefix
//	outside/x.txt
//
// and serves allowed/ through a physical backend.
func hostTree(t *testing.T) (host string, f *fixture) {
	t.Helper()
	host = t.TempDir()
	for _, d := range []string{"allowed", "allowed_evil", "outside"} {
		if err := os.Mkdir(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(host, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("allowed/file.txt", "inside\n")
	write("allowed_evil/secret.txt", "TOPSECRET\n")
	write("outside/x.txt", "TOPSECRET outside\n")
	if err := os.Symlink("../outside", filepath.Join(host, "allowed/escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../allowed_evil/secret.txt", filepath.Join(host, "allowed/escfile")); err != nil {
		t.Fatal(err)
	}
	b, err := physical.New(filepath.Join(host, "allowed"))
	if err != nil {
		t.Fatal(err)
	}
	ring := audit.NewRing(8192)
	d, ctl := dir.New(b, dir.WithAudit(ring))
	return host, &fixture{t: t, cs: connect(t, d, mcpserver.Options{}), root: d, ctl: ctl, ring: ring, backend: b}
}

// snapshot records every file outside allowed/ with its contents.
func snapshot(t *testing.T, host string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range []string{"allowed_evil", "outside"} {
		err := filepath.WalkDir(filepath.Join(host, d), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			data := ""
			if !e.IsDir() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				data = string(b)
			}
			out[strings.TrimPrefix(p, host)] = data
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// escapeCase is one attempt to reach outside the grant through one argument.
type escapeCase struct {
	tool string
	args map[string]any
}

func escapeCases(bad string) []escapeCase {
	patch := func(body string) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n" + body + "\n*** End Patch"}
	}
	return []escapeCase{
		{"read", map[string]any{"path": bad}},
		{"read_many", map[string]any{"paths": []string{bad}}},
		{"write", map[string]any{"path": bad, "content": "pwned"}},
		{"write", map[string]any{"path": bad, "content": "pwned", "create_only": true}},
		{"append", map[string]any{"path": bad, "content": "pwned"}},
		{"edit", map[string]any{"path": bad, "old_string": "TOPSECRET", "new_string": "pwned"}},
		{"edit", map[string]any{"path": bad, "old_string": "TOPSECRET", "new_string": "pwned", "dry_run": true}},
		{"apply_patch", patch("*** Add File: " + bad + "\n+pwned")},
		{"apply_patch", patch("*** Update File: " + bad + "\n@@\n-TOPSECRET\n+pwned")},
		{"apply_patch", patch("*** Delete File: " + bad)},
		{"apply_patch", patch("*** Update File: file.txt\n*** Move to: " + bad + "\n@@\n-inside\n+pwned")},
		{"apply_patch", patch("*** Update File: file.txt\n@@\n-inside\n+changed\n*** Add File: " + bad + "\n+pwned")},
		{"list", map[string]any{"path": bad}},
		{"tree", map[string]any{"path": bad}},
		{"glob", map[string]any{"pattern": "*", "path": bad}},
		{"grep", map[string]any{"pattern": "TOPSECRET", "path": bad}},
		{"stat", map[string]any{"path": bad}},
		{"mkdir", map[string]any{"path": bad}},
		{"move", map[string]any{"source": bad, "destination": "stolen.txt"}},
		{"move", map[string]any{"source": "file.txt", "destination": bad}},
		{"move", map[string]any{"source": "file.txt", "destination": bad, "overwrite": true}},
		{"copy", map[string]any{"source": bad, "destination": "stolen.txt"}},
		{"copy", map[string]any{"source": "file.txt", "destination": bad}},
		{"copy", map[string]any{"source": "file.txt", "destination": bad, "overwrite": true}},
		{"remove", map[string]any{"path": bad}},
		{"remove", map[string]any{"path": bad, "recursive": true}},
	}
}

func TestTraversalAndSymlinkEscapes(t *testing.T) {
	host, f := hostTree(t)
	before := snapshot(t, host)
	for _, bad := range []string{
		"../allowed_evil/secret.txt", // CVE-2025-53110: the sibling sharing the grant's prefix
		"/../allowed_evil/secret.txt",
		"../allowed_evil",
		"a/../../allowed_evil/secret.txt",
		"escape/x.txt",        // through a directory symlink the host left inside
		"escape/new/deep.txt", // creating beneath it
		"escfile/../escape/x.txt",
	} {
		for _, c := range escapeCases(bad) {
			r := callTool(t, f.cs, c.tool, c.args)
			if !r.isErr {
				t.Errorf("%s %v: succeeded: %s", c.tool, c.args, r.text)
				continue
			}
			if r.code != string(vfs.CodeOutside) {
				t.Errorf("%s %v: code %q, want path_outside_sandbox: %s", c.tool, c.args, r.code, r.text)
			}
			mustNotContain(t, r.text, host, "TOPSECRET", "/tmp/")
		}
	}
	// The file symlink leading out: reading through it is refused; the link itself
	// is an entry of the grant (stat describes it, remove would delete the link).
	for _, c := range []escapeCase{
		{"read", map[string]any{"path": "escfile"}},
		{"edit", map[string]any{"path": "escfile", "old_string": "TOPSECRET", "new_string": "x"}},
		{"write", map[string]any{"path": "escfile", "content": "pwned"}},
		{"append", map[string]any{"path": "escfile", "content": "pwned"}},
		{"copy", map[string]any{"source": "escfile", "destination": "stolen.txt"}},
		{"grep", map[string]any{"pattern": "TOPSECRET", "path": "escfile"}},
		{"apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: escfile\n@@\n-TOPSECRET\n+x\n*** End Patch"}},
	} {
		r := failWith(t, f.cs, c.tool, c.args, string(vfs.CodeOutside))
		mustNotContain(t, r.text, host, "TOPSECRET")
	}
	st := f.ok("stat", map[string]any{"path": "escfile"})
	mustContain(t, st, `"type": "symlink"`, "unreachable (path_outside_sandbox)")
	// grep over the whole grant does not follow the links out.
	mustContain(t, f.ok("grep", map[string]any{"pattern": "TOPSECRET"}), "(no matches)")
	mustNotContain(t, f.ok("tree", map[string]any{"depth": 5}), "x.txt", "secret.txt (")
	mustNotContain(t, f.ok("glob", map[string]any{"pattern": "**/*.txt"}), "x.txt", "secret.txt")

	// A host path is a guest path like any other: it names nothing outside.
	abs := filepath.Join(host, "allowed_evil", "secret.txt")
	r := f.fail("read", map[string]any{"path": abs}, "not_found")
	mustNotContain(t, r.text, "TOPSECRET")

	// Every refusal is in the audit trail, tagged, and no event names a host path.
	refused := 0
	for _, e := range f.ring.Events() {
		if e.Tag == "" {
			t.Fatalf("untagged event %+v", e)
		}
		for _, s := range []string{e.Path, e.Dest, e.GuestPath} {
			if strings.Contains(s, host) && !strings.HasPrefix(e.GuestPath, host) {
				t.Fatalf("event names a host path: %+v", e)
			}
		}
		if e.Code == string(vfs.CodeOutside) {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no path_outside_sandbox event was audited")
	}
	if after := snapshot(t, host); !equalMaps(before, after) {
		t.Fatalf("the tree outside the grant changed:\nbefore %v\nafter  %v", before, after)
	}
	if got := f.content("file.txt"); got != "inside\n" {
		t.Fatalf("file.txt changed by a refused patch or move: %q", got)
	}
	if f.exists("stolen.txt") {
		t.Fatal("stolen.txt was created")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestHappyPathOnAPhysicalBackend(t *testing.T) {
	host, f := hostTree(t)
	f.ok("write", map[string]any{"path": "src/a.go", "content": "package a\n"})
	f.ok("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: src/a.go\n*** Move to: pkg/a.go\n@@\n-package a\n+package b\n*** End Patch"})
	got, err := os.ReadFile(filepath.Join(host, "allowed", "pkg", "a.go"))
	if err != nil || string(got) != "package b\n" {
		t.Fatalf("host file after the patch: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(host, "allowed", "src", "a.go")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the moved file is still there: %v", err)
	}
}

// refuseWrite is a hook that refuses writes to one path, as a failing disk would.
type refuseWrite string

func (h refuseWrite) Before(_ context.Context, r *policy.Request) error {
	if r.Op.Writes() && r.Path == string(h) {
		return errors.New("disk full")
	}
	return nil
}
func (refuseWrite) After(context.Context, *policy.Request, error) {}

func TestApplyPatch(t *testing.T) {
	files := map[string]string{
		"a.txt":     "one\ntwo\nthree\n",
		"b.txt":     "alpha\nbeta\n",
		"del.txt":   "bye\n",
		"mv/src.py": "def f():\n    return 1\n",
	}
	f := newFixture(t, files)
	patch := `*** Begin Patch
*** Update File: a.txt
@@
 one
-two
+TWO
*** Add File: new/dir/n.txt
+fresh
*** Delete File: del.txt
*** Update File: mv/src.py
*** Move to: mv/dst.py
@@ def f():
-    return 1
+    return 2
*** End Patch`
	diff := f.ok("apply_patch", map[string]any{"patch": patch, "dry_run": true})
	mustContain(t, diff, "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
		"--- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1 @@\n+fresh\n", "+++ /dev/null", "+++ b/mv/dst.py")
	if f.content("a.txt") != files["a.txt"] || f.exists("new") || !f.exists("del.txt") {
		t.Fatal("dry_run changed something")
	}
	out := f.ok("apply_patch", map[string]any{"input": patch})
	if out != "M a.txt\nA new/dir/n.txt\nD del.txt\nR mv/src.py -> mv/dst.py\n" {
		t.Fatalf("summary %q", out)
	}
	if f.content("a.txt") != "one\nTWO\nthree\n" || f.content("new/dir/n.txt") != "fresh\n" || f.exists("del.txt") ||
		f.exists("mv/src.py") || f.content("mv/dst.py") != "def f():\n    return 2\n" {
		t.Fatal("patch not applied as written")
	}

	// All or nothing: the second file's hunk does not apply, so the first is untouched.
	bad := "*** Begin Patch\n*** Update File: b.txt\n@@\n-alpha\n+ALPHA\n*** Update File: a.txt\n@@\n-nope\n+x\n*** End Patch"
	r := f.fail("apply_patch", map[string]any{"patch": bad}, "conflict")
	mustContain(t, r.text, "nothing was changed", "file 2 of the patch")
	if r.path != "a.txt" || f.content("b.txt") != files["b.txt"] {
		t.Fatalf("failed patch: path %q, b.txt %q", r.path, f.content("b.txt"))
	}
	f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: b.txt\n+x\n*** End Patch"}, "already_exists")
	f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Delete File: ghost\n*** End Patch"}, "not_found")
	f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Delete File: new\n*** End Patch"}, "is_a_directory")
	f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: b.txt\n*** Move to: a.txt\n*** End Patch"}, "already_exists")
	f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Delete File: b.txt\n*** Delete File: ./b.txt\n*** End Patch"}, "invalid_path")
	r = f.fail("apply_patch", map[string]any{"patch": "*** Update File: b.txt"}, "invalid_argument")
	mustContain(t, r.text, "is malformed", "Begin Patch")
	f.fail("apply_patch", map[string]any{}, "invalid_argument")
	f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Delete File: b.txt\n*** End Patch", "input": "other"}, "invalid_argument")
	if f.content("b.txt") != files["b.txt"] {
		t.Fatal("a refused patch changed b.txt")
	}
}

// TestApplyPatchChecksWritesFirst: a write the policy refuses stops the patch
// before anything is written (no write is even tried); a read-only mount, which
// only the backend knows about, is met at the write and rolled back.
func TestApplyPatchChecksWritesFirst(t *testing.T) {
	files := map[string]string{"a.txt": "a\n", "home/.bashrc": "# rc\n", "ro/r.txt": "r\n"}
	m := memory.New()
	plain, _ := dir.New(m)
	populate(t, plain, files)
	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("w"), m, vfs.MountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ns.Mount(vfs.MustParse("ro"), m, vfs.MountOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	ring := audit.NewRing(1024)
	d, _ := dir.New(ns, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring))
	cs := connect(t, d, mcpserver.Options{})
	patch := func(target string) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n*** Update File: w/a.txt\n@@\n-a\n+A\n*** Delete File: " + target + "\n*** End Patch"}
	}
	r := failWith(t, cs, "apply_patch", patch("w/home/.bashrc"), "fs_permission_denied")
	mustContain(t, r.text, "nothing was changed")
	mustNotContain(t, r.text, "rolled back")
	for _, e := range ring.Events() {
		if e.Op == "write" || e.Op == "remove" {
			t.Fatalf("a refused patch tried %s %s", e.Op, e.Path)
		}
	}
	r = failWith(t, cs, "apply_patch", patch("ro/a.txt"), "read_only")
	mustContain(t, r.text, "the patch was rolled back: no file was changed")
	if got, _ := plain.ReadFile(context.Background(), "a.txt"); string(got) != "a\n" {
		t.Fatalf("a.txt changed: %q", got)
	}
}

func TestApplyPatchRollsBackAFailedWrite(t *testing.T) {
	files := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "gone.txt": "g\n", "m.txt": "m\n"}
	f := newFixture(t, files, dir.WithHooks(refuseWrite("z.txt")))
	// Every change before z.txt's write is applied, then undone.
	patch := `*** Begin Patch
*** Update File: a.txt
@@
-a
+A
*** Delete File: gone.txt
*** Add File: fresh/dir/new.txt
+new
*** Update File: m.txt
*** Move to: moved/m.txt
@@
-m
+M
*** Add File: z.txt
+z
*** End Patch`
	r := f.fail("apply_patch", map[string]any{"patch": patch}, "fs_permission_denied")
	mustContain(t, r.text, "rolled back", "no file was changed")
	for name, want := range files {
		if got := f.content(name); got != want {
			t.Fatalf("%s after rollback: %q, want %q", name, got, want)
		}
	}
	for _, p := range []string{"fresh", "moved", "z.txt"} {
		if f.exists(p) {
			t.Fatalf("%s survived the rollback", p)
		}
	}
}
