//go:build linux

package authority

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
)

func sandboxRunner(t *testing.T) *sandbox.Runner {
	t.Helper()
	r := sandbox.Default()
	if err := r.Probe(ctx); err != nil {
		t.Skipf("no working sandbox here (bubblewrap; make sysdeps installs it): %v", err)
	}
	return r
}

// A host grants one subject read on one root and write on another: the
// sandboxed command sees exactly those, writes come back through the write
// grant (audited under its id and the wrappers), and the read grant stays
// read-only.
func TestRunOnGrants(t *testing.T) {
	runner := sandboxRunner(t)
	ring := audit.NewRing(10000)
	a := New(WithAudit(ring))
	src := memory.New()
	srcDir, _ := dir.New(src)
	must(t, srcDir.WriteFile(ctx, "a.txt", []byte("from the workspace\n"), 0o644))
	out := memory.New()
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindWorkspace, ID: "conv1"}, src))
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindArtifact, ID: "out"}, out))
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindSecret, ID: "creds"}, memory.New()))
	must(t, a.Register("unrelated", memory.New()))
	_, rg, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "workspace:conv1", Reason: "read", Source: SourceConversation})
	must(t, err)
	_, wg, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "artifact:out", Access: []Access{List, Metadata, Read, Write}, Reason: "write", Source: SourceCore})
	must(t, err)
	_, sg, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "secret:creds", Access: []Access{Read}, Reason: "s", Source: SourceUserApproval})
	must(t, err)

	var stdout, stderr bytes.Buffer
	script := `ls /grants; cat /grants/workspace_conv1/a.txt; echo made > /grants/artifact_out/new.txt; ` +
		`if echo x > /grants/workspace_conv1/b.txt 2>/dev/null; then echo WROTE-RO; fi`
	rep, err := a.Run(ctx, RunRequest{Subject: agent, Path: "sh", Args: []string{"-c", script}, Stdout: &stdout, Stderr: &stderr},
		SandboxOptions{Runner: runner})
	if err != nil {
		t.Fatalf("Run: %v\nstderr: %s", err, stderr.String())
	}
	if got := stdout.String(); got != "artifact_out\nworkspace_conv1\nfrom the workspace\n" {
		t.Fatalf("the sandbox saw:\n%s\nstderr: %s", got, stderr.String())
	}
	if len(rep.Skipped) != 1 || !strings.HasPrefix(rep.Skipped[0], sg.ID) {
		t.Fatalf("skipped %v", rep.Skipped)
	}
	outDir, _ := dir.New(out)
	if b, err := outDir.ReadFile(ctx, "new.txt"); err != nil || string(b) != "made\n" {
		t.Fatalf("new.txt: %q %v", b, err)
	}
	if ok, _ := srcDir.Exists(ctx, "b.txt"); ok {
		t.Fatal("the read grant was written")
	}
	// The sync-back's write is audited under the write grant, tagged with the run and its wrappers.
	found := false
	for _, e := range ring.Events() {
		if e.Grant == wg.ID && e.Path == "new.txt" && strings.Contains(e.Tag, "run:"+rep.RunID) && strings.Contains(e.Tag, "wrappers=bubblewrap") {
			found = true
		}
		if e.Grant == rg.ID && e.Op != "" && strings.HasPrefix(e.Op, "check.") {
			t.Fatalf("the read grant was asked to write: %+v", e)
		}
	}
	if !found {
		t.Fatalf("no audit event of the sync-back's write under grant %s", wg.ID)
	}
	// Naming the secret grant is refused.
	if _, err := a.Run(ctx, RunRequest{Subject: agent, Grants: []string{sg.ID}, Path: "true"}, SandboxOptions{Runner: runner}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("secret grant bound: %v", err)
	}
}

// Revoking the write grant while the command runs makes its sync-back refuse:
// nothing reaches the root, and the checkout is kept and reported.
func TestRunRevokedMidRun(t *testing.T) {
	runner := sandboxRunner(t)
	t.Setenv(syncback.EnvStateDir, t.TempDir())
	a := New()
	out := memory.New()
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindArtifact, ID: "out"}, out))
	_, wg, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "artifact:out", Access: []Access{List, Metadata, Read, Write}, Reason: "w", Source: SourceCore})
	must(t, err)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	var rep *RunReport
	var runErr error
	go func() {
		defer close(done)
		rep, runErr = a.Run(ctx, RunRequest{Subject: agent, Path: "sh", Args: []string{"-c", "echo x > f.txt; echo ready; read line"},
			Stdin: inR, Stdout: outW}, SandboxOptions{Runner: runner, Sync: syncback.Options{JournalDir: t.TempDir()},
			Record: func(m GrantMount) (string, string) { return "work/" + m.Grant, "test:" + m.Grant }})
		outW.Close()
	}()
	line, _ := bufio.NewReader(outR).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("command said %q", line)
	}
	must(t, a.Revoke(wg.ID))
	inW.Write([]byte("go\n"))
	inW.Close()
	go io.Copy(io.Discard, outR)
	<-done
	if runErr == nil {
		t.Fatal("sync-back of a revoked grant succeeded")
	}
	if sr := rep.Syncs[wg.ID]; sr != nil && len(sr.Applied) > 0 {
		t.Fatalf("applied %+v", sr.Applied)
	}
	outDir, _ := dir.New(out)
	if ok, _ := outDir.Exists(ctx, "f.txt"); ok {
		t.Fatal("f.txt reached the root after revocation")
	}
	// The refused changes stay in the kept checkout, named in the report and
	// recorded for a later sync-back.
	if len(rep.Mounts) != 1 || rep.Mounts[0].Kept == "" || rep.Mounts[0].KeptID == "" {
		t.Fatalf("report mounts %+v: the kept checkout is not named", rep.Mounts)
	}
	defer os.RemoveAll(rep.Mounts[0].Kept)
	recs, _, err := run.ReadKept()
	if err != nil || len(recs) != 1 || recs[0].ID != rep.Mounts[0].KeptID || recs[0].Work != "work/"+wg.ID || recs[0].Label != "test:"+wg.ID {
		t.Fatalf("kept records %+v, %v", recs, err)
	}
}

// Run acts where the grants lead: write grants on d/g -> ../.git and
// hk -> .git/hooks check out .git and .git/hooks and sync back through Dirs
// that decide there, so neither .git/config nor a pre-commit hook changes;
// a read grant on w shows the directory w was when granted, though w has
// since become a link to src. Before the fix, .git/config was rewritten and
// the hook added.
func TestRunActsWhereGrantsLead(t *testing.T) {
	runner := sandboxRunner(t)
	for _, rs := range resolvers {
		t.Run(rs.name, func(t *testing.T) {
			root := linkedProject(t)
			ring := audit.NewRing(10000)
			a := New(WithPolicy(policy.Defaults()), WithAudit(ring), WithGitGuard())
			must(t, a.Register("project", physicalRoot(t, root, rs.mode)))
			var ids []string
			for _, p := range []string{"d/g", "hk", "w"} {
				access := FullAccess()
				if p == "w" {
					access = ReadOnlyAccess()
				}
				_, g, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "project", Path: p, Access: access, Reason: "test", Source: SourceUserApproval})
				must(t, err)
				ids = append(ids, g.ID)
			}
			must(t, os.Rename(filepath.Join(root, "w"), filepath.Join(root, "w.old")))
			must(t, os.Symlink("src", filepath.Join(root, "w")))

			var stdout, stderr bytes.Buffer
			script := `printf '[core]\n\tfsmonitor = "touch /tmp/owned"\n' > /grants/project/d/g/config 2>/dev/null; ` +
				`printf '#!/bin/sh\necho owned\n' > /grants/project/hk/pre-commit 2>/dev/null; ` +
				`ls /grants/project/w; true`
			rep, err := a.Run(ctx, RunRequest{Subject: agent, Grants: ids, Path: "sh", Args: []string{"-c", script}, Stdout: &stdout, Stderr: &stderr},
				SandboxOptions{Runner: runner})
			if rep == nil || rep.Result == nil {
				t.Fatalf("Run: %v\nstderr: %s", err, stderr.String())
			}
			if data, _ := os.ReadFile(filepath.Join(root, ".git/config")); string(data) != "[core]\n" {
				t.Fatalf(".git/config = %q (run err %v)", data, err)
			}
			if _, err := os.Lstat(filepath.Join(root, ".git/hooks/pre-commit")); err == nil {
				t.Fatal(".git/hooks/pre-commit was added")
			}
			if sr := rep.Syncs[ids[1]]; err == nil || sr == nil || len(sr.Refused) != 1 || sr.Refused[0].Change.Path != "pre-commit" {
				t.Fatalf("the sync-back of the grant on hk: %+v, %v; want pre-commit refused", sr, err)
			}
			if got := stdout.String(); got != "a.txt\n" {
				t.Fatalf("the read grant on w showed %q, want a.txt (w when granted)", got)
			}
			want := map[string]string{ids[0]: ".git", ids[1]: ".git/hooks", ids[2]: "w"}
			for _, m := range rep.Mounts {
				if m.Resolved != want[m.Grant] {
					t.Errorf("mount %+v, want resolved %q", m, want[m.Grant])
				}
			}
			// Whatever was checked out or refused was decided at the canonical paths.
			for _, e := range ring.Events() {
				if e.Grant != "" && (strings.HasPrefix(e.Path, "d/") || strings.HasPrefix(e.Path, "hk")) {
					t.Fatalf("an event names a path through a link: %+v", e)
				}
			}
		})
	}
}
