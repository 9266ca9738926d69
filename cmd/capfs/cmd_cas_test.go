package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
)

// runCAS runs a capfs command line in process, with the cas command added to the
// root (cmd_cas.go), and returns stdout, stderr and the exit code.
func runCAS(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	o := &globalOptions{}
	root := &cobra.Command{Use: "capfs", SilenceErrors: true, SilenceUsage: true}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	o.addFlags(root)
	root.AddCommand(newCASCmd(o), newSnapshotCmd(o))
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		reportError(&errb, err)
	}
	return out.String(), errb.String(), exitCodeOf(err)
}

func TestCASCommands(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	store := t.TempDir()
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"a.txt": "one\n", "src/main.go": "package main\n", ".env": "SECRET=1\n"})
	os.Symlink("a.txt", filepath.Join(proj, "link"))
	m := []string{"--no-default-mounts", "-m", "p=physical:" + proj, "-m", "out=memory:"}
	st := "--store=" + store

	out, errs, code := runCAS(t, append(m, "cas", st, "snapshot", "save", "v1", "p")...)
	if code != 0 || !strings.HasPrefix(out, "v1 ") {
		t.Fatalf("save: %d %q %q", code, out, errs)
	}
	v1 := strings.Fields(out)[1]
	os.WriteFile(filepath.Join(proj, "a.txt"), []byte("two\n"), 0o644)
	os.Remove(filepath.Join(proj, "src/main.go"))
	os.WriteFile(filepath.Join(proj, "new.txt"), []byte("new\n"), 0o755)
	if out, errs, code = runCAS(t, append(m, "cas", st, "snapshot", "save", "v2", "p")...); code != 0 {
		t.Fatalf("save v2: %d %q %q", code, out, errs)
	}
	out, _, code = runCAS(t, "cas", st, "snapshot", "list")
	if code != 0 || !strings.Contains(out, "v1\t"+v1) || !strings.Contains(out, "v2\t") {
		t.Fatalf("list: %d %q", code, out)
	}
	// "capfs snapshot" is the same group over the same store.
	if out2, errs, code := runCAS(t, "snapshot", st, "list"); code != 0 || out2 != out {
		t.Fatalf("capfs snapshot list: %d %q %q; capfs cas snapshot list said %q", code, out2, errs, out)
	}
	if out, errs, code := runCAS(t, append(m, "snapshot", st, "save", "v1b", "p")...); code != 0 || !strings.HasPrefix(out, "v1b ") {
		t.Fatalf("capfs snapshot save: %d %q %q", code, out, errs)
	}
	out, errs, code = runCAS(t, "cas", st, "snapshot", "diff", "v1", "v2")
	if want := "M a.txt\nA new.txt\nD src/main.go\n"; code != 0 || out != want {
		t.Fatalf("diff: %d %q %q, want %q", code, out, errs, want)
	}
	// The policy kept .env out of the snapshot.
	out, _, _ = runCAS(t, "cas", st, "snapshot", "diff", "v1", v1)
	if out != "" {
		t.Fatalf("diff of a name and its digest: %q", out)
	}
	// Mount by name and by digest; restore into another mount.
	mounts := []string{"--no-default-mounts", "-m", "s=cas:v1,store=" + store, "-m", "d=cas:" + v1 + ",store=" + store, "-m", "out=physical:" + t.TempDir()}
	out, errs, code = runCAS(t, append(mounts, "cas", st, "snapshot", "restore", "v1", "out/r")...)
	if code != 0 {
		t.Fatalf("restore: %d %q %q", code, out, errs)
	}
	out, errs, code = runCAS(t, append(mounts, "cas", st, "snapshot", "restore", "v1", "out/r")...)
	if code == 0 || !strings.Contains(errs, "exists") {
		t.Fatalf("restore over an existing directory: %d %q %q", code, out, errs)
	}
	out, errs, code = runCAS(t, append(mounts, "cas", st, "snapshot", "save", "again", "out/r")...)
	if code != 0 || strings.Fields(out)[1] != v1 {
		t.Fatalf("the restored tree snapshots to %q (%q), want %s", out, errs, v1)
	}
	out, errs, code = runCAS(t, append(mounts, "cas", st, "snapshot", "save", "fromcas", "s")...)
	if code != 0 || strings.Fields(out)[1] != v1 {
		t.Fatalf("snapshot of the cas mount = %q (%q), want %s", out, errs, v1)
	}
	out, _, code = runCAS(t, "cas", st, "verify")
	if code != 0 || !strings.Contains(out, "0 corrupt blobs, 0 broken snapshots") {
		t.Fatalf("verify: %d %q", code, out)
	}
	// Damage a blob: verify says so and exits 1.
	var victim string
	filepath.Walk(filepath.Join(store, "blobs"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && victim == "" {
			victim = p
		}
		return nil
	})
	os.WriteFile(victim, []byte{0, 'x'}, 0o600)
	out, _, code = runCAS(t, "cas", st, "verify")
	if code != 1 || !strings.Contains(out, "1 corrupt blobs") {
		t.Fatalf("verify of a damaged store: %d %q", code, out)
	}
	if _, _, code = runCAS(t, "cas", st, "gc", "--grace=0s"); code != 0 && code != 1 {
		t.Fatalf("gc: %d", code)
	}
	// Bad input.
	for _, args := range [][]string{
		{"cas", st, "snapshot", "save", "../x", "p"},
		{"cas", st, "snapshot", "diff", "v1"},
		{"-m", "x=cas:", "cas", st, "snapshot", "save", "n", "x"},
		{"-m", "x=cas:not a name", "cas", st, "snapshot", "save", "n", "x"},
	} {
		if _, _, code := runCAS(t, append([]string{"--no-default-mounts"}, args...)...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if _, err := parseMountFlag("x=cas:not a name", ""); err == nil {
		t.Error("a bad cas source parsed")
	}
	if _, _, code := runCAS(t, "--no-default-mounts", "-m", "x=cas:nosuch,store="+store, "cas", st, "snapshot", "restore", "v1", "x/y"); code == 0 {
		t.Error("mounting an unknown name succeeded")
	}
}

// TestCASMountInBinary mounts a snapshot by name and by digest in the capfs
// binary and reads it with ls and cat; writes are refused.
func TestCASMountInBinary(t *testing.T) {
	store, proj := t.TempDir(), t.TempDir()
	writeTree(t, proj, map[string]string{"a.txt": "hello\n", "d/b.txt": "bee\n"})
	st, err := cas.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.SnapshotHost(context.Background(), proj, cas.SnapshotOptions{Name: "v1"})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"cas:v1,store=" + store, "cas:" + root.String() + ",store=" + store} {
		r := runCapfs(t, proj, "--no-default-mounts", "-m", "s="+src, "cat", "s/d/b.txt").want(t, 0)
		if r.stdout != "bee\n" {
			t.Errorf("%s: cat = %q", src, r.stdout)
		}
		r = runCapfs(t, proj, "--no-default-mounts", "-m", "s="+src, "ls", "s").want(t, 0)
		if !strings.Contains(r.stdout, "a.txt") || !strings.Contains(r.stdout, "d") {
			t.Errorf("%s: ls = %q", src, r.stdout)
		}
	}
	r := runCapfsEnv(t, proj, []string{"CAPFS_CAS_STORE=" + store}, "--no-default-mounts", "-m", "s=cas:nosuch", "ls", "s")
	if r.code == 0 || !strings.Contains(r.stderr, "nosuch") {
		t.Errorf("unknown snapshot: %d %q", r.code, r.stderr)
	}
	noHostPath(t, r.stderr, store)
}
