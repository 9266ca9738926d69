//go:build linux

//lint:file-ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capfs/capfs/authority"
	"github.com/capfs/capfs/fuseexport"
)

// The ways in (issue 26, THREATS.md "Ways in"): each attack class tried
// through a route the other tests left out, with the openat2 and the portable
// resolvers.

// TestWaysInMCPRootsOverHTTP: capfs mcp --http --roots takes a client's roots
// as stdio does (issue 26, class 2): file:///, a directory outside every mount
// and a root whose symlink leads out are refused on stderr; a root inside a
// mount is a view of that directory only, under the session's policy.
func TestWaysInMCPRootsOverHTTP(t *testing.T) {
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			proj, outside := filepath.Join(work, "proj"), filepath.Join(work, "outside")
			writeTree(t, proj, map[string]string{"top.txt": "above the root\n", "sub/inside.txt": "inside the root\n", "sub/vault/note.txt": "vaulted\n"})
			writeTree(t, outside, map[string]string{"secret.txt": "not mounted\n"})
			if err := os.Symlink(outside, filepath.Join(proj, "sub", "escape")); err != nil {
				t.Fatal(err)
			}
			pol := filepath.Join(work, "policy.toml")
			rules := "default = \"allow\"\n\n[[rules]]\nname = \"vault\"\neffect = \"deny\"\npaths = [\"project/sub/vault\", \"project/sub/vault/**\"]\nreason = \"the vault\"\n"
			if err := os.WriteFile(pol, []byte(rules), 0o644); err != nil {
				t.Fatal(err)
			}
			cs, stderr := httpRootsClient(t, work, []string{"CAPFS_PHYSICAL_RESOLVER=" + res},
				[]string{"--policy", pol, "--no-default-mounts", "-m", "project=physical:" + proj, "mcp", "--roots", "--http", "127.0.0.1:0"},
				&mcp.Root{URI: "file:///", Name: "everything"},
				&mcp.Root{URI: "file://" + outside, Name: "outside"},
				&mcp.Root{URI: "file://" + filepath.Join(proj, "sub", "escape"), Name: "escape"},
				&mcp.Root{URI: "file://" + filepath.Join(proj, "sub"), Name: "sub"},
			)
			var mounts string
			for range 100 {
				mounts, _, _ = mcpCall(t, cs, "mounts", map[string]any{})
				if strings.Contains(mounts, `"/roots/sub"`) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.Contains(mounts, `"/roots/sub"`) {
				t.Fatalf("the root inside the mount is not shown over HTTP: %s\nstderr:\n%s", mounts, stderr.String())
			}
			for _, refused := range []string{`"/roots/root"`, `"/roots/outside"`, `"/roots/escape"`} {
				if strings.Contains(mounts, refused) {
					t.Errorf("a root outside the mounts is mounted (%s): %s", refused, mounts)
				}
			}
			if strings.Contains(mounts, work) {
				t.Errorf("the mounts tool shows a host path: %s", mounts)
			}
			if text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "roots/sub/inside.txt"}); isErr || !strings.Contains(text, "inside the root") {
				t.Errorf("reading inside the root: %q", text)
			}
			for _, p := range []string{"roots/sub/../top.txt", "roots/sub/escape/secret.txt", "roots/root/etc/hostname", "roots/outside/secret.txt", "roots/sub/vault/note.txt"} {
				text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": p})
				if !isErr || strings.Contains(text, "above the root") || strings.Contains(text, "not mounted") || strings.Contains(text, "vaulted") {
					t.Errorf("read %s through the roots over HTTP: %q (error %v)", p, text, isErr)
				}
			}
			if text, isErr, _ := mcpCall(t, cs, "write", map[string]any{"path": "roots/sub/escape/planted.txt", "content": "x"}); !isErr {
				t.Errorf("writing through the escaping link under a root succeeded: %q", text)
			}
			if _, err := os.Lstat(filepath.Join(outside, "planted.txt")); err == nil {
				t.Error("a write through a root landed outside the mounts")
			}
			cs.Close()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stderr.String(), "escape") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			log := stderr.String()
			for _, name := range []string{"file:///", "file://" + outside, "escape"} {
				if !strings.Contains(log, name) || !strings.Contains(log, "refused") {
					t.Errorf("stderr does not say the root %s was refused:\n%s", name, log)
				}
			}
		})
	}
}

// httpRootsClient starts capfs with args (an mcp --http command) in work and
// connects a client offering roots over streamable HTTP; it returns the
// session and the server's stderr. The server (in-process) is stopped at
// cleanup.
func httpRootsClient(t *testing.T, work string, env, args []string, roots ...*mcp.Root) (*mcp.ClientSession, *lockedBuffer) {
	t.Helper()
	srv := startCapfs(t, work, env, args...)
	stderr := srv.stderr
	endpoint := srv.waitStderr(t, "http://")
	client := mcp.NewClient(&mcp.Implementation{Name: "capfs-test", Version: "v0"}, nil)
	client.AddRoots(roots...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	return cs, stderr
}

// TestWaysInGrantsResolvers: capfs run --grants decides each grant where it
// leads with the portable resolver as with openat2 (issue 26, class 1): a read
// grant on keys -> .ssh shows nothing; write grants on hk -> .git/hooks come
// back refused; a grant whose path became a link after it was granted is
// refused. (TestRunGrantsDecidedWhereTheyLead runs with the default resolver.)
func TestWaysInGrantsResolvers(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, map[string]string{".ssh/id_rsa": "PRIVATE KEY", ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n",
				".git/hooks/README": "hooks", ".git/objects/.keep": "", ".git/refs/.keep": "", "src/main.c": "int main;", "w/a.txt": "A"})
			for link, target := range map[string]string{"keys": ".ssh", "hk": ".git/hooks"} {
				if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
					t.Fatal(err)
				}
			}
			ro := []authority.Access{authority.List, authority.Metadata, authority.Read}
			rw := append(ro[:3:3], authority.Write, authority.Delete)
			env := []string{"CAPFS_PHYSICAL_RESOLVER=" + res}
			run := func(file, script string) result {
				t.Helper()
				return runCapfsEnv(t, root, env, "--audit", "off", "--no-default-mounts", "-m", "project=physical:"+root,
					"run", "--grants", file, "--", "sh", "-c", script)
			}

			file := grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "k"}, map[string][]authority.Access{"keys": ro}, "keys")
			r := run(file, "cat /grants/project/keys/id_rsa")
			if strings.Contains(r.stdout, "PRIVATE") || r.code == 0 || !strings.Contains(r.stderr, "fs_permission_denied") {
				t.Errorf("a read grant on keys -> .ssh: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}

			file = grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "g"}, map[string][]authority.Access{"hk": rw})
			r = run(file, `printf '#!/bin/sh\necho owned\n' > /grants/project/hk/pre-commit; true`)
			if r.code != 3 || !strings.Contains(r.stderr, "refused pre-commit") {
				t.Errorf("a write grant on hk -> .git/hooks: exit %d, want 3 with pre-commit refused\nstderr:\n%s", r.code, r.stderr)
			}
			if _, err := os.Lstat(filepath.Join(root, ".git/hooks/pre-commit")); err == nil {
				t.Errorf(".git/hooks/pre-commit was added\nstderr:\n%s", r.stderr)
			}

			file = grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "w"}, map[string][]authority.Access{"w": ro})
			if err := os.Rename(filepath.Join(root, "w"), filepath.Join(root, "w.old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("src", filepath.Join(root, "w")); err != nil {
				t.Fatal(err)
			}
			r = run(file, "cat /grants/project/w/main.c")
			if strings.Contains(r.stdout, "int main") || r.code == 0 || !strings.Contains(r.stderr, "now leads to") {
				t.Errorf("a grant on w, now a link to src: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestWaysInMountWorkAndAliases: capfs mount decides where a path leads
// (issue 26, class 1), with the openat2 and the portable resolvers: --work
// naming a link to .ssh is refused before anything is mounted; through the
// mount, keys -> .ssh shows no key and hk -> .git/hooks takes no hook, and the
// host's files are unchanged.
func TestWaysInMountWorkAndAliases(t *testing.T) {
	if err := fuseexport.Available(); err != nil {
		t.Skipf("FUSE is not usable here (needs /dev/fuse and root or fusermount3; make sysdeps installs fuse3): %v", err)
	}
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Setenv("CAPFS_PHYSICAL_RESOLVER", res)
			host := t.TempDir()
			writeTree(t, host, map[string]string{".ssh/id_rsa": "PRIVATE KEY", ".git/HEAD": "ref: refs/heads/main\n", ".git/hooks/README": "hooks", "main.go": "package main\n"})
			for link, target := range map[string]string{"keys": ".ssh", "hk": ".git/hooks"} {
				if err := os.Symlink(target, filepath.Join(host, link)); err != nil {
					t.Fatal(err)
				}
			}
			base := []string{"--no-default-mounts", "-m", "w=physical:" + host, "--audit", "off", "mount"}

			// --work through a link to .ssh.
			mp := t.TempDir()
			var out, errb syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			code := execute(ctx, environ{}, append(base, "--work", "w/keys", mp), strings.NewReader(""), &out, &errb)
			cancel()
			if code == 0 || mountedAt(mp) {
				t.Errorf("capfs mount --work w/keys (keys -> .ssh) exited %d: %s", code, errb.String())
			}
			if strings.Contains(errb.String(), host) {
				t.Errorf("the refusal names a host path: %s", errb.String())
			}

			// Aliases through the mount, served by the binary in a process of its
			// own: this process only reads and writes through it (a server in
			// the same process can deadlock with the kernel's requests).
			srv := exec.Command(capfsBinary(t), append(base, "--work", "w", mp)...)
			var stderr syncBuffer
			srv.Stderr = &stderr
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- srv.Wait() }()
			waited := false
			defer func() {
				if !waited {
					srv.Process.Kill()
					<-exited
				}
				detachMountsUnder(t, filepath.Dir(mp))
			}()
			for deadline := time.Now().Add(20 * time.Second); !mountedAt(mp); time.Sleep(20 * time.Millisecond) {
				select {
				case err := <-exited:
					waited = true
					t.Fatalf("capfs mount exited (%v): %s", err, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the mount did not appear: %s", stderr.String())
				}
			}
			if b, err := os.ReadFile(filepath.Join(mp, "keys", "id_rsa")); err == nil || strings.Contains(string(b), "PRIVATE") {
				t.Errorf("read keys/id_rsa through the mount: %q, %v", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(mp, "main.go")); err != nil || string(b) != "package main\n" {
				t.Errorf("read main.go through the mount: %q, %v", b, err)
			}
			if err := os.WriteFile(filepath.Join(mp, "hk", "pre-commit"), []byte("#!/bin/sh\necho owned\n"), 0o755); err == nil {
				t.Error("writing hk/pre-commit (hk -> .git/hooks) through the mount succeeded")
			}
			srv.Process.Signal(os.Interrupt)
			select {
			case <-exited:
				waited = true
			case <-time.After(20 * time.Second):
				t.Fatal("capfs mount did not exit after the interrupt")
			}
			if _, err := os.Lstat(filepath.Join(host, ".git", "hooks", "pre-commit")); err == nil {
				t.Error(".git/hooks/pre-commit was planted through the mount")
			}
		})
	}
}

// TestWaysInRevThroughLink: capfs run --rev takes the work path where it leads
// in the mount (issue 26, class 1): a work path that is a link out of the
// project (vendor -> ../other, as a cloned repository can hold) must not open
// the other repository's history, with the openat2 and the portable resolvers.
// Without --rev, the same work path is refused by the Dir.
func TestWaysInRevThroughLink(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			other := gitRepo(t, map[string]string{"other.txt": "another repository's history\n"})
			proj := gitRepo(t, map[string]string{"main.go": "package main\n"})
			if err := os.Symlink(other, filepath.Join(proj, "vendor")); err != nil {
				t.Fatal(err)
			}
			env, _ := stateEnv(t)
			env = append(env, "CAPFS_PHYSICAL_RESOLVER="+res)
			out := filepath.Join(t.TempDir(), "out")
			r := runCapfsEnv(t, proj, env, "run", "--work", "project/vendor", "--no-lazy", "--", "cat", "other.txt")
			if r.code == 0 || strings.Contains(r.stdout, "another repository") {
				t.Errorf("run --work project/vendor (a link out of the project): exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			r = runCapfsEnv(t, proj, env, "run", "--work", "project/vendor", "--rev", "HEAD", "--out", out, "--no-lazy", "--", "cat", "other.txt")
			if r.code == 0 || strings.Contains(r.stdout, "another repository") {
				t.Errorf("run --work project/vendor --rev HEAD read the other repository: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			r = runCapfsEnv(t, proj, env, "run", "--work", "project/vendor", "--rev", "HEAD", "--commit", "capfs/x", "--no-lazy", "--", "true")
			if b, err := exec.Command("git", "-C", other, "branch", "--list", "capfs/x").Output(); err == nil && len(b) > 0 {
				t.Errorf("run --work project/vendor --commit made a branch in the other repository: exit %d\nstderr:\n%s", r.code, r.stderr)
			}
		})
	}
}

// TestWaysInRevAnchoredRules: the policy's rules for the work path's namespace
// paths (project/vault/**) hold in a capfs run --rev as in a run on the work
// tree (issue 26, class 1: a path decided by its name in the repository, not
// where it is in the namespace).
func TestWaysInRevAnchoredRules(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	proj := gitRepo(t, map[string]string{"vault/note.txt": "vaulted\n", "a.txt": "a\n"})
	pol := filepath.Join(t.TempDir(), "policy.toml")
	rules := "default = \"allow\"\n\n[[rules]]\nname = \"vault\"\neffect = \"deny\"\npaths = [\"project/vault\", \"project/vault/**\"]\nreason = \"the vault\"\n"
	if err := os.WriteFile(pol, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	env, _ := stateEnv(t)
	for _, args := range [][]string{{"run", "--no-lazy"}, {"run", "--no-lazy", "--rev", "HEAD", "--out", filepath.Join(t.TempDir(), "out")}} {
		r := runCapfsEnv(t, proj, env, append(append([]string{"--policy", pol}, args...), "--", "cat", "a.txt", "vault/note.txt")...)
		if strings.Contains(r.stdout, "vaulted") || !strings.Contains(r.stdout, "a\n") {
			t.Errorf("capfs %q: the sandbox read project/vault/note.txt (or not a.txt): exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestWaysInRunWorkThroughLink: capfs run --work decides the work path where
// it leads (issue 26, class 1), checked out and lazy, with the openat2 and the
// portable resolvers: a work path that is a link to .ssh, or out of the
// project, is refused before the command runs, and the command sees nothing
// of it.
func TestWaysInRunWorkThroughLink(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			outside := t.TempDir()
			writeTree(t, outside, map[string]string{"other.txt": "not mounted\n"})
			proj := t.TempDir()
			writeTree(t, proj, map[string]string{".ssh/id_rsa": "PRIVATE KEY", "main.go": "package main\n"})
			for link, target := range map[string]string{"keys": ".ssh", "vendor": outside, "rel": "../" + filepath.Base(outside)} {
				if err := os.Symlink(target, filepath.Join(proj, link)); err != nil {
					t.Fatal(err)
				}
			}
			env, _ := stateEnv(t)
			env = append(env, "CAPFS_PHYSICAL_RESOLVER="+res)
			modes := []string{"--no-lazy"}
			if lazyAvailable() == nil {
				modes = append(modes, "--lazy")
			}
			for _, mode := range modes {
				for _, work := range []string{"project/keys", "project/vendor", "project/rel"} {
					r := runCapfsEnv(t, proj, env, "run", mode, "--work", work, "--", "sh", "-c", "cat id_rsa other.txt; echo ran")
					if r.code == 0 || strings.Contains(r.stdout, "ran") || strings.Contains(r.stdout, "PRIVATE") || strings.Contains(r.stdout, "not mounted") {
						t.Errorf("run %s --work %s (a link to .ssh or out of the project): exit %d\nstdout:\n%s\nstderr:\n%s", mode, work, r.code, r.stdout, r.stderr)
					}
				}
			}
		})
	}
}

// TestWaysInMCPAliasesOverHTTP: capfs mcp --http decides each tool's path
// where it leads as stdio does (issue 26, class 1; TestMCPFollowsLinksThatStayInside
// is the stdio route), with the openat2 and the portable resolvers: no key
// read through keys -> .ssh, no hook written through hk -> .git/hooks, no
// file read or written through a link out of the mount.
func TestWaysInMCPAliasesOverHTTP(t *testing.T) {
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			proj, outside := filepath.Join(work, "proj"), filepath.Join(work, "outside")
			writeTree(t, proj, map[string]string{".ssh/id_rsa": "PRIVATE KEY", ".git/HEAD": "ref: refs/heads/main\n", ".git/hooks/README": "hooks", "main.go": "package main\n", `a\b`: "odd\n"})
			writeTree(t, outside, map[string]string{"secret.txt": "not mounted\n"})
			for link, target := range map[string]string{"keys": ".ssh", "hk": ".git/hooks", "out": "../outside", "abs": outside} {
				if err := os.Symlink(target, filepath.Join(proj, link)); err != nil {
					t.Fatal(err)
				}
			}
			cs, _ := httpRootsClient(t, work, []string{"CAPFS_PHYSICAL_RESOLVER=" + res},
				[]string{"--no-default-mounts", "-m", "project=physical:" + proj, "mcp", "--http", "127.0.0.1:0"})
			defer cs.Close()
			if text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "project/main.go"}); isErr || !strings.Contains(text, "package main") {
				t.Fatalf("read project/main.go over HTTP: %q", text)
			}
			for _, p := range []string{"project/keys/id_rsa", "project/out/secret.txt", "project/abs/secret.txt"} {
				if text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": p}); !isErr || strings.Contains(text, "PRIVATE") || strings.Contains(text, "not mounted") {
					t.Errorf("read %s over HTTP: %q (error %v)", p, text, isErr)
				}
			}
			for _, p := range []string{"project/hk/pre-commit", "project/out/planted.txt", "project/abs/planted.txt"} {
				if text, isErr, _ := mcpCall(t, cs, "write", map[string]any{"path": p, "content": "#!/bin/sh\necho owned\n"}); !isErr {
					t.Errorf("write %s over HTTP succeeded: %q", p, text)
				}
			}
			if text, isErr, _ := mcpCall(t, cs, "list", map[string]any{"path": "project"}); isErr || strings.Contains(text, "[DIR]  .ssh") || strings.Contains(text, "id_rsa") || strings.Count(text, `a\\b (cannot be addressed`) != 1 {
				t.Errorf("list over HTTP shows .ssh as a directory, or does not name a\\b once (error %v):\n%s", isErr, text)
			}
			if text, isErr, _ := mcpCall(t, cs, "grep", map[string]any{"pattern": "PRIVATE|not mounted", "path": "project", "no_ignore": true}); strings.Contains(text, "id_rsa") || strings.Contains(text, "secret.txt") {
				t.Errorf("grep over HTTP names a hidden or outside file (error %v): %q", isErr, text)
			}
			// Class 4: no answer names a host path (the link to one included).
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"stat", map[string]any{"path": "project/abs"}}, {"read", map[string]any{"path": "project/abs/secret.txt"}},
				{"list", map[string]any{"path": "project"}}, {"tree", map[string]any{"path": "project"}}, {"mounts", map[string]any{}},
				{"read", map[string]any{"path": "project/missing.txt"}}, {"write", map[string]any{"path": "project/abs/x", "content": "x"}},
			} {
				if text, _, _ := mcpCall(t, cs, c.tool, c.args); strings.Contains(text, work) {
					t.Errorf("%s %v over HTTP names a host path:\n%s", c.tool, c.args, text)
				}
			}
			for _, p := range []string{filepath.Join(proj, ".git", "hooks", "pre-commit"), filepath.Join(outside, "planted.txt")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written through a link", p)
				}
			}
		})
	}
}

// TestWaysInGrantsHostPathsAndHidden: a capfs run --grants sandbox (issue 26,
// classes 4 and 5) shows no host path of the project in /proc/1/cmdline,
// environ or mountinfo, and a granted directory's hidden files (.env, .ssh)
// are neither listed nor readable, with the openat2 and the portable
// resolvers.
func TestWaysInGrantsHostPathsAndHidden(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			const marker = "bob-grantpath-26w"
			root := filepath.Join(t.TempDir(), marker)
			writeTree(t, root, map[string]string{"src/main.c": "int main;", "src/.env": "SECRET=1\n", "src/.ssh/id_rsa": "PRIVATE KEY", `src/a\b`: "odd\n"})
			tmp, state := filepath.Join(t.TempDir(), marker+"-tmp"), filepath.Join(t.TempDir(), marker+"-state")
			for _, d := range []string{tmp, state} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			ro := []authority.Access{authority.List, authority.Metadata, authority.Read}
			file := grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "s"}, map[string][]authority.Access{"src": ro})
			script := `cat /grants/project/src/main.c; echo; ls -a /grants/project/src; cat /grants/project/src/.env /grants/project/src/.ssh/id_rsa
for f in /proc/1/cmdline /proc/1/environ /proc/self/environ /proc/self/mountinfo; do echo "== $f"; tr '\0' '\n' < "$f"; echo; done`
			env := []string{"XDG_CACHE_HOME=" + t.TempDir(), "CAPFS_TMPDIR=" + tmp, "XDG_STATE_HOME=" + state, "CAPFS_PHYSICAL_RESOLVER=" + res}
			r := runCapfsEnv(t, root, env, "--audit", "off", "--no-default-mounts", "-m", "project=physical:"+root, "run", "--grants", file, "--", "sh", "-c", script)
			listing, procs, _ := strings.Cut(r.stdout, "== ")
			if !strings.Contains(listing, "int main;") {
				t.Fatalf("the granted file is not shown: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(listing, ".env") || strings.Contains(listing, ".ssh") || strings.Contains(listing, "SECRET") || strings.Contains(listing, "PRIVATE") {
				t.Errorf("the grant shows a hidden file:\n%s", listing)
			}
			if strings.Contains(listing, `a\b`) {
				t.Errorf("a\\b (no capfs path can name it) is listed:\n%s", listing)
			}
			for _, sec := range strings.Split("== "+procs, "== ")[1:] {
				name, body, _ := strings.Cut(sec, "\n")
				if name == "/proc/self/mountinfo" && !strings.HasPrefix(tmp, "/dev/shm") {
					// A checkout on disk shows as its path there
					// (TestRunNoHostPathInside leaves it out too); the
					// project's own directory must not.
					body = strings.ReplaceAll(body, tmp, "CAPFS_TMPDIR")
				}
				if strings.Contains(body, marker) {
					t.Errorf("%s inside a --grants run names a host directory of the user's (%s):\n%s", name, marker, body)
				}
			}
		})
	}
}

// TestWaysInRunGrantThroughLink: capfs run --grant PATH (a read-only
// namespace path beside the work path) is decided where it leads (issue 26,
// class 1), bound or copied, with the openat2 and the portable resolvers: a
// grant on a link to .ssh or out of the project is refused before the
// command runs.
func TestWaysInRunGrantThroughLink(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			outside := t.TempDir()
			writeTree(t, outside, map[string]string{"other.txt": "not mounted\n"})
			proj := t.TempDir()
			writeTree(t, proj, map[string]string{"app/main.go": "package main\n", ".ssh/id_rsa": "PRIVATE KEY", "pub/readme": "hello\n"})
			for link, target := range map[string]string{"keys": ".ssh", "vendor": outside} {
				if err := os.Symlink(target, filepath.Join(proj, link)); err != nil {
					t.Fatal(err)
				}
			}
			env, _ := stateEnv(t)
			env = append(env, "CAPFS_PHYSICAL_RESOLVER="+res)
			for _, extra := range [][]string{nil, {"--bind-grants"}} {
				// The control: a plain grant is shown.
				args := append([]string{"-m", "project=physical:" + proj, "run", "--no-lazy", "--work", "project/app", "--grant", "project/pub"}, extra...)
				if r := runCapfsEnv(t, proj, env, append(args, "--", "cat", "/capfs/project/pub/readme")...); r.code != 0 || r.stdout != "hello\n" {
					t.Fatalf("capfs run --grant project/pub %q: exit %d\nstdout:\n%s\nstderr:\n%s", extra, r.code, r.stdout, r.stderr)
				}
				for _, g := range []string{"project/keys", "project/vendor"} {
					args := append([]string{"-m", "project=physical:" + proj, "run", "--no-lazy", "--work", "project/app", "--grant", g}, extra...)
					r := runCapfsEnv(t, proj, env, append(args, "--", "sh", "-c", "cat /capfs/project/keys/id_rsa /capfs/project/vendor/other.txt; echo ran")...)
					if r.code == 0 || strings.Contains(r.stdout, "ran") || strings.Contains(r.stdout, "PRIVATE") || strings.Contains(r.stdout, "not mounted") {
						t.Errorf("capfs run --grant %s %q: exit %d\nstdout:\n%s\nstderr:\n%s", g, extra, r.code, r.stdout, r.stderr)
					}
				}
			}
		})
	}
}

// TestWaysInGrantsUnaddressableNamed: a capfs run --grants checkout names a
// host name no capfs path can hold (a\b) in its summary, as capfs run's
// checkout does (issue 26, class 5: dropped silently), with the openat2 and
// the portable resolvers.
func TestWaysInGrantsUnaddressableNamed(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, map[string]string{"src/main.c": "int main;", `src/a\b`: "odd\n"})
			ro := []authority.Access{authority.List, authority.Metadata, authority.Read}
			file := grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "u"}, map[string][]authority.Access{"src": ro})
			env := []string{"CAPFS_PHYSICAL_RESOLVER=" + res}
			r := runCapfsEnv(t, root, env, "--audit", "off", "--no-default-mounts", "-m", "project=physical:"+root, "run", "--grants", file, "--", "ls", "-a", "/grants/project/src")
			if r.code != 0 || r.stdout != ".\n..\nmain.c\n" {
				t.Fatalf("ls in the grant: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if n := strings.Count(r.stderr, `a\\b`); n != 1 {
				t.Errorf("stderr names a\\b %d times; want once:\n%s", n, r.stderr)
			}
		})
	}
}

// TestWaysInLazyUnaddressableNamed: a lazy capfs run names a host name no
// capfs path can hold (a\b) on stderr, as the checkout's summary and capfs
// mount do (issue 26, class 5: dropped silently), with the openat2 and the
// portable resolvers.
func TestWaysInLazyUnaddressableNamed(t *testing.T) {
	needSandbox(t)
	needLazy(t)
	t.Parallel()
	for _, res := range resolvers {
		t.Run(res, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, map[string]string{"a.txt": "a\n", `a\b`: "odd\n"})
			env, _ := stateEnv(t)
			env = append(env, "CAPFS_PHYSICAL_RESOLVER="+res)
			r := runCapfsEnv(t, root, env, "run", "--lazy", "--", "ls", "-a").want(t, 0)
			if r.stdout != ".\n..\na.txt\n" {
				t.Errorf("the lazy tree lists %q", r.stdout)
			}
			if n := strings.Count(r.stderr, `a\\b`); n != 1 {
				t.Errorf("stderr names a\\b %d times; want once:\n%s", n, r.stderr)
			}
		})
	}
}
