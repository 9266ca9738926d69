package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// capfsExec runs a capfs command line in process (execute, the whole command
// tree) with no default mounts and no audit log.
func capfsExec(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--no-default-mounts", "--audit", "off"}, args...)
	code := execute(context.Background(), environ{}, args, strings.NewReader(""), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// gitProject is a git repository holding main.go and sub/x.go, with a nested
// gitdir file (sub/.git, as a submodule has) beside its .git directory.
func gitProject(t *testing.T) string {
	t.Helper()
	root := gitRepo(t, map[string]string{"main.go": "package main\n", "sub/x.go": "package sub\n"})
	if err := os.WriteFile(filepath.Join(root, "sub", ".git"), []byte("gitdir: ../.git/modules/sub\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// hostNames lists the names under root, slash-separated, sorted.
func hostNames(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestSnapshotGitProject: a snapshot of a git project leaves .git out and
// restores into an empty target; --git keep stores it, a plain restore of that
// snapshot still leaves it out, and restore --git keep stops where the policy
// refuses to write a git directory.
func TestSnapshotGitProject(t *testing.T) {
	proj := gitProject(t)
	st := "--store=" + t.TempDir()
	m := []string{"-m", "project=physical:" + proj, "-m", "dst=physical:" + t.TempDir()}
	save := capfsExec(t, append(m, "snapshot", st, "save", "s1", "project")...).want(t, 0)
	if !strings.Contains(save.stderr, "left out 2 .git entries (--git keep includes them)") {
		t.Errorf("save does not say it left .git out:\n%s", save.stderr)
	}
	dst := strings.TrimPrefix(m[3], "dst=physical:")
	capfsExec(t, append(m, "snapshot", st, "restore", "s1", "dst/s1")...).want(t, 0)
	if got, want := hostNames(t, filepath.Join(dst, "s1")), []string{"main.go", "sub", "sub/x.go"}; !slices.Equal(got, want) {
		t.Errorf("restored %q, want %q", got, want)
	}

	capfsExec(t, append(m, "snapshot", st, "save", "--git", "keep", "s2", "project")...).want(t, 0)
	diff := capfsExec(t, append(m, "snapshot", st, "diff", "s1", "s2")...).want(t, 0)
	if !strings.Contains(diff.stdout, "A .git/\n") || !strings.Contains(diff.stdout, "A sub/.git\n") {
		t.Errorf("--git keep did not store .git: diff s1 s2:\n%s", diff.stdout)
	}
	r := capfsExec(t, append(m, "snapshot", st, "restore", "s2", "dst/s2")...).want(t, 0)
	if got := hostNames(t, filepath.Join(dst, "s2")); slices.Contains(got, ".git") || slices.Contains(got, "sub/.git") {
		t.Errorf("a plain restore wrote .git: %q\n%s", got, r.stderr)
	}
	r = capfsExec(t, append(m, "snapshot", st, "restore", "--git", "keep", "s2", "dst/s3")...).want(t, 1)
	if !strings.Contains(r.stderr, "create directory dst/s3/.git: git is read-only here") {
		t.Errorf("restore --git keep: want the policy's refusal, got:\n%s", r.stderr)
	}
	capfsExec(t, append(m, "snapshot", st, "save", "--git", "yes", "s4", "project")...).want(t, 2)
}

// tarNames lists the entry names of the tar file name.
func tarNames(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// TestArchiveGitProject: an archive of a git project holds no .git and
// extracts with exit 0; --git keep archives .git, which extract then leaves
// out (exit 1: the policy keeps git read-only).
func TestArchiveGitProject(t *testing.T) {
	proj := gitProject(t)
	out := t.TempDir()
	m := []string{"-m", "project=physical:" + proj, "-m", "dst=physical:" + out}
	plain := filepath.Join(t.TempDir(), "plain.tar")
	r := capfsExec(t, append(m, "archive", "--format", "tar", "project", plain)...).want(t, 0)
	if got, want := tarNames(t, plain), []string{"main.go", "sub/", "sub/x.go"}; !slices.Equal(got, want) {
		t.Errorf("archive holds %q, want %q", got, want)
	}
	if !strings.Contains(r.stderr, "capfs: archive: left out 2 .git entries") {
		t.Errorf("archive does not say it left .git out:\n%s", r.stderr)
	}
	os.Mkdir(filepath.Join(out, "a"), 0o755)
	capfsExec(t, append(m, "extract", plain, "dst/a")...).want(t, 0)

	kept := filepath.Join(t.TempDir(), "kept.tar")
	capfsExec(t, append(m, "archive", "--format", "tar", "--git", "keep", "project", kept)...).want(t, 0)
	names := tarNames(t, kept)
	if !slices.Contains(names, ".git/HEAD") || !slices.Contains(names, "sub/.git") {
		t.Errorf("archive --git keep holds no .git: %q", names)
	}
	os.Mkdir(filepath.Join(out, "b"), 0o755)
	r = capfsExec(t, append(m, "extract", kept, "dst/b")...).want(t, 1)
	if !strings.Contains(r.stdout, "- .git/HEAD: left out, policy") {
		t.Errorf("extract of a kept .git: want it left out by the policy:\n%s", r.stdout)
	}
}
