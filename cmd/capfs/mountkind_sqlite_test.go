package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// TestSQLiteKind mounts sqlite:FILE, writes through it, and finds the data
// again in a second session; a second open while the first holds the file is
// refused with a message saying so; ,ro reads it meanwhile.
func TestSQLiteKind(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scratch.db")
	spec, err := parseMountFlag("scratch=sqlite:"+file+",quota=1MiB,sync=full", "")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "sqlite" || spec.Host != file || spec.Opts["quota"] != "1MiB" || spec.Opts["sync"] != "full" {
		t.Fatalf("parsed %+v", spec)
	}
	m, err := openMount(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := vfstest.WriteFile(ctx, m.Backend, vfs.MustParse("notes.txt"), []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := vfstest.WriteFile(ctx, m.Backend, vfs.MustParse("big"), make([]byte, 2<<20)); vfs.CodeOf(err) != vfs.CodeQuota {
		t.Fatalf("2 MiB into a 1 MiB quota: %v", err)
	}
	if _, err := openMount(spec, 0); err == nil || !strings.Contains(err.Error(), "in use by another capfs") {
		t.Fatalf("second open: %v", err)
	}
	ro, err := parseMountFlag("scratch=sqlite:"+file+",ro", "")
	if err != nil {
		t.Fatal(err)
	}
	rm, err := openMount(ro, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rm.Backend.Features().ReadOnly {
		t.Fatal("a ,ro sqlite mount is writable")
	}
	rm.Backend.(*sqlite.FS).Close()
	m.Backend.(*sqlite.FS).Close()

	m, err = openMount(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Backend.(*sqlite.FS).Close()
	got, err := vfstest.ReadFile(ctx, m.Backend, vfs.MustParse("notes.txt"))
	if err != nil || string(got) != "kept" {
		t.Fatalf("second session: %q, %v", got, err)
	}
	if _, err := parseMountFlag("scratch=sqlite:"+file+",sync=sometimes", ""); err == nil {
		t.Fatal("sync=sometimes accepted")
	}
	if _, err := parseMountFlag("scratch=sqlite:/no/such/dir/x.db", ""); err == nil {
		t.Fatal("a file in a missing directory accepted")
	}
}

// TestSQLiteSnapshotRestoreCmd takes a snapshot with "capfs sqlite snapshot",
// changes the file, and rolls it back with "capfs sqlite restore".
func TestSQLiteSnapshotRestoreCmd(t *testing.T) {
	tmp := t.TempDir()
	file, snap := filepath.Join(tmp, "s.db"), filepath.Join(tmp, "snap.db")
	f, err := sqlite.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := vfstest.WriteFile(ctx, f, vfs.MustParse("a"), []byte("before")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		c := newSQLiteCmd(&globalOptions{})
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&out)
		c.SetArgs(args)
		err := c.Execute()
		return out.String(), err
	}
	// A snapshot while the file is open for writing.
	if out, err := run("snapshot", file, snap); err != nil {
		t.Fatalf("snapshot: %v: %s", err, out)
	}
	if err := vfstest.WriteFile(ctx, f, vfs.MustParse("a"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, err := run("restore", snap, file); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("restore over an open file: %v", err)
	}
	f.Close()
	if out, err := run("restore", snap, file); err != nil {
		t.Fatalf("restore: %v: %s", err, out)
	}
	f, err = sqlite.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, _ := vfstest.ReadFile(ctx, f, vfs.MustParse("a"))
	if string(got) != "before" {
		t.Fatalf("after restore: %q", got)
	}
	if _, err := os.Stat(snap); err != nil {
		t.Fatal("restore consumed the snapshot")
	}
}

// TestScratchFileFor: one file per project directory, under XDG_DATA_HOME.
func TestScratchFileFor(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	a, err := mountkind.ScratchFile("/some/project", mountkind.Env{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := mountkind.ScratchFile("/other/project", mountkind.Env{})
	if a == b || !strings.HasPrefix(a, filepath.Join(data, "capfs", "scratch")+"/project-") {
		t.Fatalf("scratch files %s and %s", a, b)
	}
	var warn bytes.Buffer
	m, err := mcpScratchMount(vfs.MustParse("tmp"), "/some/project", mountkind.Env{MemoryQuota: 1 << 20}, false, &warn)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Backend.(*sqlite.FS).Close()
	if !m.Backend.Features().Persistent || m.Kind != "sqlite" {
		t.Fatalf("mcp scratch: %s, persistent %v", m.Kind, m.Backend.Features().Persistent)
	}
	// A second session on the same project falls back to memory, and says so.
	m2, err := mcpScratchMount(vfs.MustParse("tmp"), "/some/project", mountkind.Env{MemoryQuota: 1 << 20}, false, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Kind != mountkind.Memory.Name || !strings.Contains(warn.String(), "in use by another capfs") {
		t.Fatalf("second session: %s, warning %q", m2.Kind, warn.String())
	}
	m3, err := mcpScratchMount(vfs.MustParse("tmp"), "/some/project", mountkind.Env{MemoryQuota: 1 << 20}, true, &warn)
	if err != nil || m3.Kind != mountkind.Memory.Name {
		t.Fatalf("ephemeral: %v, %v", m3, err)
	}
}

// TestAgentFSKind mounts the AgentFS database agentfs-sdk wrote (the sqlite
// backend's testdata) read-only, and imports it into a scratch file.
func TestAgentFSKind(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agent.db")
	b, err := os.ReadFile("../../backends/sqlite/testdata/agentfs-0.4.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := parseMountFlag("agent=agentfs:"+db, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := openMount(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Backend.(*sqlite.FS).Close()
	got, err := vfstest.ReadFile(t.Context(), m.Backend, vfs.MustParse("d/hello.txt"))
	if err != nil || string(got) != "hello agentfs\n" || !spec.ReadOnly {
		t.Fatalf("agentfs mount: %q, %v, ro %v", got, err, spec.ReadOnly)
	}
	file := filepath.Join(t.TempDir(), "s.db")
	c := newSQLiteCmd(&globalOptions{})
	c.SetArgs([]string{"import-agentfs", db, file, "from/agent"})
	c.SetOut(new(bytes.Buffer))
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	f, err := sqlite.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err = vfstest.ReadFile(t.Context(), f, vfs.MustParse("from/agent/link"))
	if err != nil || string(got) != "hello agentfs\n" {
		t.Fatalf("imported: %q, %v", got, err)
	}
}

// TestSQLiteSqlarCmd exports a scratch mount's directory to a SQLite Archive
// and imports it into another directory, through the namespace.
func TestSQLiteSqlarCmd(t *testing.T) {
	tmp := t.TempDir()
	file, arc := filepath.Join(tmp, "s.db"), filepath.Join(tmp, "x.sqlar")
	f, err := sqlite.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := f.Mkdir(ctx, vfs.MustParse("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfstest.WriteFile(ctx, f, vfs.MustParse("d/a.txt"), []byte("archived")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run := func(args ...string) (string, error) {
		o := &globalOptions{}
		root := &cobra.Command{Use: "capfs", SilenceErrors: true, SilenceUsage: true}
		o.addFlags(root)
		root.AddCommand(newSQLiteCmd(o))
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"--no-default-mounts", "--audit", "off", "-m", "s=sqlite:" + file, "sqlite"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	if out, err := run("export-sqlar", "s/d", arc); err != nil || !strings.Contains(out, "1 files") {
		t.Fatalf("export: %v: %s", err, out)
	}
	if out, err := run("import-sqlar", arc, "s/copy"); err != nil {
		t.Fatalf("import: %v: %s", err, out)
	}
	f, err = sqlite.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := vfstest.ReadFile(ctx, f, vfs.MustParse("copy/a.txt"))
	if err != nil || string(got) != "archived" {
		t.Fatalf("imported: %q, %v", got, err)
	}
}
