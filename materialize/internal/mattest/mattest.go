//go:build linux

// Package mattest holds the test fixtures that materialize's and syncback's
// tests share: the sources a checkout is made of, a standard tree, snapshots
// of a Dir to compare, and a TestMain that keeps runs off the user's state.
// Only tests import it.
package mattest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/testenv"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

var ctx = context.Background()

// Source is a Dir to check out, with the host directory behind it when
// physical.
type Source struct {
	Name string
	D    *dir.Dir
	B    vfs.Backend
	Host string // "" for memory
}

// ForEach runs fn as a subtest on a new memory source and a new physical
// one, each a Dir made with opts.
func ForEach(t *testing.T, fn func(t *testing.T, s Source), opts ...dir.Option) {
	t.Run("memory", func(t *testing.T) {
		b := memory.New()
		d, _ := dir.New(b, opts...)
		fn(t, Source{"memory", d, b, ""})
	})
	t.Run("physical", func(t *testing.T) {
		host := t.TempDir()
		b, err := physical.New(host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		d, _ := dir.New(b, opts...)
		fn(t, Source{"physical", d, b, host})
	})
}

// Fill writes the standard fixture into d.
func Fill(t *testing.T, d *dir.Dir) {
	t.Helper()
	Must(t, d.MkdirAll(ctx, "src/sub"))
	Must(t, d.WriteFile(ctx, "README", []byte("hello\n"), 0o644))
	Must(t, d.WriteFile(ctx, "src/main.go", []byte("package main\n"), 0o644))
	Must(t, d.WriteFile(ctx, "src/sub/util.go", []byte("package sub\n"), 0o600))
	Must(t, d.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\n"), 0o755))
	Must(t, d.Symlink(ctx, "src/main.go", "main-link"))
	Must(t, d.Symlink(ctx, "../main.go", "src/sub/up"))
}

// Must fails t with err, if any.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Checkout checks d out with o (under a temporary Base when o has none),
// closed when t ends.
func Checkout(t *testing.T, d *dir.Dir, o materialize.Options) *materialize.Tree {
	t.Helper()
	if o.Base == "" {
		o.Base = t.TempDir()
	}
	tr, err := materialize.Checkout(ctx, d, o)
	if err != nil {
		t.Fatalf("Checkout: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// Snapshot describes every entry of d: "f 0644 contents", "d 0755", "l target".
func Snapshot(t *testing.T, d *dir.Dir) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := d.Walk(ctx, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		s, err := describe(d, p)
		out[p] = s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// describe is Snapshot's line for entry p of d.
func describe(d *dir.Dir, p string) (string, error) {
	fi, err := d.Lstat(ctx, p)
	if err != nil {
		return "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		tg, err := d.Readlink(ctx, p)
		return "l " + tg, err
	case fi.IsDir():
		return "d " + fi.Mode().Perm().String(), nil
	}
	b, err := d.ReadFile(ctx, p)
	return "f " + (fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)).String() + " " + string(b), err
}

// SameMap fails t, listing the differences, unless got and want are equal.
func SameMap(t *testing.T, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, k+": got "+strings.TrimSpace(got[k])+", want "+strings.TrimSpace(v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, k+": unexpected "+v)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("trees differ:\n%s", strings.Join(diffs, "\n"))
	}
}

// Kinds maps each change's path to its kind.
func Kinds(cs []materialize.Change) map[string]materialize.ChangeKind {
	out := map[string]materialize.ChangeKind{}
	for _, c := range cs {
		out[c.Path] = c.Kind
	}
	return out
}

// Main runs m with checkouts under a directory of the run's own (unmounted
// and removed afterwards) and, unless the environment names one, a state
// directory of its own for the syncs' journals, and returns the exit code.
func Main(m *testing.M) int {
	cleanup, err := testenv.PrivateTmp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	if os.Getenv(syncback.EnvStateDir) != "" {
		return m.Run()
	}
	d, err := os.MkdirTemp("", "capfs-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(d)
	os.Setenv(syncback.EnvStateDir, d)
	return m.Run()
}
