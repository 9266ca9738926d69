//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/authority"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
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

// TestRunGrantRevokedMidRun: the grant file is the authority while the command
// runs. The command writes through its write grant, the host then marks that
// grant revoked in the file, and the sync-back refuses the change: nothing
// lands, and capfs exits 3 (refused at sync-back).
func TestRunGrantRevokedMidRun(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"src/main.c": "int main;"})
	ctx := context.Background()
	mem := memory.New()
	if err := mem.Mkdir(ctx, vfs.MustParse("src"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := authority.New()
	if err := a.Register("project", mem); err != nil {
		t.Fatal(err)
	}
	sub := authority.Subject{Kind: "agent", ID: "a2"}
	if _, _, err := a.Grant(ctx, authority.GrantRequest{Subject: sub, Root: "project", Path: "src", Reason: "test", Source: authority.SourceUserApproval,
		Access: []authority.Access{authority.List, authority.Metadata, authority.Read, authority.Write}}); err != nil {
		t.Fatal(err)
	}
	set := a.GrantSetFor(sub)
	data, _ := json.Marshal(set)
	file := filepath.Join(t.TempDir(), "grants.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(capfsBinary(t), "-m", "project=physical:"+root, "--no-default-mounts", "run", "--grants", file, "--",
		"sh", "-c", "echo made > /grants/project/src/new.c; echo ready; read x")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errLines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errLines <- sc.Text()
		}
		close(errLines)
	}()
	out := bufio.NewScanner(stdout)
	for out.Scan() && out.Text() != "ready" {
	}
	// The host revokes the grant in the file.
	set.Grants[0].Status = authority.Revoked
	data, _ = json.Marshal(set)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []string
	watchdog := time.After(60 * time.Second) // a hang guard, not a timing assertion
wait:
	for {
		select {
		case line, ok := <-errLines:
			if !ok {
				break wait
			}
			seen = append(seen, line)
			if strings.Contains(line, "revoked") {
				break wait
			}
		case <-watchdog:
			cmd.Process.Kill()
			t.Fatalf("capfs never reported the grant revoked:\n%s", strings.Join(seen, "\n"))
		}
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	for line := range errLines {
		seen = append(seen, line)
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 3 {
		t.Errorf("exit %d, want 3 (the revoked grant's change refused):\n%s", code, strings.Join(seen, "\n"))
	}
	if _, err := os.Stat(filepath.Join(root, "src/new.c")); err == nil {
		t.Errorf("src/new.c landed through a grant revoked mid-run:\n%s", strings.Join(seen, "\n"))
	}
}

// grantSetFile serializes the grants of subject sub that a host authority
// makes over root "project" (host directory root), one per path and access,
// and returns the file. The records of the paths in old say nothing of where
// they led, as records written before they kept it.
func grantSetFile(t *testing.T, root string, sub authority.Subject, grants map[string][]authority.Access, old ...string) string {
	t.Helper()
	ctx := context.Background()
	b, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a := authority.New()
	if err := a.Register("project", b); err != nil {
		t.Fatal(err)
	}
	for p, access := range grants {
		if _, _, err := a.Grant(ctx, authority.GrantRequest{Subject: sub, Root: "project", Path: p, Access: access, Reason: "test", Source: authority.SourceUserApproval}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.Marshal(a.GrantSetFor(sub))
	if err != nil {
		t.Fatal(err)
	}
	var set map[string]any
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	for _, g := range set["grants"].([]any) {
		if rec := g.(map[string]any); slices.Contains(old, rec["path"].(string)) {
			delete(rec, "resolved")
		}
	}
	if data, err = json.Marshal(set); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "grants.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRunGrantsDecidedWhereTheyLead: capfs run --grants resolves each grant's
// path to where it leads in the project and decides it there, with the
// session's policy and GitGuard, as capfs run --work does. A read grant on
// keys -> .ssh is refused and shows nothing; write grants on hk -> .git/hooks
// and d/g -> ../.git (one recorded before records kept where they led) run,
// but the sync-back refuses the pre-commit hook, .git/config is bound
// read-only, and the audit trail names .git paths, never the links; a grant
// whose path became a link after it was granted is refused. Before the fix,
// the sandbox read id_rsa, and the hook and .git/config came back.
func TestRunGrantsDecidedWhereTheyLead(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{".ssh/id_rsa": "PRIVATE KEY", ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n",
		".git/hooks/README": "hooks", ".git/objects/.keep": "", ".git/refs/.keep": "", "src/main.c": "int main;", "w/a.txt": "A"})
	for link, target := range map[string]string{"keys": ".ssh", "hk": ".git/hooks", "d/g": "../.git"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	ro := []authority.Access{authority.List, authority.Metadata, authority.Read}
	rw := append(ro[:3:3], authority.Write, authority.Delete)
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	run := func(file, script string) result {
		t.Helper()
		return runCapfs(t, root, "--audit", auditLog, "--no-default-mounts", "-m", "project=physical:"+root,
			"run", "--grants", file, "--", "sh", "-c", script)
	}

	// A read grant on a link to .ssh, recorded before records kept where
	// they led.
	file := grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "k"}, map[string][]authority.Access{"keys": ro}, "keys")
	r := run(file, "cat /grants/project/keys/id_rsa")
	t.Logf("keys: exit %d, stderr:\n%s", r.code, r.stderr)
	if strings.Contains(r.stdout, "PRIVATE") || r.code == 0 || !strings.Contains(r.stderr, "fs_permission_denied") {
		t.Fatalf("a read grant on keys -> .ssh: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// Write grants on links into .git; the record of d/g predates Resolved.
	file = grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "g"}, map[string][]authority.Access{"hk": rw, "d/g": rw}, "d/g")
	r = run(file, `printf '[core]\n\tfsmonitor = "touch /tmp/owned"\n' > /grants/project/d/g/config; `+
		`printf '#!/bin/sh\necho owned\n' > /grants/project/hk/pre-commit; true`)
	t.Logf("hk, d/g: exit %d, stderr:\n%s", r.code, r.stderr)
	if r.code != 3 || !strings.Contains(r.stderr, "refused pre-commit") {
		t.Errorf("write grants into .git: exit %d, want 3 with pre-commit refused\nstderr:\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(root, ".git/hooks/pre-commit")); err == nil {
		t.Errorf(".git/hooks/pre-commit was added\nstderr:\n%s", r.stderr)
	}
	canon := false
	for _, ev := range readAudit(t, auditLog) {
		if ev.Grant == "" {
			continue
		}
		if strings.HasPrefix(ev.Path, "hk") || strings.HasPrefix(ev.Path, "d/") || strings.HasPrefix(ev.Path, "keys") {
			t.Errorf("an event names a path through a link: %+v", ev)
		}
		if ev.Path == ".git/hooks/pre-commit" {
			canon = true
		}
	}
	if !canon {
		t.Errorf("no audit event names .git/hooks/pre-commit")
	}

	// A grant whose path became a link after it was granted.
	file = grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "w"}, map[string][]authority.Access{"w": ro})
	if err := os.Rename(filepath.Join(root, "w"), filepath.Join(root, "w.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(root, "w")); err != nil {
		t.Fatal(err)
	}
	r = run(file, "cat /grants/project/w/main.c")
	t.Logf("w: exit %d, stderr:\n%s", r.code, r.stderr)
	if strings.Contains(r.stdout, "int main") || r.code == 0 || !strings.Contains(r.stderr, "now leads to") {
		t.Errorf("a grant on w, now a link to src: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunGrantsKeepProjectRules: the rules the session derives from the
// project's git configuration (core.hooksPath = tools/hooks) decide under
// --grants too, where paths are from the grant's root, as they do under
// --work: a write grant on the whole project cannot plant a hook there.
// Before the fix, the hook came back.
func TestRunGrantsKeepProjectRules(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"tools/hooks/README": "hooks\n", "src/main.c": "int main;"})
	cmd := exec.Command("git", "config", "core.hooksPath", "tools/hooks")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git config: %v\n%s", err, out)
	}
	rw := []authority.Access{authority.List, authority.Metadata, authority.Read, authority.Write, authority.Delete}
	file := grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "p"}, map[string][]authority.Access{".": rw})
	r := runCapfs(t, root, "--no-default-mounts", "-m", "project=physical:"+root, "run", "--grants", file, "--",
		"sh", "-c", `printf '#!/bin/sh\necho owned\n' > /grants/project/tools/hooks/pre-commit; echo made > /grants/project/src/new.c; true`)
	if _, err := os.Lstat(filepath.Join(root, "tools/hooks/pre-commit")); err == nil {
		t.Fatalf("a hook was planted in core.hooksPath through a grant: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	// Bound read-only in the sandbox, or refused at sync-back.
	if !strings.Contains(r.stderr, "Read-only file system") && !strings.Contains(r.stderr, "refused pre-commit") {
		t.Errorf("exit %d: the hook was neither bound read-only nor refused\nstderr:\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(root, "src/new.c")); err != nil || string(b) != "made\n" {
		t.Errorf("src/new.c = %q, %v: the grant's allowed change did not come back", b, err)
	}
}
