//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitModes are the ways a run reaches the work tree: the default (lazy where
// FUSE works), lazy and checkout; lazy is left out where FUSE does not work.
func gitModes(t *testing.T) [][]string {
	t.Helper()
	modes := [][]string{nil, {"--no-lazy"}}
	if lazyAvailable() == nil {
		modes = append(modes, []string{"--lazy"})
	} else {
		t.Logf("FUSE is not usable here: the lazy mode is not tested (%v)", lazyAvailable())
	}
	return modes
}

// gitCacheEnv is a run's environment with a cache directory of its own (the
// history scan cache and the build caches).
func gitCacheEnv(t *testing.T) ([]string, string) {
	t.Helper()
	env, _ := stateEnv(t)
	cache := t.TempDir()
	return append(env, "CAPFS_CACHE_DIR="+cache), cache
}

// TestRunGitWorks: in a fresh repository with a main package, git status,
// log, diff and blame work inside a run with default flags (and in each
// mode), read-only, and go build stamps the commit it builds (-buildvcs);
// the summary says .git is shown. Fails on 8a35f16, whose lazy default hid
// .git's contents (git: "not a git repository"; go build: "error obtaining
// VCS status").
func TestRunGitWorks(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"go.mod": "module example.com/x\n\ngo 1.21\n", "main.go": "package main\n\nfunc main() { println(\"hi\") }\n"})
	head := strings.TrimSpace(gitIn(t, root, "rev-parse", "HEAD"))
	if err := os.WriteFile(filepath.Join(root, "main.go"), []byte("package main\n\nfunc main() { println(\"edited\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `git status --porcelain; git log --format=subject:%s; git diff --stat; git blame -s go.mod | head -n 1
git commit -qam sandboxed 2>&1 | tail -n 1
command -v go >/dev/null || { echo NO-GO; exit 0; }
go build -o /tmp/x . && go version -m /tmp/x | grep vcs.revision`
	for _, mode := range gitModes(t) {
		env, _ := gitCacheEnv(t)
		r := runCapfsEnv(t, root, env, append(append([]string{"run"}, mode...), "--sync", "never", "--", "sh", "-c", script)...).want(t, 0)
		for _, want := range []string{" M main.go\n", "subject:initial\n", "main.go | ", "Read-only file system"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q: stdout lacks %q:\n%s\nstderr:\n%s", mode, want, r.stdout, r.stderr)
			}
		}
		if !strings.Contains(r.stdout, "NO-GO") && !strings.Contains(r.stdout, "vcs.revision="+head) {
			t.Errorf("%q: go build did not stamp %s:\n%s\nstderr:\n%s", mode, head, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "capfs: run: git: project/.git ") || !strings.Contains(r.stderr, " read-only: its history's ") {
			t.Errorf("%q: the summary does not say .git is shown:\n%s", mode, r.stderr)
		}
	}
	if got := gitIn(t, root, "rev-parse", "HEAD"); strings.TrimSpace(got) != head {
		t.Errorf("the host's HEAD moved: %s", got)
	}
}

// TestRunGitHistorySecretHidden: a repository whose history holds .env
// (committed, then deleted) shows no secret through git in any mode, default
// or --git keep; the summary names .env, and go build still works (without
// VCS stamping). Fails on 8a35f16, where --git keep showed the secret
// (and, lazy, go build failed on the hidden .git).
func TestRunGitHistorySecretHidden(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"go.mod": "module example.com/x\n\ngo 1.21\n", "main.go": "package main\n\nfunc main() {}\n",
		"conf/.env": "TOKEN=HISTORY-SECRET-7\n"})
	gitIn(t, root, "rm", "-q", "conf/.env")
	gitIn(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "drop the secret")
	script := `git show HEAD~1:conf/.env 2>&1; git log -p 2>&1; git cat-file --batch-all-objects --batch 2>&1
cat .git/objects/*/* 2>/dev/null | gzip -dc 2>/dev/null; grep -ra HISTORY-SECRET . 2>&1
command -v go >/dev/null && { go build -o /tmp/x . && echo BUILT; }; true`
	for _, mode := range gitModes(t) {
		for _, git := range [][]string{nil, {"--git", "keep"}} {
			env, _ := gitCacheEnv(t)
			args := append(append(append([]string{"run"}, mode...), git...), "--", "sh", "-c", script)
			r := runCapfsEnv(t, root, env, args...).want(t, 0)
			if strings.Contains(r.stdout, "HISTORY-SECRET") || strings.Contains(r.stderr, "HISTORY-SECRET") {
				t.Errorf("%q: the secret in history reached the sandbox:\n%s", args, r.stdout)
			}
			if !strings.Contains(r.stderr, "capfs: run: git: project/.git") || !strings.Contains(r.stderr, "its history names conf/.env, which the policy hides") {
				t.Errorf("%q: the summary does not name conf/.env:\n%s", args, r.stderr)
			}
			if git != nil && !strings.Contains(r.stderr, "--git keep does not show a history that names a hidden path") {
				t.Errorf("%q: the summary does not say --git keep refused:\n%s", args, r.stderr)
			}
			if _, err := exec.LookPath("go"); err == nil && !strings.Contains(r.stdout, "BUILT") {
				t.Errorf("%q: go build failed beside the hidden .git:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
			}
		}
	}
}

// TestRunGitScanCached: a second run on an unchanged repository reads the
// history's paths from the scan cache (the summary says "scan cached"); a new
// commit, or a cache file altered, means a rescan ("scanned").
func TestRunGitScanCached(t *testing.T) {
	needSandbox(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	env, cache := gitCacheEnv(t)
	for _, mode := range gitModes(t) {
		modeEnv, _ := gitCacheEnv(t)
		for i, want := range []string{"(scanned)", "(scan cached)"} {
			r := runCapfsEnv(t, root, modeEnv, append(append([]string{"run"}, mode...), "--", "git", "log", "--oneline")...).want(t, 0)
			if !strings.Contains(r.stderr, "capfs: run: git: ") || !strings.Contains(r.stderr, want) {
				t.Errorf("%q run %d: the summary lacks %q:\n%s", mode, i, want, r.stderr)
			}
		}
	}
	run := func(want string) {
		t.Helper()
		r := runCapfsEnv(t, root, env, "run", "--", "git", "log", "--oneline").want(t, 0)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the summary lacks %q:\n%s", want, r.stderr)
		}
	}
	run("(scanned)")
	files, _ := filepath.Glob(filepath.Join(cache, "gitscan", "*.scan"))
	if len(files) != 1 {
		t.Fatalf("scan cache files: %q", files)
	}
	run("(scan cached)")
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 1 // a byte of the last path
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	run("(scanned)")
	run("(scan cached)")
	if err := os.WriteFile(filepath.Join(root, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "add", "b.txt")
	gitIn(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "b")
	run("(scanned)")
}

// gitIndexNaming makes root a git repository whose index names path (added,
// not committed).
func gitIndexNaming(t *testing.T, root, path string) {
	t.Helper()
	gitIn(t, root, "init", "-q")
	gitIn(t, root, "add", "-f", path)
}

// TestRunLazyGitLateObject: an object the host adds to the .git after a lazy
// run's scan (git add during the run) is not shown inside, though the index
// naming it and a new work-tree file are: the view shows only the objects the
// scan covered.
func TestRunLazyGitLateObject(t *testing.T) {
	needLazy(t)
	t.Parallel()
	root := gitRepo(t, map[string]string{"a.txt": "a\n"})
	id := strings.TrimSpace(gitInStdin(t, root, "LATE-CONTENT-42\n", "hash-object", "--stdin"))
	env, _ := gitCacheEnv(t)
	mnt := filepath.Join(strings.TrimPrefix(env[0], "XDG_STATE_HOME="), "capfs", "mnt")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 600 { // the mount exists once the scan is done
			if m, _ := filepath.Glob(filepath.Join(mnt, "capfs-lazy-*")); len(m) > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := os.WriteFile(filepath.Join(root, "late.txt"), []byte("LATE-CONTENT-42\n"), 0o644); err != nil {
			t.Error(err)
			return
		}
		gitIn(t, root, "add", "late.txt")
		if err := os.WriteFile(filepath.Join(root, "marker"), nil, 0o644); err != nil {
			t.Error(err)
		}
	}()
	script := `i=0; while [ ! -e marker ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
[ -e marker ] && echo SAW-MARKER; sleep 1.5
git cat-file -p ` + id + ` 2>&1; git show :late.txt 2>&1; ls .git/objects/` + id[:2] + ` 2>&1; git ls-files --stage 2>&1; true`
	r := runCapfsEnv(t, root, env, "run", "--lazy", "--sync", "never", "--", "sh", "-c", script).want(t, 0)
	<-done
	if !strings.Contains(r.stdout, "SAW-MARKER") {
		t.Skipf("the host's change did not show in the lazy mount within 30 s:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "LATE-CONTENT") {
		t.Fatalf("an object added after the scan is shown:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "late.txt") {
		t.Errorf("the live index does not name late.txt (the test did not exercise the late object):\n%s", r.stdout)
	}
}

// gitInStdin runs git in root with stdin and returns its output.
func gitInStdin(t *testing.T, root, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Stdin = root, strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %q: %v", args, err)
	}
	return string(out)
}
