package policy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitRepo makes a repository at dir with the given config settings (key, value
// pairs), with git's global and system configuration out of the way.
func gitRepo(t *testing.T, dir string, kv ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	for i := 0; i+1 < len(kv); i += 2 {
		git("config", "--add", kv[i], kv[i+1])
	}
}

func writeHost(t *testing.T, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func projectEngine(t *testing.T, dir, prefix string) (*Engine, []Rule) {
	t.Helper()
	rules, err := ForProject(context.Background(), dir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Defaults().With(rules...)
	if err != nil {
		t.Fatalf("With(%+v): %v", rules, err)
	}
	return e, rules
}

func TestForProject(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	dir := filepath.Join(root, "repo")
	gitRepo(t, dir,
		"core.hooksPath", "hooks dir",
		"core.fsmonitor", "./tools/fsmon.sh",
		"alias.fmt", "!./scripts/fmt.sh --check && sh 'scripts/lint.sh'",
		"alias.st", "status",
		"filter.x.clean", "tools/clean.sh %f",
		"diff.img.textconv", "bin/conv --file=tools/conv.cfg",
		"core.sshCommand", "ssh -i "+filepath.Join(outside, "key"),
		"credential.https://example.com.helper", "store --file=secrets/creds",
		"include.path", "../tools/gitconfig",
		"include.path", "../missing/more.cfg",
		"core.editor", "vi",
	)
	writeHost(t, filepath.Join(dir, "tools/gitconfig"), "[alias]\n\tx = !./from-include/x.sh\n")
	e, rules := projectEngine(t, dir, "project")
	denied := []string{
		"project/hooks dir", "project/hooks dir/pre-commit", "project/tools/fsmon.sh", "project/scripts/fmt.sh",
		"project/scripts/lint.sh", "project/tools/clean.sh", "project/bin/conv", "project/tools/conv.cfg",
		"project/secrets/creds", "project/tools/gitconfig", "project/missing/more.cfg", "project/from-include/x.sh",
	}
	for _, p := range denied {
		for _, op := range []Op{OpWrite, OpCreate, OpRemove, OpRename, OpSymlink, OpChmod} {
			if d := decide(e, op, p, ""); d.Effect != Deny || !strings.HasPrefix(d.Rule, "project-git:") {
				t.Errorf("%s %q: %+v, want deny by a project-git rule", op, p, d)
			}
		}
		if d := decide(e, OpRead, p, ""); d.Effect != Allow {
			t.Errorf("read %q: %+v", p, d)
		}
	}
	for _, p := range []string{"project/src/main.go", "project/hooks", "project/tools/other.sh", "project/scripts", "project/status", "project/vi"} {
		if d := decide(e, OpWrite, p, ""); d.Effect != Allow {
			t.Errorf("write %q: %+v, want allow", p, d)
		}
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.Name)
		for _, p := range r.Paths {
			if strings.Contains(p, root) || strings.Contains(p, outside) {
				t.Errorf("rule %s names a host path: %q", r.Name, p)
			}
		}
	}
	for _, want := range []string{"project-git:core.hookspath", "project-git:core.fsmonitor", "project-git:alias.fmt", "project-git:include.path", "project-git:alias.x"} {
		if !slices.Contains(names, want) {
			t.Errorf("no rule %s in %q", want, names)
		}
	}
}

// TestForProjectPlaces covers where the named paths are: the top itself, a
// subdirectory of the work tree, outside it, through a symlink, with glob
// characters.
func TestForProjectPlaces(t *testing.T) {
	t.Run("top", func(t *testing.T) {
		dir := t.TempDir()
		gitRepo(t, dir, "core.hooksPath", ".")
		e, _ := projectEngine(t, dir, "")
		if d := decide(e, OpWrite, "pre-commit", ""); d.Effect != Deny {
			t.Errorf("write pre-commit: %+v", d)
		}
		if d := decide(e, OpWrite, "README.md", ""); d.Effect != Allow {
			t.Errorf("write README.md: %+v", d)
		}
	})
	t.Run("subdirectory", func(t *testing.T) {
		top := t.TempDir()
		gitRepo(t, top, "core.hooksPath", "sub/hooks", "alias.a", "!other/x.sh")
		sub := filepath.Join(top, "sub")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		e, rules := projectEngine(t, sub, "p")
		if d := decide(e, OpWrite, "p/hooks/pre-push", ""); d.Effect != Deny {
			t.Errorf("write p/hooks/pre-push: %+v", d)
		}
		for _, r := range rules {
			if r.Name == "project-git:alias.a" {
				t.Errorf("a path outside the project got a rule: %+v", r)
			}
		}
	})
	t.Run("outside", func(t *testing.T) {
		dir, elsewhere := t.TempDir(), t.TempDir()
		gitRepo(t, dir, "core.hooksPath", elsewhere)
		_, rules := projectEngine(t, dir, "p")
		for _, r := range rules {
			if r.Name == "project-git:core.hookspath" {
				t.Errorf("hooks outside the project got a rule: %+v", r)
			}
		}
	})
	t.Run("absolute and symlinked", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "real-hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real-hooks", filepath.Join(dir, "hooks-link")); err != nil {
			t.Fatal(err)
		}
		gitRepo(t, dir, "core.hooksPath", filepath.Join(dir, "hooks-link"))
		e, _ := projectEngine(t, dir, "p")
		for _, p := range []string{"p/hooks-link/pre-commit", "p/real-hooks/pre-commit"} {
			if d := decide(e, OpWrite, p, ""); d.Effect != Deny {
				t.Errorf("write %s: %+v", p, d)
			}
		}
	})
	t.Run("glob characters", func(t *testing.T) {
		dir := t.TempDir()
		gitRepo(t, dir, "core.hooksPath", "h[1]{a,b}*")
		e, _ := projectEngine(t, dir, "p")
		if d := decide(e, OpWrite, "p/h[1]{a,b}*/pre-commit", ""); d.Effect != Deny {
			t.Errorf("write the literal name: %+v", d)
		}
		for _, p := range []string{"p/h1a/pre-commit", "p/h1bx/pre-commit"} {
			if d := decide(e, OpWrite, p, ""); d.Effect != Allow {
				t.Errorf("write %s: %+v (the name is not a pattern)", p, d)
			}
		}
	})
	t.Run("not a repository", func(t *testing.T) {
		dir := t.TempDir()
		rules, err := ForProject(context.Background(), dir, "p")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			for _, p := range r.Paths {
				if strings.HasPrefix(p, "p/") {
					t.Errorf("rule in a directory without git: %+v", r)
				}
			}
		}
	})
	if _, err := ForProject(context.Background(), filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("ForProject of a missing directory: no error")
	}
	if _, err := ForProject(context.Background(), t.TempDir(), "."); err != nil {
		t.Errorf("ForProject at the root (\".\"): %v", err)
	}
	if _, err := ForProject(context.Background(), t.TempDir(), "../up"); err == nil {
		t.Error("ForProject with an unclean prefix: no error")
	}
}

// TestLocalConfig reads .git/config without git, following a gitdir file.
func TestLocalConfig(t *testing.T) {
	dir := t.TempDir()
	writeHost(t, filepath.Join(dir, "real.git/config"), "[core]\n\thooksPath = .husky\n\tfsmonitor = ./fs.sh\n[alias \"Sub\"]\n\tX = !a/b\n")
	writeHost(t, filepath.Join(dir, "wt/.git"), "gitdir: ../real.git\n")
	got := localConfig(filepath.Join(dir, "wt"))
	var keys []string
	for _, e := range got {
		keys = append(keys, e.key+"="+e.value)
	}
	want := []string{"core.hookspath=.husky", "core.fsmonitor=./fs.sh", "alias.Sub.x=!a/b"}
	if !slices.Equal(keys, want) {
		t.Errorf("localConfig: %q, want %q", keys, want)
	}
}

// TestForProjectSubmodule reads a checked-out submodule's configuration too.
func TestForProjectSubmodule(t *testing.T) {
	top := t.TempDir()
	gitRepo(t, top)
	lib := filepath.Join(top, "vendor/lib")
	gitRepo(t, lib, "core.hooksPath", "githooks", "alias.b", "!./build.sh")
	writeHost(t, filepath.Join(top, ".gitmodules"), "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = ./lib\n")
	e, _ := projectEngine(t, top, "p")
	for _, p := range []string{"p/vendor/lib/githooks/pre-commit", "p/vendor/lib/build.sh"} {
		if d := decide(e, OpWrite, p, ""); d.Effect != Deny {
			t.Errorf("write %s: %+v", p, d)
		}
	}
	if d := decide(e, OpWrite, "p/githooks/pre-commit", ""); d.Effect != Allow {
		t.Errorf("the submodule's hooksPath applied to the superproject: %+v", d)
	}
}
