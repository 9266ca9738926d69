package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/authority"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// TestRunOnGrantSet: capfs run --grants FILE shows the command exactly the
// grants of the set (read on docs, read-write on src, and read on a second root,
// lib), at /grants/ROOT/PATH; nothing else of the namespace is visible, a write to
// a read grant fails inside, the write grant's change comes back, and the audit
// trail records it under the grant's id with the run's tag.
func TestRunOnGrantSet(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"docs/guide.md": "GUIDE", "src/main.c": "int main;", "secret/notes": "PRIVATE"})
	libRoot := t.TempDir()
	writeTree(t, libRoot, map[string]string{"util.h": "UTIL"})
	// The host's authority serializes the subject's grants (its roots are named
	// as the CLI names its mounts).
	ctx := context.Background()
	mem := memory.New()
	for _, d := range []string{"docs", "src"} {
		if err := mem.Mkdir(ctx, vfs.MustParse(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := authority.New()
	if err := a.Register("project", mem); err != nil {
		t.Fatal(err)
	}
	if err := a.Register("lib", memory.New()); err != nil {
		t.Fatal(err)
	}
	sub := authority.Subject{Kind: "agent", ID: "a1"}
	for _, g := range []struct {
		root, path string
		access     []authority.Access
	}{
		{"project", "docs", []authority.Access{authority.List, authority.Metadata, authority.Read}},
		{"project", "src", []authority.Access{authority.List, authority.Metadata, authority.Read, authority.Write, authority.Delete}},
		{"lib", ".", []authority.Access{authority.List, authority.Metadata, authority.Read}},
	} {
		if _, _, err := a.Grant(ctx, authority.GrantRequest{Subject: sub, Root: g.root, Path: g.path, Access: g.access, Reason: "test", Source: authority.SourceUserApproval}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.Marshal(a.GrantSetFor(sub))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "grants.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	script := `cat /grants/project/docs/guide.md; echo; cat /grants/lib/util.h; echo; ls /grants/project; ` +
		`if echo x > /grants/lib/new 2>/dev/null; then echo WROTE-LIB; fi; ` +
		`if cat /grants/project/secret/notes 2>/dev/null; then echo SAW-SECRET; fi; ` +
		`if echo x > /grants/project/docs/new 2>/dev/null; then echo WROTE-READ-GRANT; fi; ` +
		`echo made > /grants/project/src/new.c`
	r := runCapfs(t, root, "--audit", auditLog, "-m", "project=physical:"+root, "-m", "lib=physical:"+libRoot, "run", "--grants", file, "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "GUIDE") || !strings.Contains(r.stdout, "UTIL") {
		t.Errorf("the read grants' files were not readable:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "SAW-SECRET") || strings.Contains(r.stdout, "WROTE-READ-GRANT") || strings.Contains(r.stdout, "WROTE-LIB") || strings.Contains(r.stdout, "secret") {
		t.Errorf("the sandbox saw or wrote more than its grants:\n%s", r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(root, "src/new.c")); err != nil || string(b) != "made\n" {
		t.Errorf("src/new.c = %q, %v (the write grant's change did not come back)\n%s", b, err, r.stderr)
	}
	for _, p := range []string{filepath.Join(root, "docs/new"), filepath.Join(libRoot, "new")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: a read grant was writable", p)
		}
	}
	// The sync-back's write is audited under the write grant's id, with the
	// run's tag; the checkout's reads under the grants' ids too.
	wrote := false
	for _, ev := range readAudit(t, auditLog) {
		if strings.HasSuffix(ev.Path, "new.c") && ev.Grant != "" && strings.HasPrefix(ev.Tag, "run:") {
			wrote = true
			if !strings.Contains(r.stderr, "grant "+ev.Grant) {
				t.Errorf("the write was audited under grant %s, which the run did not report:\n%s", ev.Grant, r.stderr)
			}
		}
	}
	if !wrote {
		t.Errorf("no audit event records the write of src/new.c under a grant id and the run's tag")
	}
	// The other run flags do not mix with --grants; a set naming an unknown root is refused.
	if r := runCapfs(t, root, "run", "--grants", file, "--work", "project", "--", "true"); r.code != 2 {
		t.Errorf("--grants with --work: exit %d, want 2", r.code)
	}
	bad := strings.ReplaceAll(string(data), `"root":"project"`, `"root":"nosuch"`)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCapfs(t, root, "run", "--grants", file, "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "nosuch") {
		t.Errorf("unknown root: exit %d, %s", r.code, r.stderr)
	}
}
