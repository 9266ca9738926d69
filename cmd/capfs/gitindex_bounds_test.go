//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDiffIndexNotRegular: .git/index is the project's file, an outside input.
// A FIFO or a link to /dev/zero there is not read (capfs diff answers as git
// does without the index); on the code before, opening the FIFO blocked for
// ever and /dev/zero was read up to 1 GiB.
func TestDiffIndexNotRegular(t *testing.T) {
	t.Parallel()
	for name, plant := range map[string]func(string) error{
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"/dev/zero": func(p string) error { return os.Symlink("/dev/zero", p) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := gitRepo(t, map[string]string{"edit.txt": "a\n"})
			idx := filepath.Join(root, ".git", "index")
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
			if err := plant(idx); err != nil {
				t.Skipf("cannot plant %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(root, "edit.txt"), []byte("b\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runCapfsTimeout(t, root, nil, 2*time.Minute, "--audit", "off", "diff", "ref/head", "project")
			if r.code != 0 || r.stdout == "" {
				t.Fatalf("capfs diff with a %s index: exit %d\nstdout:\n%s\nstderr:\n%s", name, r.code, r.stdout, r.stderr)
			}
		})
	}
}
