// Command revisions shows revision browsing with capfs: it builds a small git
// repository with the git CLI, mounts two of its revisions side by side
// (rev/main and rev/HEAD~1, read-only) with a memory scratch area and a writable
// overlay of main (work), and hands a guest one Dir over the whole namespace. The
// guest lists and reads both revisions, the host prints the diff between them,
// the guest edits the overlay, and the host commits the edit to main without a
// checkout: the repository's work tree and index are never touched. The new
// commit is shown with `git log` and read back through a fresh gitree.Open.
//
// Run it with `go run ./examples/revisions` (the git CLI must be on PATH).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func main() {
	tmp, err := os.MkdirTemp("", "capfs-revisions-")
	if err == nil {
		err = run(context.Background(), os.Stdout, tmp)
		os.RemoveAll(tmp)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "revisions:", err)
		os.Exit(1)
	}
}

// git runs the git CLI in repo with a fixed identity and dates (so commit ids are
// the same on every run) and no user or system configuration.
func git(repo string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=Host", "-c", "user.email=host@example.com"}, args...)...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_DATE=2024-01-01T12:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T12:00:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// buildRepo makes a repository with two commits on main in dir/repo.
func buildRepo(tmp string) (string, error) {
	repo := filepath.Join(tmp, "repo")
	files := func(m map[string]string) error {
		for name, body := range m {
			p := filepath.Join(repo, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return "", err
	}
	steps := []func() error{
		func() error { _, err := git(repo, "init", "-q", "-b", "main"); return err },
		func() error {
			return files(map[string]string{
				"README.md":   "# greeter\n\nSays hello.\n",
				"main.go":     "package main\n\nfunc main() { println(\"hello\") }\n",
				"lib/util.go": "package lib\n\nconst Name = \"world\"\n",
			})
		},
		func() error { _, err := git(repo, "add", "-A"); return err },
		func() error { _, err := git(repo, "commit", "-q", "-m", "first version"); return err },
		func() error {
			return files(map[string]string{
				"README.md":   "# greeter\n\nSays hello to the world.\n",
				"lib/util.go": "package lib\n\nconst Name = \"capfs\"\n",
				"lib/doc.go":  "// Package lib names the greeted.\npackage lib\n",
			})
		},
		func() error { _, err := git(repo, "add", "-A"); return err },
		func() error { _, err := git(repo, "commit", "-q", "-m", "greet capfs"); return err },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return "", err
		}
	}
	return repo, nil
}

func run(ctx context.Context, out io.Writer, tmp string) error {
	repo, err := buildRepo(tmp)
	if err != nil {
		return err
	}
	p := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }

	// --- The host opens two revisions and an overlay of main, and mounts them. ---
	head, err := gitree.Open(repo, "main")
	if err != nil {
		return err
	}
	defer head.Close()
	prev, err := gitree.Open(repo, "HEAD~1")
	if err != nil {
		return err
	}
	defer prev.Close()
	work, err := gitree.OpenOverlay(repo, "main", gitree.OverlayMemory(memory.WithQuota(1<<20)))
	if err != nil {
		return err
	}
	defer work.Close()
	ns := vfs.NewNamespace()
	for _, m := range []struct {
		at string
		b  vfs.Backend
	}{
		{"rev/main", head}, {"rev/HEAD~1", prev}, {"work", work}, {"scratch", memory.New(memory.WithQuota(1 << 20))},
	} {
		if err := ns.Mount(vfs.MustParse(m.at), m.b, vfs.MountOptions{}); err != nil {
			return err
		}
	}
	guest, _ := dir.New(ns, dir.WithSubject("reviewer"))

	// --- The guest browses both revisions side by side. ---
	p("== The guest's namespace ==")
	for _, d := range []string{"/", "rev", "rev/main", "rev/HEAD~1/lib"} {
		names, err := guest.List(ctx, d)
		if err != nil {
			return err
		}
		p("  ls %-15s %s", d+":", strings.Join(names, " "))
	}
	for _, f := range []string{"rev/HEAD~1/README.md", "rev/main/README.md"} {
		body, err := guest.ReadFile(ctx, f)
		if err != nil {
			return err
		}
		p("  cat %s: %q", f, body)
	}
	err = guest.WriteFile(ctx, "rev/main/README.md", []byte("x"), 0o644)
	p("  write into rev/main -> %v", err)

	// --- The host diffs the two revisions. ---
	changes, err := gitree.Diff(ctx, prev, head)
	if err != nil {
		return err
	}
	p("\n== Diff HEAD~1..main ==")
	for _, c := range changes {
		p("  %-9s %s", c.Kind, c.Path)
	}
	var diff strings.Builder
	if err := gitree.UnifiedDiff(ctx, prev, head, changes, &diff); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(diff.String(), "\n"), "\n") {
		p("  | %s", line)
	}

	// --- The guest edits the overlay of main and keeps notes in scratch. ---
	p("\n== The guest edits work/ (an overlay of main) ==")
	if err := guest.WriteFile(ctx, "work/README.md", []byte("# greeter\n\nSays hello to capfs.\n"), 0o644); err != nil {
		return err
	}
	if err := guest.WriteFile(ctx, "work/lib/VERSION", []byte("1.1\n"), 0o644); err != nil {
		return err
	}
	if err := guest.Remove(ctx, "work/main.go"); err != nil {
		return err
	}
	if err := guest.WriteFile(ctx, "scratch/notes.txt", []byte("README reworded, main.go dropped\n"), 0o644); err != nil {
		return err
	}
	names, err := guest.List(ctx, "work")
	if err != nil {
		return err
	}
	p("  ls work: %s", strings.Join(names, " "))
	pending, err := gitree.DiffBackends(ctx, head, work)
	if err != nil {
		return err
	}
	for _, c := range pending {
		p("  pending: %-9s %s", c.Kind, c.Path)
	}

	// --- The host commits the overlay to main: objects and a ref, nothing else. ---
	id, err := work.Commit(ctx, "Edit from the overlay", gitree.Signature{
		Name: "Reviewer", Email: "reviewer@example.com", When: time.Date(2024, 1, 2, 9, 0, 0, 0, time.UTC),
	})
	if err != nil {
		return err
	}
	p("\n== Committed %s ==", id[:12])
	for _, args := range [][]string{{"log", "--oneline", "-3"}, {"show", "--stat", "--format=", "main"}, {"fsck", "--strict"}} {
		o, err := git(repo, args...)
		if err != nil {
			return err
		}
		if o == "" {
			o = "(no output)"
		}
		p("  $ git %s", strings.Join(args, " "))
		for _, line := range strings.Split(o, "\n") {
			p("    %s", line)
		}
	}
	disk, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		return err
	}
	p("  work tree README.md (untouched): %q", disk)
	fresh, err := gitree.Open(repo, "main")
	if err != nil {
		return err
	}
	defer fresh.Close()
	fd, _ := dir.New(fresh)
	readme, err := fd.ReadFile(ctx, "README.md")
	if err != nil {
		return err
	}
	names, err = fd.List(ctx, "/")
	if err != nil {
		return err
	}
	p("  fresh gitree.Open(main): ls %s; README.md %q", strings.Join(names, " "), readme)
	return nil
}
