package syncback_test

import (
	"context"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/vfs"
)

// source is a Dir to check out, with the host directory behind it when physical.
type source struct {
	name string
	d    *dir.Dir
	b    vfs.Backend
	host string // "" for memory
}

func sources(t *testing.T, opts ...dir.Option) []source {
	t.Helper()
	mb := memory.New()
	md, _ := dir.New(mb, opts...)
	host := t.TempDir()
	pb, err := physical.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	pd, _ := dir.New(pb, opts...)
	return []source{{"memory", md, mb, ""}, {"physical", pd, pb, host}}
}

func forEach(t *testing.T, fn func(t *testing.T, s source), opts ...dir.Option) {
	for _, name := range []string{"memory", "physical"} {
		t.Run(name, func(t *testing.T) {
			for _, s := range sources(t, opts...) {
				if s.name == name {
					fn(t, s)
				}
			}
		})
	}
}

var ctx = context.Background()

// fill writes the standard fixture into d.
func fill(t *testing.T, d *dir.Dir) {
	t.Helper()
	must(t, d.MkdirAll(ctx, "src/sub"))
	must(t, d.WriteFile(ctx, "README", []byte("hello\n"), 0o644))
	must(t, d.WriteFile(ctx, "src/main.go", []byte("package main\n"), 0o644))
	must(t, d.WriteFile(ctx, "src/sub/util.go", []byte("package sub\n"), 0o600))
	must(t, d.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\n"), 0o755))
	must(t, d.Symlink(ctx, "src/main.go", "main-link"))
	must(t, d.Symlink(ctx, "../main.go", "src/sub/up"))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func checkout(t *testing.T, d *dir.Dir, o materialize.Options) *materialize.Tree {
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

// snapshot describes every entry of d: "f 0644 contents", "d 0755", "l target".
func snapshot(t *testing.T, d *dir.Dir) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := d.Walk(ctx, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := d.Lstat(ctx, p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tg, err := d.Readlink(ctx, p)
			if err != nil {
				return err
			}
			out[p] = "l " + tg
		case fi.IsDir():
			out[p] = "d " + fi.Mode().Perm().String()
		default:
			b, err := d.ReadFile(ctx, p)
			if err != nil {
				return err
			}
			out[p] = "f " + (fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)).String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameMap(t *testing.T, got, want map[string]string) {
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

func kinds(cs []materialize.Change) map[string]materialize.ChangeKind {
	out := map[string]materialize.ChangeKind{}
	for _, c := range cs {
		out[c.Path] = c.Kind
	}
	return out
}
