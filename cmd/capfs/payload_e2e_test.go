package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The end-to-end payload test: a guest session through the Go API (the session
// the CLI builds), capfs mcp and capfs run tries to plant everything that makes a
// later host command run guest code; then the host runs git status, git commit
// and login and interactive shells in the project, as a user would, and no
// payload may have run. Each payload, when run, touches a marker file in a
// directory outside the project.
//
// TestPayloadHarness plants the same payloads directly on the host first, to
// show that the host commands do run them when they are there.

// payloadTag is in the text of every payload, so a landed one can be found.
const payloadTag = "capfs-e2e-payload"

// pstep is one guest action of a payload.
type pstep struct {
	kind string // write, append, mkdir, symlink (a = target, b = link), link (a -> b), move (a -> b)
	a, b string // paths relative to the project; the content of write and append
	exec bool   // written executable
}

// payload is one attempt to plant code.
type payload struct {
	name  string
	steps []pstep
	// landed reports where the payload reached a place the host runs it from, ""
	// if nowhere. (A payload left in an ordinary place, such as a directory the
	// guest could not move into place, is harmless and not reported.)
	landed func(root string) string
	// needsSymlink marks payloads written through a symlink or hard link (MCP
	// cannot make one: its test makes the symlinks in capfs run).
	needsSymlink bool
}

// script is a shell script that touches the marker name.
func script(markers, name string) string {
	return "#!/bin/sh\n# " + payloadTag + "\ntouch " + filepath.Join(markers, name) + "\n"
}

// command is a shell command touching the marker, as git runs core.fsmonitor
// (sh -c with arguments after it: the comment swallows them).
func command(markers, name string) string {
	return "touch " + filepath.Join(markers, name) + " # " + payloadTag
}

// holds reports the first of paths (relative to root) whose contents include the
// payload tag.
func holds(paths ...string) func(root string) string {
	return func(root string) string {
		for _, p := range paths {
			if b, err := os.ReadFile(filepath.Join(root, p)); err == nil && strings.Contains(string(b), payloadTag) {
				return p
			}
		}
		return ""
	}
}

// gitLayout reports d when it is laid out as a git dir (HEAD, objects, refs).
func gitLayout(d string, also ...string) func(root string) string {
	return func(root string) string {
		for _, n := range append([]string{"HEAD", "objects", "refs"}, also...) {
			if _, err := os.Lstat(filepath.Join(root, d, n)); err != nil {
				return ""
			}
		}
		return d
	}
}

func payloads(markers string) []payload {
	hook := func(name string) string { return script(markers, name) }
	fsmon := func(name string) string {
		return "\n[core]\n\tfsmonitor = " + command(markers, name) + "\n"
	}
	bareConfig := func(name, worktree string) string {
		return "[core]\n\trepositoryformatversion = 0\n\tbare = false\n" + worktree + "\tfsmonitor = " + command(markers, name) + "\n"
	}
	w := func(p, body string) pstep { return pstep{kind: "write", a: p, b: body} }
	x := func(p, body string) pstep { return pstep{kind: "write", a: p, b: body, exec: true} }
	ps := []payload{
		{name: "hook-main", steps: []pstep{x(".git/hooks/pre-commit", hook("hook-main"))}, landed: holds(".git/hooks/pre-commit")},
		{name: "hook-sub", steps: []pstep{x("sub/.git/hooks/pre-commit", hook("hook-sub"))}, landed: holds("sub/.git/hooks/pre-commit")},
		{name: "hookspath-dir", steps: []pstep{x("tools/hooks/pre-commit", hook("hookspath-dir"))}, landed: holds("tools/hooks/pre-commit")},
		{name: "fsmonitor-main", steps: []pstep{{kind: "append", a: ".git/config", b: fsmon("fsmonitor-main")}}, landed: holds(".git/config")},
		{name: "fsmonitor-sub", steps: []pstep{{kind: "append", a: "sub/.git/config", b: fsmon("fsmonitor-sub")}}, landed: holds("sub/.git/config")},
		{name: "hookspath-redirect", steps: []pstep{
			x("evilhooks/pre-commit", hook("hookspath-redirect")),
			{kind: "append", a: ".git/config", b: "\n[core]\n\thooksPath = evilhooks\n[alias]\n\tst = !" + command(markers, "alias") + "\n"},
		}, landed: holds(".git/config")},
		{name: "config-replace", steps: []pstep{w("newconfig", "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "+command(markers, "config-replace")+"\n"),
			{kind: "move", a: "newconfig", b: ".git/config"}}, landed: holds(".git/config")},
		{name: "husky", steps: []pstep{x(".husky/pre-commit", hook("husky"))}, landed: holds(".husky/pre-commit")},
		{name: "gitmodules", steps: []pstep{w(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = ./x\n\tupdate = !"+command(markers, "gitmodules")+"\n")}, landed: holds(".gitmodules")},
		{name: "gitdir-file", steps: []pstep{
			{kind: "mkdir", a: "evil/objects"}, {kind: "mkdir", a: "evil/refs"},
			w("evil/config", bareConfig("gitdir-file", "")), w("evil/HEAD", "ref: refs/heads/main\n"),
			{kind: "mkdir", a: "sub2"}, w("sub2/.git", "gitdir: ../evil\n"),
		}, landed: func(root string) string {
			if gitLayout("evil")(root) != "" {
				return "evil"
			}
			return holds("sub2/.git")(root)
		}},
		{name: "bare", steps: []pstep{
			{kind: "mkdir", a: "bare/objects"}, {kind: "mkdir", a: "bare/refs"},
			w("bare/config", bareConfig("bare", "\tworktree = ..\n")), w("bare/HEAD", "ref: refs/heads/main\n"),
		}, landed: gitLayout("bare")},
		{name: "bare-by-move", steps: []pstep{
			{kind: "mkdir", a: "stage/objects"}, {kind: "mkdir", a: "stage/refs"}, w("stage/HEAD.new", "ref: refs/heads/main\n"),
			w("stage/config", bareConfig("bare-by-move", "\tworktree = ..\n")),
			{kind: "move", a: "stage/HEAD.new", b: "stage/HEAD"}, {kind: "move", a: "stage", b: "bare2"},
		}, landed: func(root string) string { return gitLayout("stage")(root) + gitLayout("bare2")(root) }},
		{name: "alias-dotgit-symlink", needsSymlink: true, steps: []pstep{
			{kind: "symlink", a: ".git", b: "g"},
			{kind: "append", a: "g/config", b: fsmon("alias-dotgit-symlink")},
			x("g/hooks/post-commit", hook("alias-dotgit-symlink")),
		}, landed: holds(".git/config", ".git/hooks/post-commit")},
		{name: "alias-parent-symlink", needsSymlink: true, steps: []pstep{
			{kind: "symlink", a: "tools", b: "t"},
			x("t/hooks/post-commit", hook("alias-parent-symlink")),
		}, landed: holds("tools/hooks/post-commit")},
		{name: "alias-profile-symlink", needsSymlink: true, steps: []pstep{
			{kind: "symlink", a: ".bash_profile", b: "prof"},
			w("prof", hook("alias-profile-symlink")),
		}, landed: holds(".bash_profile")},
		{name: "alias-dotdot-symlink", needsSymlink: true, steps: []pstep{
			{kind: "symlink", a: "..", b: "src/up"},
			x("src/up/tools/hooks/post-merge", hook("alias-dotdot-symlink")),
			{kind: "append", a: "src/up/.git/config", b: fsmon("alias-dotdot-symlink")},
		}, landed: holds("tools/hooks/post-merge", ".git/config")},
		{name: "alias-hardlink", needsSymlink: true, steps: []pstep{
			{kind: "link", a: ".git/config", b: "cfg"},
			{kind: "append", a: "cfg", b: fsmon("alias-hardlink")},
			{kind: "link", a: "sub/.git/hooks", b: "hooks-alias"},
		}, landed: holds(".git/config")},
		{name: "move-dotgit", steps: []pstep{
			{kind: "move", a: "sub/.git", b: "sub/dotgit"},
			{kind: "append", a: "sub/dotgit/config", b: fsmon("move-dotgit")},
			{kind: "move", a: "sub/dotgit", b: "sub/.git"},
		}, landed: holds("sub/.git/config")},
		{name: "move-parent", steps: []pstep{
			{kind: "move", a: "sub", b: "sub-moved"},
			x("sub-moved/.git/hooks/post-commit", hook("move-parent")),
			{kind: "move", a: "sub-moved", b: "sub"},
		}, landed: holds("sub/.git/hooks/post-commit")},
		{name: "move-hookspath-parent", steps: []pstep{
			{kind: "move", a: "tools", b: "tools2"},
			x("tools2/hooks/post-commit", hook("move-hookspath-parent")),
			{kind: "move", a: "tools2", b: "tools"},
		}, landed: holds("tools/hooks/post-commit")},
		{name: "envrc", steps: []pstep{w(".envrc", command(markers, "envrc")+"\n")}, landed: holds(".envrc")},
		{name: "claude", steps: []pstep{w(".claude/settings.json",
			`{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "`+command(markers, "claude")+`"}]}]}}`)}, landed: holds(".claude/settings.json")},
		{name: "mcp-json", steps: []pstep{w(".mcp.json",
			`{"mcpServers": {"x": {"command": "sh", "args": ["-c", "`+command(markers, "mcp-json")+`"]}}}`)}, landed: holds(".mcp.json")},
		{name: "vscode-tasks", steps: []pstep{w(".vscode/tasks.json",
			`{"version": "2.0.0", "tasks": [{"label": "x", "type": "shell", "command": "`+command(markers, "vscode-tasks")+`", "runOptions": {"runOn": "folderOpen"}}]}`)}, landed: holds(".vscode/tasks.json")},
		{name: "gitconfig-home", steps: []pstep{w(".gitconfig", fsmon("gitconfig-home"))}, landed: holds(".gitconfig")},
		{name: "gitconfig-xdg", steps: []pstep{w(".config/git/config", fsmon("gitconfig-xdg"))}, landed: holds(".config/git/config")},
	}
	for _, f := range []string{".profile", ".bash_profile", ".bash_login", ".bashrc", ".zshenv", ".zprofile", ".zshrc", ".zlogin"} {
		name := "shell" + f
		ps = append(ps, payload{name: name, steps: []pstep{w(f, hook(name))}, landed: holds(f)})
	}
	return ps
}

// hostEnv is the environment of the host's commands: git without the tester's
// own configuration, HOME somewhere harmless unless a command sets it.
func hostEnv(home string) []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb"}
}

// payloadProject makes the host project: a git repository whose core.hooksPath is
// tools/hooks (a directory only policy.ForProject knows), a nested repository sub
// with git's default hooks directory, and a few files.
func payloadProject(t *testing.T) string {
	t.Helper()
	root := gitRepo(t, map[string]string{
		"README.md":         "# project\n",
		"src/main.go":       "package main\n",
		"tools/hooks/.keep": "",
	})
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = hostEnv(t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(root, "config", "core.hooksPath", "tools/hooks")
	writeTree(t, root, map[string]string{"sub/lib.go": "package sub\n"})
	sub := filepath.Join(root, "sub")
	git(sub, "init", "-q", "-b", "main")
	git(sub, "add", "-A")
	git(sub, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "initial")
	return root
}

// runHostCommands does what a user does in the project after a guest session: git
// status and commit in each repository there is (the nested one, one a gitdir file
// points at, one left bare), and shells with HOME at the project.
func runHostCommands(t *testing.T, root string) {
	t.Helper()
	home := t.TempDir()
	run := func(dir string, env []string, name string, args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = env
		cmd.Stdin = nil
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Errorf("%s %q in %s timed out: %s", name, args, dir, out)
		}
		_ = err // failures are expected (a planted dir half made, a refused repository)
	}
	env := hostEnv(home)
	commit := []string{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--allow-empty", "-q", "-m", "x"}
	for _, d := range []string{".", "sub", "sub2", "bare", "bare2", "evil", "stage"} {
		dir := filepath.Join(root, d)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		run(dir, env, "git", "status")
		run(dir, env, "git", commit...)
	}
	shellEnv := hostEnv(root)
	run(root, shellEnv, "bash", "-l", "-c", "true")
	run(root, shellEnv, "bash", "-i", "-c", "true")
	if _, err := exec.LookPath("zsh"); err == nil {
		run(root, shellEnv, "zsh", "-l", "-i", "-c", "true")
	} else {
		t.Log("zsh is not installed: the zsh startup files are checked as planted or not, not run")
	}
}

// ranPayloads lists the markers payloads left.
func ranPayloads(t *testing.T, markers string) []string {
	t.Helper()
	ents, err := os.ReadDir(markers)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// checkNoPayload runs the host commands and fails for every payload that landed
// or ran.
func checkNoPayload(t *testing.T, root, markers string, ps []payload) {
	t.Helper()
	var landed []string
	for _, p := range ps {
		if where := p.landed(root); where != "" {
			landed = append(landed, p.name+" ("+where+")")
		}
	}
	runHostCommands(t, root)
	if len(landed) > 0 {
		t.Errorf("payloads planted in the host project: %s", strings.Join(landed, ", "))
	}
	if ran := ranPayloads(t, markers); len(ran) > 0 {
		t.Errorf("payloads ran on the host: %s", strings.Join(ran, ", "))
	}
}

// TestPayloadHarness plants payloads on the host directly and checks that the host
// commands run them: the other tests' "nothing ran" means something.
func TestPayloadHarness(t *testing.T) {
	t.Parallel()
	root := payloadProject(t)
	markers := t.TempDir()
	byName := map[string]payload{}
	for _, p := range payloads(markers) {
		byName[p.name] = p
	}
	want := []string{"hook-sub", "hookspath-dir", "fsmonitor-main", "fsmonitor-sub", "gitdir-file", "bare", "shell.bash_profile", "shell.bashrc"}
	for _, name := range want {
		for _, s := range byName[name].steps {
			p := filepath.Join(root, filepath.FromSlash(s.a))
			switch s.kind {
			case "mkdir":
				must(t, os.MkdirAll(p, 0o755))
			case "write", "append":
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
				if s.kind == "append" {
					flag = os.O_WRONLY | os.O_APPEND
				}
				f, err := os.OpenFile(p, flag, 0o755)
				must(t, err)
				_, err = f.WriteString(s.b)
				must(t, err)
				must(t, f.Close())
			}
		}
	}
	runHostCommands(t, root)
	ran := ranPayloads(t, markers)
	for _, name := range want {
		if !slices.Contains(ran, name) {
			t.Errorf("payload %s planted by the host did not run (ran: %q): the harness checks nothing for it", name, ran)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPayloadsGoAPI plays the guest through the session the CLI builds (its
// policy, ForProject's rules and the git guard), with the Go API.
func TestPayloadsGoAPI(t *testing.T) {
	t.Parallel()
	payloadsGoAPI(t)
}

// TestPayloadsGoAPIPortable is TestPayloadsGoAPI with the session's physical
// mounts on the portable resolver (it sets the environment, so it cannot run in
// parallel).
func TestPayloadsGoAPIPortable(t *testing.T) {
	t.Setenv("CAPFS_PHYSICAL_RESOLVER", "portable")
	payloadsGoAPI(t)
}

func payloadsGoAPI(t *testing.T) {
	root := payloadProject(t)
	markers := t.TempDir()
	ps := payloads(markers)
	ctx := context.Background()
	o := &globalOptions{mounts: []string{"project=physical:" + root}, auditFile: filepath.Join(t.TempDir(), "audit.jsonl")}
	s, err := o.open(ctx, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.Root.Sub(ctx, "project")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		for _, st := range p.steps {
			var err error
			switch st.kind {
			case "write":
				perm := os.FileMode(0o644)
				if st.exec {
					perm = 0o755
				}
				if i := strings.LastIndexByte(st.a, '/'); i > 0 {
					_ = d.MkdirAll(ctx, st.a[:i])
				}
				err = d.WriteFile(ctx, st.a, []byte(st.b), perm)
			case "append":
				err = d.Append(ctx, st.a, []byte(st.b))
			case "mkdir":
				err = d.MkdirAll(ctx, st.a)
			case "symlink":
				err = d.Symlink(ctx, st.a, st.b)
			case "link":
				err = d.Link(ctx, st.a, st.b)
			case "move":
				err = d.Move(ctx, st.a, st.b)
			}
			if err != nil {
				t.Logf("%s: %s %s: %v", p.name, st.kind, st.a, err)
			}
		}
	}
	checkNoPayload(t, root, markers, ps)
}

// TestPayloadsMCP plays the guest through capfs mcp over stdio (the real binary,
// its default namespace in the project). MCP has no symlink tool: a link made
// inside capfs run is written through later, when the sandbox can run.
func TestPayloadsMCP(t *testing.T) {
	t.Parallel()
	eachResolver(t, payloadsMCP)
}

// eachResolver runs play once with each physical resolver the capfs binary can
// be told to use (CAPFS_PHYSICAL_RESOLVER): openat2 where the kernel has it, and
// the portable component walk.
func eachResolver(t *testing.T, play func(t *testing.T, env []string)) {
	for _, r := range []string{"auto", "portable"} {
		t.Run(r, func(t *testing.T) {
			t.Parallel()
			play(t, []string{"CAPFS_PHYSICAL_RESOLVER=" + r})
		})
	}
}

// mcpClientEnv is mcpClient with extra environment variables for the server.
func mcpClientEnv(t *testing.T, dir string, env []string) *mcp.ClientSession {
	t.Helper()
	return mcpClientEnvArgs(t, dir, env)
}

// mcpClientEnvArgs is mcpClientEnv with global flags (--policy, ...) before mcp.
func mcpClientEnvArgs(t *testing.T, dir string, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	srv := startCapfs(t, dir, env, append(args, "mcp")...)
	client := mcp.NewClient(&mcp.Implementation{Name: "capfs-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, srv.transport(), nil)
	if err != nil {
		t.Fatalf("connecting to capfs mcp: %v", err)
	}
	return cs
}

func payloadsMCP(t *testing.T, env []string) {
	root := payloadProject(t)
	markers := t.TempDir()
	ps := payloads(markers)
	sandboxed := sandboxWorks(t)
	if sandboxed {
		// A link to the hooks directory's parent, made in the sandbox and synced
		// back (the link alone is allowed), then written through over MCP.
		// (One run per link: a refused one makes the sync-back apply nothing.)
		keep := append([]string{"CAPFS_TMPDIR=" + t.TempDir()}, env...) // refused runs keep their checkouts
		for _, ln := range []string{"ln -s tools t", "ln -s .git g", "ln -s .bash_profile prof", "ln -s .. src/up"} {
			if r := runCapfsEnv(t, root, keep, "run", "--", "sh", "-c", ln); r.code != 0 {
				t.Logf("capfs run -- %s: exited %d: %s", ln, r.code, lastLines(r.stderr, 3))
			}
		}
	} else {
		t.Log("bubblewrap cannot run here: the links made in capfs run and written through MCP are not tried")
	}
	cs := mcpClientEnv(t, root, env)
	defer cs.Close()
	for _, p := range ps {
		if p.needsSymlink && !sandboxed {
			continue
		}
		for _, st := range p.steps {
			var text string
			var isErr bool
			switch st.kind {
			case "write":
				text, isErr, _ = mcpCall(t, cs, "write", map[string]any{"path": "project/" + st.a, "content": st.b})
			case "append":
				text, isErr, _ = mcpCall(t, cs, "append", map[string]any{"path": "project/" + st.a, "content": st.b})
			case "mkdir":
				text, isErr, _ = mcpCall(t, cs, "mkdir", map[string]any{"path": "project/" + st.a})
			case "move":
				text, isErr, _ = mcpCall(t, cs, "move", map[string]any{"source": "project/" + st.a, "destination": "project/" + st.b, "overwrite": true})
			case "symlink", "link":
				continue // symlinks are made in the sandbox above
			}
			if isErr {
				t.Logf("%s: %s %s: %s", p.name, st.kind, st.a, firstLine(text))
			}
		}
	}
	checkNoPayload(t, root, markers, ps)
}

// TestPayloadsRun plays the guest as a command inside capfs run, one run per
// payload (a refused change makes the sync-back apply nothing, which would hide
// the others), in both of run's modes: a checkout (CAPFS_RUN_LAZY=0) and a lazy
// FUSE work tree (CAPFS_RUN_LAZY=1, skipped with a message where FUSE cannot
// work), each with both physical resolvers.
func TestPayloadsRun(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	t.Run("checkout", func(t *testing.T) {
		t.Parallel()
		eachResolver(t, func(t *testing.T, env []string) { payloadsRun(t, append(env, envRunLazy+"=0")) })
	})
	t.Run("lazy", func(t *testing.T) {
		if err := lazyAvailable(); err != nil {
			t.Skipf("lazy sandboxes need FUSE, not usable here: %v", err)
		}
		t.Parallel()
		eachResolver(t, func(t *testing.T, env []string) { payloadsRun(t, append(env, envRunLazy+"=1")) })
	})
}

func payloadsRun(t *testing.T, env []string) {
	root := payloadProject(t)
	markers := t.TempDir()
	ps := payloads(markers)
	// Refused runs keep their checkouts: under the test's temporary directory.
	keep := append([]string{"CAPFS_TMPDIR=" + t.TempDir()}, env...)
	for _, p := range ps {
		var sh strings.Builder
		for _, st := range p.steps {
			switch st.kind {
			case "write":
				fmt.Fprintf(&sh, "mkdir -p %s; printf %%s %s > %s; ", shq(dirOf(st.a)), shq(st.b), shq(st.a))
				if st.exec {
					fmt.Fprintf(&sh, "chmod +x %s; ", shq(st.a))
				}
			case "append":
				fmt.Fprintf(&sh, "printf %%s %s >> %s; ", shq(st.b), shq(st.a))
			case "mkdir":
				fmt.Fprintf(&sh, "mkdir -p %s; ", shq(st.a))
			case "symlink":
				fmt.Fprintf(&sh, "ln -s %s %s; ", shq(st.a), shq(st.b))
			case "link":
				fmt.Fprintf(&sh, "ln %s %s; ", shq(st.a), shq(st.b))
			case "move":
				fmt.Fprintf(&sh, "mv %s %s; ", shq(st.a), shq(st.b))
			}
		}
		sh.WriteString("true")
		r := runCapfsEnv(t, root, keep, "run", "--", "sh", "-c", sh.String())
		if r.code != 0 {
			t.Logf("%s: capfs run exited %d: %s", p.name, r.code, firstLine(lastLines(r.stderr, 3)))
		}
	}
	checkNoPayload(t, root, markers, ps)
}

// sandboxWorks reports whether capfs run can sandbox here, without skipping.
func sandboxWorks(t *testing.T) bool {
	ok := true
	t.Run("sandbox", func(t *testing.T) {
		needSandbox(t)
	})
	if sandboxReason != "" {
		ok = false
	}
	return ok
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// TestPhysicalResolverVariable: the binary reads CAPFS_PHYSICAL_RESOLVER (so the
// payload tests really play through the portable resolver), and refuses a value
// it does not know.
func TestPhysicalResolverVariable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"f.txt": "x"})
	for _, v := range []string{"auto", "openat2", "portable"} {
		r := runCapfsEnv(t, root, []string{"CAPFS_PHYSICAL_RESOLVER=" + v}, "cat", "project/f.txt")
		if v == "openat2" && r.code != 0 && strings.Contains(r.stderr, "not_supported") {
			continue // a kernel without openat2
		}
		if r.code != 0 || r.stdout != "x" {
			t.Errorf("%s: exit %d, stdout %q, stderr %s", v, r.code, r.stdout, r.stderr)
		}
	}
	r := runCapfsEnv(t, root, []string{"CAPFS_PHYSICAL_RESOLVER=bogus"}, "cat", "project/f.txt")
	if r.code != 2 || !strings.Contains(r.stderr, "CAPFS_PHYSICAL_RESOLVER") {
		t.Errorf("bogus resolver: exit %d, stderr %s; want a usage error naming the variable", r.code, r.stderr)
	}
}
