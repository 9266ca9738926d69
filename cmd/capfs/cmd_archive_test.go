package main

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/archive/archivetest"
)

// TestExtractAndArchiveCommands drives capfs extract and capfs archive as a
// user would: a hostile tar (zip slip, an absolute name, a link out, a setuid
// file, a secret) lands only its safe entries, a refused archive (--strict)
// changes nothing, and capfs archive writes a reproducible tar.zst that
// extracts back to the same files.
func TestExtractAndArchiveCommands(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	writeTree(t, root, map[string]string{"dest/keep.txt": "keep"})
	tarFile := filepath.Join(t.TempDir(), "in.tar.zst")
	data := archivetest.Zst(archivetest.Tar(
		archivetest.Ent{Name: "ok/a.txt", Body: "A"},
		archivetest.Ent{Name: "ok/run.sh", Body: "#!/bin/sh\n", Mode: 0o4777},
		archivetest.Ent{Name: "../../" + filepath.Base(outside) + "/slip", Body: "SLIP"},
		archivetest.Ent{Name: "/abs", Body: "ABS"},
		archivetest.Ent{Name: "up", Type: tar.TypeSymlink, Linkname: "../../.."},
		archivetest.Ent{Name: ".env", Body: "TOKEN=1"},
	))
	if err := os.WriteFile(tarFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, root)
	// --strict refuses the archive as a whole: nothing changes.
	r := runCapfs(t, root, "extract", "--strict", tarFile, "project/dest")
	if r.code == 0 {
		t.Fatalf("--strict extract of a hostile archive succeeded:\n%s%s", r.stdout, r.stderr)
	}
	if after := snapshotDir(t, root); after != before {
		t.Fatalf("a refused archive changed the project:\nbefore %s\nafter  %s", before, after)
	}
	r = runCapfs(t, root, "extract", "--json", tarFile, "project/dest")
	if r.code != 1 {
		t.Fatalf("extract: exit %d (want 1: some entries left out):\n%s%s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		Extracted []struct{ Path string }
		Filtered  []struct{ Name, Reason string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	got := map[string]bool{}
	for _, e := range res.Extracted {
		got[e.Path] = true
	}
	for _, want := range []string{"ok/a.txt", "ok/run.sh"} {
		if !got[want] {
			t.Errorf("%s not extracted: %+v", want, res)
		}
	}
	if len(res.Filtered) < 4 {
		t.Errorf("left out %d entries, want the slip, the absolute name, the link and the secret: %+v", len(res.Filtered), res.Filtered)
	}
	if b, err := os.ReadFile(filepath.Join(root, "dest/ok/a.txt")); err != nil || string(b) != "A" {
		t.Errorf("dest/ok/a.txt = %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(root, "dest/ok/run.sh")); err != nil || st.Mode()&(os.ModeSetuid|0o022) != 0 {
		t.Errorf("run.sh mode %v, %v: setuid or group/other write kept", st.Mode(), err)
	}
	for _, p := range []string{filepath.Join(outside, "slip"), filepath.Join(root, "abs"), filepath.Join(root, "dest/abs"), filepath.Join(root, "dest/.env"), filepath.Join(root, "dest/up")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after the extraction", p)
		}
	}
	// capfs archive: reproducible, and it extracts back.
	out1, out2 := filepath.Join(t.TempDir(), "a.tar.zst"), filepath.Join(t.TempDir(), "b.tar.zst")
	for _, out := range []string{out1, out2} {
		if r := runCapfs(t, root, "archive", "--mtime", "@0", "project/dest", out); r.code != 0 {
			t.Fatalf("archive: exit %d\n%s", r.code, r.stderr)
		}
	}
	a, _ := os.ReadFile(out1)
	b, _ := os.ReadFile(out2)
	if len(a) == 0 || string(a) != string(b) {
		t.Fatalf("two archives of the same tree differ (%d and %d bytes)", len(a), len(b))
	}
	writeTree(t, root, map[string]string{"back/.keep": ""})
	if r := runCapfs(t, root, "extract", out1, "project/back"); r.code != 0 {
		t.Fatalf("extract of our own archive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{"keep.txt", "ok/a.txt", "ok/run.sh"} {
		x, _ := os.ReadFile(filepath.Join(root, "dest", p))
		y, err := os.ReadFile(filepath.Join(root, "back", p))
		if err != nil || string(x) != string(y) {
			t.Errorf("back/%s = %q, %v; want %q", p, y, err, x)
		}
	}
	if r := runCapfs(t, root, "archive", "--format", "rar", "project/dest", out1); r.code != 2 || !strings.Contains(r.stderr, "--format") {
		t.Errorf("--format rar: exit %d, %s", r.code, r.stderr)
	}
}

// snapshotDir lists every entry under root with its size, for comparisons.
func snapshotDir(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(root, p)
			b.WriteString(rel + ":" + info.Mode().String() + ";")
		}
		return nil
	})
	return b.String()
}

// TestMCPExtractArchive: the extract_archive tool of a real capfs mcp extracts
// the safe entries of an archive in the project and lists the rest with reasons.
func TestMCPExtractArchive(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"out/.keep": ""})
	data := archivetest.Tar(
		archivetest.Ent{Name: "lib/a.go", Body: "package lib"},
		archivetest.Ent{Name: "../escape", Body: "X"},
		archivetest.Ent{Name: ".git/hooks/pre-commit", Body: "#!/bin/sh\nevil"},
	)
	if err := os.WriteFile(filepath.Join(root, "in.tar"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cs := mcpClient(t, root)
	defer cs.Close()
	text, isErr, _ := mcpCall(t, cs, "extract_archive", map[string]any{"path": "project/in.tar", "dest": "project/out"})
	if isErr {
		t.Fatalf("extract_archive: %s", text)
	}
	if b, err := os.ReadFile(filepath.Join(root, "out/lib/a.go")); err != nil || string(b) != "package lib" {
		t.Errorf("out/lib/a.go = %q, %v\n%s", b, err, text)
	}
	for _, p := range []string{"escape", "out/.git"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s exists after extract_archive:\n%s", p, text)
		}
	}
	if !strings.Contains(text, "traversal") || !strings.Contains(text, "policy") {
		t.Errorf("the result does not say why entries were left out:\n%s", text)
	}
	// A read-only server has no such tool.
	ro := mcpClient(t, root, "--read-only")
	defer ro.Close()
	tools, err := ro.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "extract_archive" {
			t.Error("a read-only server lists extract_archive")
		}
	}
}
