package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// GoSrcDirName is the directory under os.TempDir where GoSrcRepo caches its
// fixture, one subdirectory per Go version.
const GoSrcDirName = "capfs-bench-gosrc"

// goSrcLayout versions the fixture's layout: bump it when GoSrcRepo builds
// something different, so stale caches are not reused.
const goSrcLayout = "v1"

var goSrc struct {
	once           sync.Once
	repo, workTree string
	err            error
}

// GoSrcRepo returns a git repository holding one commit of a copy of Go's own
// source tree, $(go env GOROOT)/src (about 11,500 files, 160 MB), and the path
// of that copy.
//
// repo is a bare git directory (open it with gitree.Open, or git --git-dir) whose
// HEAD is refs/heads/main: one commit, made with the git CLI with fixed author,
// committer and dates (so its id depends only on the tree), of every file of the
// copy including ones a .gitignore names, then packed with "git repack -adq" as a
// clone would be (one pack, deltified, no loose objects). workTree is the copy
// itself, with no .git in it: what a checkout of HEAD must reproduce.
//
// The fixture is built once per Go version under os.TempDir()/GoSrcDirName and
// reused by later calls and later processes (it is built beside its final place
// and renamed into it, so a crashed build leaves nothing that looks complete).
// Callers must treat both directories as read-only. It needs the git CLI on PATH
// and takes tens of seconds the first time.
func GoSrcRepo() (repo, workTree string, err error) {
	goSrc.once.Do(func() {
		goSrc.repo, goSrc.workTree, goSrc.err = buildGoSrc()
	})
	return goSrc.repo, goSrc.workTree, goSrc.err
}

// goSrcKey names the cache directory of this Go version.
func goSrcKey() string {
	v := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, runtime.Version())
	return v + "-" + goSrcLayout
}

func buildGoSrc() (string, string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", "", fmt.Errorf("gosrc fixture: git CLI not on PATH: %w", err)
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", "", fmt.Errorf("gosrc fixture: go env GOROOT: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	if _, err := os.Stat(src); err != nil {
		return "", "", fmt.Errorf("gosrc fixture: %w", err)
	}
	parent := filepath.Join(os.TempDir(), GoSrcDirName)
	final := filepath.Join(parent, goSrcKey())
	repo, work := filepath.Join(final, "repo.git"), filepath.Join(final, "src")
	if _, err := os.Stat(filepath.Join(repo, "HEAD")); err == nil {
		return repo, work, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", "", err
	}
	tmp, err := os.MkdirTemp(parent, goSrcKey()+".build-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp) // gone after the rename; cleans up a failed build
	if err := copyTree(src, filepath.Join(tmp, "src")); err != nil {
		return "", "", fmt.Errorf("gosrc fixture: copy: %w", err)
	}
	gitDir, wt := filepath.Join(tmp, "repo.git"), filepath.Join(tmp, "src")
	steps := [][]string{
		{"init", "-q", "--bare", "--initial-branch=main", gitDir},
		{"--git-dir=" + gitDir, "--work-tree=" + wt, "add", "-A", "-f", "."},
		{"--git-dir=" + gitDir, "--work-tree=" + wt, "commit", "-q", "-m", "Go " + runtime.Version() + " src"},
		{"--git-dir=" + gitDir, "repack", "-adq"},
	}
	for _, args := range steps {
		cmd := exec.Command("git", append([]string{"-c", "gc.auto=0", "-c", "core.autocrlf=false"}, args...)...)
		cmd.Dir = wt
		cmd.Env = GitEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("gosrc fixture: git %s: %v: %s", args[len(args)-1], err, bytes.TrimSpace(out))
		}
	}
	// The index is a by-product of the commit, not part of the fixture.
	os.Remove(filepath.Join(gitDir, "index"))
	if err := os.Rename(tmp, final); err != nil {
		// Another process may have finished first: use its fixture.
		if _, err2 := os.Stat(filepath.Join(repo, "HEAD")); err2 == nil {
			return repo, work, nil
		}
		return "", "", err
	}
	return repo, work, nil
}

// GitEnv is the environment the bench runs the git CLI in: the process's own,
// without the user's or system's git configuration, and with fixed identities and
// dates, so commits are reproducible.
func GitEnv() []string {
	return append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=capfs bench", "GIT_AUTHOR_EMAIL=bench@capfs.invalid",
		"GIT_COMMITTER_NAME=capfs bench", "GIT_COMMITTER_EMAIL=bench@capfs.invalid",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
}

// copyTree copies regular files (with their permission bits), directories and
// symlinks from src to a new directory dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(p, to, fi.Mode().Perm())
		}
		return errors.New("unexpected file type at " + strconv.Quote(rel))
	})
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
