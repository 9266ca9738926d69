//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExtractSourceNotRegular: the ARCHIVE of capfs extract is a host file from
// outside. A FIFO, a device (a link to /dev/zero) or a directory is refused
// before any read, without blocking, as a usage error that names the argument
// as written and no resolved host path. On the code before, opening the FIFO
// blocked for ever.
func TestExtractSourceNotRegular(t *testing.T) {
	t.Parallel()
	for name, plant := range map[string]func(string) error{
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"/dev/zero": func(p string) error { return os.Symlink("/dev/zero", p) },
		"directory": func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, map[string]string{"dest/keep.txt": "keep"})
			if err := os.Mkdir(filepath.Join(root, "in"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := plant(filepath.Join(root, "in", "src")); err != nil {
				t.Skipf("cannot plant %s: %v", name, err)
			}
			before := snapshotDir(t, filepath.Join(root, "dest"))
			r := runCapfsTimeout(t, root, nil, time.Minute, "--audit", "off", "extract", "in/src", "project/dest")
			if r.code != exitUsage {
				t.Fatalf("extract of a %s: exit %d, want %d\n%s%s", name, r.code, exitUsage, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "in/src") || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("the error does not name the argument and the reason:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, root) {
				t.Errorf("the error names the host path %s:\n%s", root, r.stderr)
			}
			if after := snapshotDir(t, filepath.Join(root, "dest")); after != before {
				t.Errorf("a refused source changed DEST:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
