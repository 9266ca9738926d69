//go:build linux

package materialize_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
)

var (
	bwrapOnce sync.Once
	bwrapErr  error
)

// needBwrap skips the test when no bubblewrap sandbox works here.
func needBwrap(t *testing.T) {
	t.Helper()
	bwrapOnce.Do(func() { bwrapErr = sandbox.Bubblewrap(sandbox.BubblewrapOptions{}).Probe(context.Background()) })
	if bwrapErr != nil {
		t.Skipf("bubblewrap cannot sandbox here, skipping: %v", bwrapErr)
	}
}

// inSandbox runs script under bubblewrap with the given mounts (working
// directory /w) and returns its combined output.
func inSandbox(t *testing.T, script string, mounts ...sandbox.Mount) string {
	t.Helper()
	var out bytes.Buffer
	r := &sandbox.Runner{Wrappers: []sandbox.Wrapper{sandbox.Bubblewrap(sandbox.BubblewrapOptions{})}}
	_, err := r.Run(ctx, &sandbox.Launch{
		Path: "/bin/sh", Args: []string{"-c", script}, Dir: "/w", Mounts: mounts,
		Env:    []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b"},
		Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatalf("sandbox run: %v", err)
	}
	return out.String()
}

// workMount binds tr read-write at /w with its read-only paths.
func workMount(tr *materialize.Tree) sandbox.Mount {
	return sandbox.Mount{Source: tr.Path(), Target: "/w", Writable: true, ReadOnly: tr.ReadOnlyPaths()}
}

func writeHost(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(text), 0o644))
	}
}

func physicalDir(t *testing.T, host string, opts ...dir.Option) (*dir.Dir, *physical.FS) {
	t.Helper()
	pb, err := physical.New(host)
	must(t, err)
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb, opts...)
	return d, pb
}

// TestReadOnlyPathsMirrorPolicy: the write-denied paths of a writable checkout
// (persistence files, .git) are listed for a read-only bind, and inside the
// sandbox a write to them fails with EROFS at once while the rest is writable.
func TestReadOnlyPathsMirrorPolicy(t *testing.T) {
	host := t.TempDir()
	writeHost(t, host, map[string]string{
		".bashrc": "alias ls=ls\n", ".vscode/settings.json": "{}\n", ".git/HEAD": "ref: refs/heads/main\n",
		".git/hooks/README": "x\n", "src/a.go": "package a\n", "src/.zshrc": "x\n", ".env": "SECRET=1\n",
		"sub/.git": "gitdir: ../.git\n",
	})
	d, _ := physicalDir(t, host, dir.WithPolicy(policy.Defaults()))
	tr := checkout(t, d, materialize.Options{Git: materialize.GitKeep})
	got := tr.ReadOnlyPaths()
	for _, want := range []string{".bashrc", ".git", ".vscode", "src/.zshrc", "sub/.git"} {
		if !slices.Contains(got, want) {
			t.Errorf("ReadOnlyPaths() = %q, lacks %q", got, want)
		}
	}
	for _, p := range got {
		if p == "src" || p == "src/a.go" || p == "." || strings.HasPrefix(p, ".git/") || strings.HasPrefix(p, ".vscode/") {
			t.Errorf("ReadOnlyPaths() = %q: %q should not be listed", got, p)
		}
	}
	if _, err := os.Lstat(filepath.Join(tr.Path(), ".env")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the secret is in the checkout: %v", err)
	}

	needBwrap(t)
	out := inSandbox(t, `for p in .bashrc .vscode/settings.json .vscode/new .git/HEAD .git/hooks/pre-commit src/.zshrc sub/.git src/new new; do
  if { echo x >> $p; } 2>/dev/null; then echo "$p ok"; else echo "$p refused"; fi
done
mv .bashrc b 2>/dev/null || echo "mv refused"; cat .env 2>/dev/null || echo "no .env"`, workMount(tr))
	want := ".bashrc refused\n.vscode/settings.json refused\n.vscode/new refused\n.git/HEAD refused\n.git/hooks/pre-commit refused\n" +
		"src/.zshrc refused\nsub/.git refused\nsrc/new ok\nnew ok\nmv refused\nno .env\n"
	if out != want {
		t.Fatalf("inside the sandbox:\n%s\nwant:\n%s", out, want)
	}
	changes, err := tr.Diff(ctx)
	must(t, err)
	var paths []string
	for _, c := range changes {
		paths = append(paths, c.Path)
	}
	if !slices.Equal(paths, []string{"new", "src/new"}) {
		t.Fatalf("changes %q, want only the writable paths", paths)
	}
}

// TestBindNeverShowsUnaddressable: a directory holding a name the Dir cannot
// address (a backslash: the physical backend leaves it out of listings) is not
// bound; the secret in it is not in the sandbox.
func TestBindNeverShowsUnaddressable(t *testing.T) {
	host := t.TempDir()
	writeHost(t, host, map[string]string{"pub/readme": "hello\n", `pub/sec\ret`: "SECRET-BACKSLASH\n"})
	d, pb := physicalDir(t, host)
	ro := d.ReadOnly()
	tr := checkout(t, ro, materialize.Options{ReadOnly: true, Host: pb})
	if tr.Bound() || tr.Strategy() == materialize.StrategyBind {
		t.Fatalf("strategy %s: a directory holding an unaddressable name was bound", tr.Strategy())
	}
	if _, err := os.Lstat(filepath.Join(tr.Path(), "pub", `sec\ret`)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unaddressable file is in the checkout: %v", err)
	}
	// A clean directory is still bound.
	clean := t.TempDir()
	writeHost(t, clean, map[string]string{"pub/readme": "hello\n"})
	cd, cpb := physicalDir(t, clean)
	if ct := checkout(t, cd.ReadOnly(), materialize.Options{ReadOnly: true, Host: cpb}); !ct.Bound() {
		t.Fatalf("a clean directory: strategy %s, want bind", ct.Strategy())
	}

	needBwrap(t)
	m := sandbox.Mount{Source: tr.Path(), Target: "/w"}
	if f := tr.BindFile(); f != nil {
		m.File = f
	}
	out := inSandbox(t, `ls -A pub; grep -r SECRET /w || echo "no secret"`, m)
	if out != "readme\nno secret\n" {
		t.Fatalf("inside the sandbox: %q", out)
	}
}

// gitRepo makes a repository at dir with files committed (one commit per map,
// in order), leaving the work tree as the last commit has it.
func gitRepo(t *testing.T, commits ...map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found: this test builds real repositories")
	}
	root := t.TempDir()
	g := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	g("init", "-q", "-b", "main")
	for i, files := range commits {
		for name, text := range files {
			if text == "" {
				g("rm", "-q", name)
				continue
			}
			writeHost(t, root, map[string]string{name: text})
			g("add", "-f", name)
		}
		g("commit", "-q", "-m", "c"+string(rune('0'+i)))
	}
	g("tag", "v1")
	return root
}

func hostGit(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
	return string(out)
}

func gitSkip(tr *materialize.Tree, rel string) *materialize.Skip {
	for _, s := range tr.Skipped() {
		if s.Path == rel {
			return &s
		}
	}
	return nil
}

// TestGitHistoryHidesSecrets: a .git whose history holds a path the policy
// hides (committed and still there, or committed and deleted since) is left
// out: `git show HEAD:.env` inside prints nothing of it, and nothing else in
// the sandbox holds the secret.
func TestGitHistoryHidesSecrets(t *testing.T) {
	cases := map[string][]map[string]string{
		"committed": {{"a.txt": "a\n", ".env": "TOKEN=SECRET-IN-HISTORY\n"}},
		"deleted":   {{"a.txt": "a\n", "conf/.env": "TOKEN=SECRET-IN-HISTORY\n"}, {"conf/.env": ""}},
	}
	for name, commits := range cases {
		t.Run(name, func(t *testing.T) {
			root := gitRepo(t, commits...)
			d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
			tr := checkout(t, d, materialize.Options{})
			sk := gitSkip(tr, ".git")
			if sk == nil || !strings.Contains(sk.Reason, "history names ") || !strings.Contains(sk.Reason, ".env, which the policy hides") {
				t.Fatalf("Skipped() = %+v: want .git left out for its history, naming the hidden path", tr.Skipped())
			}
			ents, err := os.ReadDir(filepath.Join(tr.Path(), ".git"))
			if err != nil || len(ents) != 0 {
				t.Fatalf(".git in the checkout: %v %v, want an empty directory", ents, err)
			}
			if !slices.Contains(tr.ReadOnlyPaths(), ".git") {
				t.Fatalf("ReadOnlyPaths() = %q: the emptied .git must be read-only", tr.ReadOnlyPaths())
			}

			needBwrap(t)
			out := inSandbox(t, `git show HEAD:.env 2>&1; git show HEAD~1:conf/.env 2>&1; git init -q 2>&1 && echo "init ok"
grep -r SECRET-IN-HISTORY /w 2>/dev/null || echo "no secret"`, workMount(tr))
			if strings.Contains(out, "SECRET-IN-HISTORY") || strings.Contains(out, "init ok") || !strings.Contains(out, "no secret") ||
				!strings.Contains(out, "not a git repository") {
				t.Fatalf("inside the sandbox:\n%s", out)
			}
			changes, err := tr.Diff(ctx)
			must(t, err)
			if len(changes) != 0 {
				t.Fatalf("changes after the run: %+v", changes)
			}
		})
	}
}

// TestGitKeptReadOnly: a clean history stays, read-only: git reads it inside,
// commit, tag and reset fail with EROFS, and a sync-back leaves the host's refs,
// objects and index as they were.
func TestGitKeptReadOnly(t *testing.T) {
	root := gitRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	writeHost(t, root, map[string]string{".env": "TOKEN=UNTRACKED-SECRET\n"}) // hidden, never committed
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	tr := checkout(t, d, materialize.Options{})
	if sk := gitSkip(tr, ".git"); sk != nil {
		t.Fatalf(".git left out: %+v", sk)
	}
	if !slices.Contains(tr.ReadOnlyPaths(), ".git") {
		t.Fatalf("ReadOnlyPaths() = %q, lacks .git", tr.ReadOnlyPaths())
	}
	before := hostGit(t, root, "rev-parse", "HEAD", "v1") + hostGit(t, root, "tag") + hostGit(t, root, "ls-files", "-s")

	needBwrap(t)
	out := inSandbox(t, `git log --oneline | wc -l; echo changed > a.txt
git commit -qam sandboxed 2>&1 | tail -n 1; git tag evil 2>&1 | tail -n 1; git reset -q --hard HEAD 2>&1 | tail -n 1
git show HEAD:.env 2>&1 | head -n 1`, workMount(tr))
	for _, want := range []string{"1\n", "Read-only file system"} {
		if !strings.Contains(out, want) {
			t.Fatalf("inside the sandbox (want %q):\n%s", want, out)
		}
	}
	if strings.Contains(out, "UNTRACKED-SECRET") {
		t.Fatalf("the untracked secret reached the sandbox:\n%s", out)
	}
	rep, err := syncback.Run(ctx, tr, syncback.Options{JournalDir: t.TempDir()})
	if err != nil {
		t.Fatalf("SyncBack: %v (%+v)", err, rep)
	}
	for _, c := range rep.Applied {
		if c.Path != "a.txt" {
			t.Errorf("sync-back applied %s %s; want only a.txt", c.Kind, c.Path)
		}
	}
	after := hostGit(t, root, "rev-parse", "HEAD", "v1") + hostGit(t, root, "tag") + hostGit(t, root, "ls-files", "-s")
	if before != after {
		t.Fatalf("the host repository changed:\n%s\nthen\n%s", before, after)
	}
	if got := hostGit(t, root, "status", "--porcelain"); got != " M a.txt\n?? .env\n" {
		t.Fatalf("host git status: %q, want only a.txt modified (nothing recorded as deleted)", got)
	}
}

// TestGitScanBudgetAndPolicies: a history over budget is left out; GitOmit
// always leaves .git out; GitKeep keeps a history over budget but not one that
// names a hidden path.
func TestGitScanBudgetAndPolicies(t *testing.T) {
	root := gitRepo(t, map[string]string{"a/b/c.txt": "c\n"}, map[string]string{"a/b/d.txt": "d\n"})
	d, _ := physicalDir(t, root, dir.WithPolicy(policy.Defaults()))
	if sk := gitSkip(checkout(t, d, materialize.Options{GitScanBudget: 2}), ".git"); sk == nil || !strings.Contains(sk.Reason, "too large") {
		t.Fatalf("budget of 2 trees: %+v", sk)
	}
	if sk := gitSkip(checkout(t, d, materialize.Options{}), ".git"); sk != nil {
		t.Fatalf("default budget: %+v", sk)
	}
	if sk := gitSkip(checkout(t, d, materialize.Options{Git: materialize.GitOmit}), ".git"); sk == nil {
		t.Fatal("GitOmit kept .git")
	}
	tr := checkout(t, d, materialize.Options{Git: materialize.GitKeep, GitScanBudget: 2})
	if sk := gitSkip(tr, ".git"); sk != nil {
		t.Fatalf("GitKeep left a history over budget out: %+v", sk)
	}
	if _, err := os.Stat(filepath.Join(tr.Path(), ".git", "HEAD")); err != nil {
		t.Fatalf("GitKeep: %v", err)
	}
	if reps := tr.GitReports(); len(reps) != 1 || !reps[0].Kept || !strings.Contains(reps[0].Why, "too large") {
		t.Fatalf("GitKeep over budget: GitReports() = %+v, want kept with the budget noted", reps)
	}
	secret := gitRepo(t, map[string]string{".env": "X=1\n"})
	sd, _ := physicalDir(t, secret, dir.WithPolicy(policy.Defaults()))
	tr = checkout(t, sd, materialize.Options{Git: materialize.GitKeep})
	if sk := gitSkip(tr, ".git"); sk == nil || !strings.Contains(sk.Reason, ".env") {
		t.Fatalf("GitKeep kept a history naming .env: %+v", sk)
	}
	if _, err := os.Stat(filepath.Join(tr.Path(), ".git", "HEAD")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("GitKeep: .git/HEAD is in the checkout (%v)", err)
	}
}

// TestPrivateMountinfo: inside the sandbox, /proc/self/mountinfo names none
// of the host paths behind the grants: the project, a read-only grant, the
// checkout directories.
func TestPrivateMountinfo(t *testing.T) {
	project := filepath.Join(t.TempDir(), "alice-project-7f3a")
	deps := filepath.Join(t.TempDir(), "alice-deps-91c2")
	writeHost(t, project, map[string]string{"main.go": "package main\n", ".git/HEAD": "ref: refs/heads/main\n"})
	writeHost(t, deps, map[string]string{"lib/x.go": "package lib\n"})
	d, _ := physicalDir(t, project, dir.WithPolicy(policy.Defaults()))
	dd, dpb := physicalDir(t, deps)
	work, err := materialize.Checkout(ctx, d, materialize.Options{Private: true, Git: materialize.GitKeep})
	must(t, err)
	defer work.Close()
	ro, err := materialize.Checkout(ctx, dd.ReadOnly(), materialize.Options{Private: true, ReadOnly: true, Host: dpb})
	must(t, err)
	defer ro.Close()
	if ro.Bound() {
		t.Fatal("a private read-only checkout was bound")
	}
	mounted := isMountPoint(t, work.Path())
	if os.Geteuid() == 0 && strings.HasPrefix(work.Path(), "/dev/shm/") && !mounted {
		t.Fatalf("as root on /dev/shm, the private checkout %s is not a tmpfs of its own", work.Path())
	}

	needBwrap(t)
	out := inSandbox(t, `cat /proc/self/mountinfo; cat /proc/self/mounts`, workMount(work), sandbox.Mount{Source: ro.Path(), Target: "/deps"})
	for _, p := range []string{project, deps, "alice-project", "alice-deps"} {
		if strings.Contains(out, p) {
			t.Errorf("mountinfo shows the host path %s:\n%s", p, out)
		}
	}
	for _, p := range []string{work.Path(), ro.Path()} {
		if !mounted {
			t.Logf("not root or not on a tmpfs: the checkout directory's name shows (documented): %s", filepath.Base(p))
			continue
		}
		if strings.Contains(out, filepath.Base(p)) {
			t.Errorf("mountinfo shows the checkout directory %s:\n%s", p, out)
		}
	}
	if err := work.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(work.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Close, the private checkout is still there: %v", err)
	}
}

// isMountPoint reports whether p is a mount point in this process's namespace.
func isMountPoint(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}

// TestReadOnlyPathsCapAndRules: a custom rule's refused files are listed one
// by one (their directory holds a writable file), a directory whose every entry
// and new entries are refused is listed whole, and the list stops at
// MaxReadOnlyPaths with .git kept.
func TestReadOnlyPathsCapAndRules(t *testing.T) {
	host := t.TempDir()
	files := map[string]string{".git/HEAD": "x\n", "locks/readme.txt": "x\n", "gen/a/b.txt": "x\n"}
	for i := range materialize.MaxReadOnlyPaths + 50 {
		files["locks/"+strings.Repeat("0", 4-len(itoa(i)))+itoa(i)+".lock"] = "x\n"
	}
	writeHost(t, host, files)
	eng, err := policy.New(policy.Config{Rules: []policy.Rule{
		{Effect: policy.Deny, Ops: []policy.Op{policy.GroupWrite}, Paths: []string{"**/*.lock", "gen/**"}},
	}})
	must(t, err)
	d, _ := physicalDir(t, host, dir.WithPolicy(eng))
	tr := checkout(t, d, materialize.Options{Git: materialize.GitKeep})
	got := tr.ReadOnlyPaths()
	if len(got) != materialize.MaxReadOnlyPaths || !slices.Contains(got, ".git") || !slices.Contains(got, "gen") ||
		!slices.Contains(got, "locks/0000.lock") || slices.Contains(got, "locks") || slices.Contains(got, "locks/readme.txt") ||
		slices.Contains(got, "gen/a") {
		t.Fatalf("ReadOnlyPaths(): %d paths, first %q", len(got), got[:min(len(got), 5)])
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestBareRepoHistoryHidden: a directory laid out as a git directory (a bare
// repository inside the tree) is scanned too: its history's secret is not
// reachable with git --git-dir inside, and the emptied directory is read-only.
func TestBareRepoHistoryHidden(t *testing.T) {
	src := gitRepo(t, map[string]string{".env": "TOKEN=BARE-SECRET\n", "a.txt": "a\n"})
	host := t.TempDir()
	cmd := exec.Command("git", "clone", "-q", "--bare", src, filepath.Join(host, "fixtures", "r.git"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	writeHost(t, host, map[string]string{"main.go": "package main\n"})
	d, _ := physicalDir(t, host, dir.WithPolicy(policy.Defaults()))
	tr := checkout(t, d, materialize.Options{})
	if sk := gitSkip(tr, "fixtures/r.git"); sk == nil || !strings.Contains(sk.Reason, "history names fixtures/.env, which the policy hides") {
		t.Fatalf("Skipped() = %+v: want the bare repository emptied", tr.Skipped())
	}
	if !slices.Contains(tr.ReadOnlyPaths(), "fixtures/r.git") {
		t.Fatalf("ReadOnlyPaths() = %q: the emptied repository must be read-only", tr.ReadOnlyPaths())
	}
	needBwrap(t)
	out := inSandbox(t, `git --git-dir=fixtures/r.git show HEAD:.env 2>&1; grep -r BARE-SECRET . 2>&1; touch fixtures/r.git/HEAD 2>&1`, workMount(tr))
	if strings.Contains(out, "BARE-SECRET") || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("inside the sandbox:\n%s", out)
	}
}
