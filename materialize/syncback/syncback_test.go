//go:build linux

package syncback_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/mattest"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

// refused runs a sync that must be refused with code and leave the source as it was.
func refused(t *testing.T, s mattest.Source, tr *materialize.Tree, code vfs.Code, path string) *syncback.Report {
	t.Helper()
	before := snapshot(t, s.D)
	rep, err := syncback.Run(ctx, tr, syncback.Options{})
	if vfs.CodeOf(err) != code {
		t.Fatalf("SyncBack: %v, want code %s", err, code)
	}
	var ve *vfs.Error
	if !errors.As(err, &ve) || ve.Path != path || !strings.Contains(ve.Error(), path) {
		t.Fatalf("error %v does not name %s", err, path)
	}
	if rep == nil || len(rep.Refused) == 0 || rep.Refused[0].Change.Path != path || len(rep.Applied) != 0 {
		t.Fatalf("report %+v", rep)
	}
	sameMap(t, snapshot(t, s.D), before)
	return rep
}

func TestSyncBackRefusals(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, root string)
		code vfs.Code
		path string
	}{
		{"escaping symlink", func(t *testing.T, root string) {
			must(t, os.Symlink("../../etc/passwd", filepath.Join(root, "src/esc")))
		}, vfs.CodeOutside, "src/esc"},
		{"absolute symlink", func(t *testing.T, root string) {
			must(t, os.Symlink("/etc/passwd", filepath.Join(root, "abs")))
		}, vfs.CodeOutside, "abs"},
		{"fifo", func(t *testing.T, root string) {
			must(t, unix.Mkfifo(filepath.Join(root, "pipe"), 0o644))
		}, vfs.CodeNotRegular, "pipe"},
		{"socket", func(t *testing.T, root string) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			must(t, err)
			defer unix.Close(fd)
			must(t, unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(root, "sock")}))
		}, vfs.CodeNotRegular, "sock"},
		{"git hook", func(t *testing.T, root string) {
			must(t, os.MkdirAll(filepath.Join(root, ".git/hooks"), 0o755))
			must(t, os.WriteFile(filepath.Join(root, ".git/hooks/pre-commit"), []byte("#!/bin/sh\ncurl evil\n"), 0o755))
		}, vfs.CodePermission, ".git"}, // git is read-only to guests (and hooks are persistence)
		{"bashrc", func(t *testing.T, root string) {
			must(t, os.WriteFile(filepath.Join(root, "src/.bashrc"), []byte("evil"), 0o644))
		}, vfs.CodePermission, "src/.bashrc"},
		{"backslash name", func(t *testing.T, root string) {
			must(t, os.WriteFile(filepath.Join(root, `a\b`), []byte("x"), 0o644))
		}, vfs.CodeInvalidPath, `a\b`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
				fill(t, s.D)
				tr := checkout(t, s.D, materialize.Options{})
				// A harmless change beside the bad one: it must not be applied either.
				must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("edited"), 0o644))
				must(t, os.WriteFile(filepath.Join(tr.Path(), "fine.txt"), []byte("fine"), 0o644))
				c.make(t, tr.Path())
				refused(t, s, tr, c.code, c.path)
			}, dir.WithPolicy(policy.Defaults())) // the Dir's own policy refuses the traps
		})
	}
}

func TestSyncBackGitHookAllRefused(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.MkdirAll(filepath.Join(tr.Path(), ".git/hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(tr.Path(), ".git/hooks/post-checkout"), []byte("x"), 0o755))
		rep := refused(t, s, tr, vfs.CodePermission, ".git")
		var ps []string
		for _, r := range rep.Refused {
			ps = append(ps, r.Change.Path)
			if r.Change.Path != ".git" && !strings.Contains(r.Reason, "**/.git/hooks/**") {
				t.Fatalf("reason %q does not name the persistence pattern", r.Reason)
			}
		}
		if strings.Join(ps, ",") != ".git,.git/hooks,.git/hooks/post-checkout" {
			t.Fatalf("refused %v", ps)
		}
		if ok, _ := s.D.Exists(ctx, ".git"); ok {
			t.Fatal(".git was created in the source")
		}
	}, dir.WithPolicy(policy.Defaults()))
}

func TestSyncBackStripsSetuid(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		p := filepath.Join(tr.Path(), "suid")
		must(t, os.WriteFile(p, []byte("payload"), 0o755))
		must(t, os.Chmod(p, 0o755|os.ModeSetuid|os.ModeSetgid|os.ModeSticky))
		fi, err := os.Lstat(p)
		must(t, err)
		if fi.Mode()&os.ModeSetuid == 0 {
			t.Skip("cannot set setuid here")
		}
		// a setuid bit added to an existing file is a no-op change
		must(t, os.Chmod(filepath.Join(tr.Path(), "run.sh"), 0o755|os.ModeSetuid))
		cs, err := tr.Diff(ctx)
		must(t, err)
		if k := kinds(cs); k["suid"] != materialize.Added || k["run.sh"] != materialize.ModeChanged {
			t.Fatalf("changes %v", k)
		}
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		must(t, err)
		if len(rep.Applied) != 1 || len(rep.Skipped) != 1 || rep.Skipped[0].Path != "run.sh" {
			t.Fatalf("report %+v", rep)
		}
		snap := snapshot(t, s.D)
		if snap["suid"] != "f -rwxr-xr-x payload" || snap["run.sh"] != "f -rwxr-xr-x #!/bin/sh\n" {
			t.Fatalf("suid %q, run.sh %q", snap["suid"], snap["run.sh"])
		}
	})
}

func TestSyncBackLimits(t *testing.T) {
	cases := []struct {
		name string
		lim  materialize.Limits
		make func(t *testing.T, root string)
		path string
	}{
		{"files", materialize.Limits{MaxFiles: 2}, func(t *testing.T, root string) {
			for _, n := range []string{"a", "b", "c"} {
				must(t, os.WriteFile(filepath.Join(root, n), []byte(n), 0o644))
			}
		}, "c"},
		{"bytes", materialize.Limits{MaxBytes: 10}, func(t *testing.T, root string) {
			must(t, os.WriteFile(filepath.Join(root, "big"), bytes.Repeat([]byte("x"), 11), 0o644))
		}, "big"},
		{"depth", materialize.Limits{MaxDepth: 3}, func(t *testing.T, root string) {
			must(t, os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755))
			must(t, os.WriteFile(filepath.Join(root, "a/b/c/d"), []byte("deep"), 0o644))
		}, "a/b/c/d"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
				fill(t, s.D)
				tr := checkout(t, s.D, materialize.Options{})
				c.make(t, tr.Path())
				before := snapshot(t, s.D)
				rep, err := syncback.Run(ctx, tr, syncback.Options{Limits: c.lim})
				if vfs.CodeOf(err) != vfs.CodeQuota {
					t.Fatalf("SyncBack: %v", err)
				}
				if len(rep.Refused) != 1 || rep.Refused[0].Change.Path != c.path {
					t.Fatalf("refused %+v", rep.Refused)
				}
				sameMap(t, snapshot(t, s.D), before)
				// Within the limits, the same sync passes.
				if _, err := syncback.Run(ctx, tr, syncback.Options{}); err != nil {
					t.Fatalf("default limits: %v", err)
				}
			})
		})
	}
}

func TestSyncBackConflicts(t *testing.T) {
	setup := func(t *testing.T, s mattest.Source) *materialize.Tree {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		// both sides edit README; only the sandbox edits run.sh and adds new.txt
		must(t, s.D.WriteFile(ctx, "README", []byte("theirs\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("ours\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "run.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "new.txt"), []byte("n"), 0o644))
		// the host adds a file where the sandbox adds one too
		must(t, s.D.WriteFile(ctx, "both", []byte("theirs"), 0o644))
		must(t, os.WriteFile(filepath.Join(tr.Path(), "both"), []byte("ours"), 0o644))
		return tr
	}
	t.Run("fail", func(t *testing.T) {
		mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
			tr := setup(t, s)
			before := snapshot(t, s.D)
			rep, err := syncback.Run(ctx, tr, syncback.Options{})
			if vfs.CodeOf(err) != vfs.CodeConflict || !strings.Contains(err.Error(), "README") || !strings.Contains(err.Error(), "both") {
				t.Fatalf("SyncBack: %v", err)
			}
			if strings.Join(rep.Conflicts, ",") != "README,both" || len(rep.Applied) != 0 {
				t.Fatalf("report %+v", rep)
			}
			sameMap(t, snapshot(t, s.D), before)
		})
	})
	t.Run("keep ours", func(t *testing.T) {
		mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
			tr := setup(t, s)
			rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: syncback.ConflictKeepOurs})
			must(t, err)
			if strings.Join(rep.Conflicts, ",") != "README,both" || len(rep.Applied) != 4 {
				t.Fatalf("report %+v", rep)
			}
			snap := snapshot(t, s.D)
			if snap["README"] != "f -rw-r--r-- ours\n" || snap["both"] != "f -rw-r--r-- ours" || snap["new.txt"] != "f -rw-r--r-- n" {
				t.Fatalf("source %v", snap)
			}
		})
	})
	t.Run("keep theirs", func(t *testing.T) {
		mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
			tr := setup(t, s)
			rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: syncback.ConflictKeepTheirs})
			must(t, err)
			if strings.Join(rep.Conflicts, ",") != "README,both" || len(rep.Applied) != 2 || len(rep.Skipped) != 2 {
				t.Fatalf("report %+v", rep)
			}
			snap := snapshot(t, s.D)
			if snap["README"] != "f -rw-r--r-- theirs\n" || snap["both"] != "f -rw-r--r-- theirs" ||
				snap["new.txt"] != "f -rw-r--r-- n" || snap["run.sh"] != "f -rwxr-xr-x #!/bin/sh\nexit 0\n" {
				t.Fatalf("source %v", snap)
			}
		})
	})
	t.Run("keep theirs skips dependents", func(t *testing.T) {
		mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
			fill(t, s.D)
			tr := checkout(t, s.D, materialize.Options{})
			// the sandbox deletes src/sub; the host edits a file in it
			must(t, os.RemoveAll(filepath.Join(tr.Path(), "src/sub")))
			must(t, s.D.WriteFile(ctx, "src/sub/util.go", []byte("host edit"), 0o600))
			rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: syncback.ConflictKeepTheirs})
			must(t, err)
			if strings.Join(rep.Conflicts, ",") != "src/sub/util.go" || len(rep.Applied) != 1 || rep.Applied[0].Path != "src/sub/up" {
				t.Fatalf("report %+v", rep)
			}
			snap := snapshot(t, s.D)
			if snap["src/sub/util.go"] != "f -rw------- host edit" || snap["src/sub/up"] != "" {
				t.Fatalf("source %v", snap)
			}
		})
	})
}

func TestSyncBackDryRunAndReadOnlySource(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "new.txt"), []byte("n"), 0o644))
		before := snapshot(t, s.D)
		rep, err := syncback.Run(ctx, tr, syncback.Options{DryRun: true})
		must(t, err)
		if len(rep.Applied) != 1 || rep.Applied[0].Path != "new.txt" {
			t.Fatalf("report %+v", rep)
		}
		sameMap(t, snapshot(t, s.D), before)

		ro := checkout(t, s.D.ReadOnly(), materialize.Options{})
		must(t, os.WriteFile(filepath.Join(ro.Path(), "new.txt"), []byte("n"), 0o644))
		if _, err := syncback.Run(ctx, ro, syncback.Options{}); vfs.CodeOf(err) != vfs.CodeReadOnly {
			t.Fatalf("read-only source: %v", err)
		}
		sameMap(t, snapshot(t, s.D), before)
	})
}

func TestSyncBackCustomPolicy(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "src/gen.go"), []byte("x"), 0o644))
		pol, err := policy.New(policy.Config{Rules: []policy.Rule{{
			Effect: policy.Deny, Ops: []policy.Op{policy.GroupWrite}, Paths: []string{"proj/src/**"}, Reason: "src is frozen",
		}}})
		must(t, err)
		rep, err := syncback.Run(ctx, tr, syncback.Options{Policy: pol, PolicyRoot: "proj"})
		if vfs.CodeOf(err) != vfs.CodePermission || len(rep.Refused) != 1 || !strings.Contains(rep.Refused[0].Reason, "src is frozen") {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
		// The same change under another root is allowed.
		if _, err := syncback.Run(ctx, tr, syncback.Options{Policy: pol, PolicyRoot: "other"}); err != nil {
			t.Fatal(err)
		}
		if b, _ := s.D.ReadFile(ctx, "src/gen.go"); string(b) != "x" {
			t.Fatalf("src/gen.go = %q", b)
		}
	})
}

func TestSyncBackHugeFileNotRead(t *testing.T) {
	d, _ := dir.New(memory.New())
	fill(t, d)
	tr := checkout(t, d, materialize.Options{})
	// A sparse terabyte: reading it would never finish within the test's time.
	f, err := os.Create(filepath.Join(tr.Path(), "huge"))
	must(t, err)
	must(t, f.Truncate(1<<40))
	must(t, f.Close())
	rep, err := syncback.Run(ctx, tr, syncback.Options{})
	if vfs.CodeOf(err) != vfs.CodeQuota || len(rep.Refused) != 1 || rep.Refused[0].Change.Path != "huge" {
		t.Fatalf("SyncBack: %v %+v", err, rep)
	}
	if ok, _ := d.Exists(ctx, "huge"); ok {
		t.Fatal("huge was synced")
	}
}

func TestSyncBackSourceDeleted(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		for _, mode := range []syncback.ConflictMode{syncback.ConflictFail, syncback.ConflictKeepOurs, syncback.ConflictKeepTheirs} {
			d, err := s.D.CreateDir(ctx, "case"+string(rune('0'+mode)))
			must(t, err)
			fill(t, d)
			tr := checkout(t, d, materialize.Options{})
			// the sandbox edits README and chmods run.sh; the host deletes both,
			// and both sides delete src/sub/up
			must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("ours"), 0o644))
			must(t, os.Chmod(filepath.Join(tr.Path(), "run.sh"), 0o700))
			must(t, os.Remove(filepath.Join(tr.Path(), "src/sub/up")))
			for _, p := range []string{"README", "run.sh", "src/sub/up"} {
				must(t, d.Remove(ctx, p))
			}
			rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: mode})
			if strings.Join(rep.Conflicts, ",") != "README,run.sh" {
				t.Fatalf("mode %d: conflicts %v", mode, rep.Conflicts)
			}
			snap := snapshot(t, d)
			switch mode {
			case syncback.ConflictFail:
				if vfs.CodeOf(err) != vfs.CodeConflict || snap["README"] != "" || snap["run.sh"] != "" {
					t.Fatalf("fail: %v %v", err, snap)
				}
			case syncback.ConflictKeepOurs:
				if err != nil || snap["README"] != "f -rw-r--r-- ours" || snap["run.sh"] != "f -rwx------ #!/bin/sh\n" {
					t.Fatalf("keep ours: %v %v", err, snap)
				}
			case syncback.ConflictKeepTheirs:
				if err != nil || snap["README"] != "" || snap["run.sh"] != "" || len(rep.Skipped) != 3 {
					t.Fatalf("keep theirs: %v %v %+v", err, snap, rep)
				}
			}
			if mode != syncback.ConflictFail {
				// the deletion both sides made is settled
				cs, err := tr.Diff(ctx)
				must(t, err)
				if kinds(cs)["src/sub/up"] != "" {
					t.Fatalf("settled deletion still reported: %v", kinds(cs))
				}
			}
		}
	})
}

// A sync-back that stops before its plan is made (the source Dir revoked
// meanwhile) applies nothing, reports every change as not applied, and
// keeps the checkout that holds them: closing it does not remove it.
func TestSyncBackStoppedKeepsCheckout(t *testing.T) {
	d, ctl := dir.New(memory.New())
	must(t, d.WriteFile(ctx, "a.txt", []byte("a\n"), 0o644))
	tr := checkout(t, d, materialize.Options{})
	must(t, os.WriteFile(filepath.Join(tr.Path(), "a.txt"), []byte("changed\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(tr.Path(), "b.txt"), []byte("new\n"), 0o644))
	ctl.Revoke()
	rep, err := syncback.Run(ctx, tr, syncback.Options{})
	if vfs.CodeOf(err) != vfs.CodeRevoked {
		t.Fatalf("Run: %v, want revoked", err)
	}
	if rep == nil || len(rep.Applied) != 0 || len(rep.NotApplied) != 2 || rep.Checkout != tr.Path() {
		t.Fatalf("report %+v", rep)
	}
	for _, u := range rep.NotApplied {
		if u.Cause != syncback.CauseStopped || u.Code != vfs.CodeRevoked {
			t.Errorf("not applied %+v", u)
		}
	}
	p := tr.Path()
	must(t, tr.Close())
	defer os.RemoveAll(p)
	if b, err := os.ReadFile(filepath.Join(p, "b.txt")); err != nil || string(b) != "new\n" {
		t.Fatalf("the kept checkout lost b.txt: %q, %v", b, err)
	}
}
