//go:build linux

package syncback_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/mattest"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// journalDir gives the test's syncs a journal directory of their own, and
// checks that none is left behind once the test ends.
func journalDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Cleanup(func() {
		if js, err := syncback.Pending(d); err != nil || len(js) != 0 {
			t.Errorf("journals left: %v %+v", err, js)
		}
	})
	return d
}

// accounted checks that every change Diff saw before the sync is in exactly
// one of the report's Applied, NotApplied and Settled lists, and that the
// checkout is kept, and reported, exactly when something was not applied.
func accounted(t *testing.T, before []materialize.Change, rep *syncback.Report, tr *materialize.Tree) {
	t.Helper()
	seen := map[string]string{}
	add := func(list string, cs ...materialize.Change) {
		for _, c := range cs {
			if prev, ok := seen[c.Path]; ok {
				t.Errorf("%s in %s and %s", c.Path, prev, list)
			}
			seen[c.Path] = list
		}
	}
	add("Applied", rep.Applied...)
	add("Settled", rep.Settled...)
	for _, u := range rep.NotApplied {
		add("NotApplied", u.Change)
		if u.Cause == "" || u.Code == "" || u.Reason == "" {
			t.Errorf("not applied without a cause: %+v", u)
		}
	}
	for _, c := range before {
		if _, ok := seen[c.Path]; !ok {
			t.Errorf("change %s %s not listed", c.Kind, c.Path)
		}
		delete(seen, c.Path)
	}
	for p := range seen {
		t.Errorf("%s listed but not a change", p)
	}
	kept := len(rep.NotApplied) > 0
	if tr.Kept() != kept || (rep.Checkout != "") != kept || (kept && rep.Checkout != tr.Path()) {
		t.Errorf("kept %v, report's checkout %q, with %d not applied", tr.Kept(), rep.Checkout, len(rep.NotApplied))
	}
	if kept {
		if _, err := os.Stat(rep.Checkout); err != nil {
			t.Errorf("kept checkout: %v", err)
		}
	}
}

func causes(rep *syncback.Report) map[string]syncback.Cause {
	out := map[string]syncback.Cause{}
	for _, u := range rep.NotApplied {
		out[u.Change.Path] = u.Cause
	}
	return out
}

// The host removes a directory while the sandbox adds files beneath it: a
// conflict for each file, never a partial apply, under every choice.
func TestSyncBackParentRemovedIsConflict(t *testing.T) {
	for _, hostOp := range []string{"remove", "rename", "replace by a file"} {
		for _, mode := range []syncback.ConflictMode{syncback.ConflictFail, syncback.ConflictKeepOurs, syncback.ConflictKeepTheirs} {
			for _, rej := range []syncback.RejectMode{syncback.RejectAbort, syncback.RejectApplyRest} {
				name := hostOp + "/" + []string{"fail", "ours", "theirs"}[mode] + "/" + []string{"abort", "apply-rest"}[rej]
				t.Run(name, func(t *testing.T) {
					mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
						fill(t, s.D)
						tr := checkout(t, s.D, materialize.Options{})
						root := tr.Path()
						must(t, os.WriteFile(filepath.Join(root, "src/sub/new1"), []byte("n1"), 0o644))
						must(t, os.MkdirAll(filepath.Join(root, "src/sub/deeper"), 0o755))
						must(t, os.WriteFile(filepath.Join(root, "src/sub/deeper/new2"), []byte("n2"), 0o644))
						must(t, os.WriteFile(filepath.Join(root, "README"), []byte("edited"), 0o644))
						switch hostOp {
						case "remove":
							must(t, s.D.RemoveAll(ctx, "src/sub"))
						case "rename":
							must(t, s.D.Move(ctx, "src/sub", "src/moved"))
						case "replace by a file":
							must(t, s.D.RemoveAll(ctx, "src/sub"))
							must(t, s.D.WriteFile(ctx, "src/sub", []byte("host file"), 0o644))
						}
						cs, err := tr.Diff(ctx)
						must(t, err)
						before := snapshot(t, s.D)
						rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: mode, OnReject: rej, JournalDir: journalDir(t)})
						accounted(t, cs, rep, tr)
						after := snapshot(t, s.D)
						// src/sub/new1 and src/sub/deeper are in conflict (src/sub/deeper/new2
						// is beneath a directory the sync creates: it depends on it).
						ours := mode == syncback.ConflictKeepOurs && hostOp != "replace by a file"
						if ours {
							must(t, err)
							if after["src/sub/new1"] != "f -rw-r--r-- n1" || after["src/sub/deeper/new2"] != "f -rw-r--r-- n2" || after["README"] != "f -rw-r--r-- edited" {
								t.Fatalf("keep ours: %v", after)
							}
							return
						}
						c := causes(rep)
						if strings.Join(rep.Conflicts, ",") != "src/sub/deeper,src/sub/new1" {
							t.Fatalf("conflicts %v (%v)", rep.Conflicts, c)
						}
						for _, p := range []string{"src/sub/deeper", "src/sub/deeper/new2", "src/sub/new1"} {
							if _, ok := c[p]; !ok {
								t.Fatalf("%s applied: %+v", p, rep)
							}
						}
						if after["src/sub/new1"] != "" || after["src/sub/deeper/new2"] != "" {
							t.Fatalf("applied beneath the removed directory: %v", after)
						}
						switch {
						case mode == syncback.ConflictKeepTheirs:
							if err != nil || c["src/sub/new1"] != syncback.CauseTheirs || c["src/sub/deeper/new2"] != syncback.CauseDepends ||
								after["README"] != "f -rw-r--r-- edited" {
								t.Fatalf("keep theirs: %v %v %v", err, c, after)
							}
						case rej == syncback.RejectAbort:
							if vfs.CodeOf(err) != vfs.CodeConflict || len(rep.Applied) != 0 || c["README"] != syncback.CauseAborted {
								t.Fatalf("abort: %v %+v", err, rep)
							}
							sameMap(t, after, before)
						default:
							if vfs.CodeOf(err) != vfs.CodeConflict || c["src/sub/new1"] != syncback.CauseConflict ||
								after["README"] != "f -rw-r--r-- edited" || len(rep.Applied) != 1 {
								t.Fatalf("apply rest: %v %+v %v", err, rep, after)
							}
						}
					})
				})
			}
		}
	}
}

// The sync-back matrix: host edits, deletions and renames racing the
// sandbox's adds, edits, deletions and mode changes, under every conflict and
// reject choice. Each case checks what is applied, what is not and why, that
// nothing else changed, and that an unrelated change goes through or not as the
// choice says.
func TestSyncBackRaceMatrix(t *testing.T) {
	type sandboxOp struct {
		name, path string
		do         func(t *testing.T, root string)
		want       string // the path's snapshot once applied ("" for gone)
	}
	sbOps := []sandboxOp{
		{"add", "d/new", func(t *testing.T, root string) {
			must(t, os.WriteFile(filepath.Join(root, "d/new"), []byte("ours"), 0o644))
		}, "f -rw-r--r-- ours"},
		{"edit", "d/f", func(t *testing.T, root string) {
			must(t, os.WriteFile(filepath.Join(root, "d/f"), []byte("ours"), 0o644))
		}, "f -rw-r--r-- ours"},
		{"delete", "d/f", func(t *testing.T, root string) {
			must(t, os.Remove(filepath.Join(root, "d/f")))
		}, ""},
		{"chmod", "d/f", func(t *testing.T, root string) {
			must(t, os.Chmod(filepath.Join(root, "d/f"), 0o600))
		}, "f -rw------- base"},
	}
	type hostOp struct {
		name string
		do   func(t *testing.T, d *dir.Dir)
	}
	hostOps := []hostOp{
		{"edit", func(t *testing.T, d *dir.Dir) { must(t, d.WriteFile(ctx, "d/f", []byte("theirs"), 0o644)) }},
		{"delete", func(t *testing.T, d *dir.Dir) { must(t, d.Remove(ctx, "d/f")) }},
		{"delete dir", func(t *testing.T, d *dir.Dir) { must(t, d.RemoveAll(ctx, "d")) }},
		{"rename dir", func(t *testing.T, d *dir.Dir) { must(t, d.Move(ctx, "d", "e")) }},
		{"rename file", func(t *testing.T, d *dir.Dir) { must(t, d.Move(ctx, "d/f", "d/f2")) }},
	}
	// conflict[host][sandbox]: whether the sandbox's change is in conflict;
	// "settled" when the source already has what it wants.
	conflict := map[string]map[string]string{
		"edit":        {"add": "", "edit": "yes", "delete": "yes", "chmod": "yes"},
		"delete":      {"add": "", "edit": "yes", "delete": "settled", "chmod": "yes"},
		"delete dir":  {"add": "yes", "edit": "yes", "delete": "settled", "chmod": "yes"},
		"rename dir":  {"add": "yes", "edit": "yes", "delete": "settled", "chmod": "yes"},
		"rename file": {"add": "", "edit": "yes", "delete": "settled", "chmod": "yes"},
	}
	modes := []syncback.ConflictMode{syncback.ConflictFail, syncback.ConflictKeepOurs, syncback.ConflictKeepTheirs}
	rejects := []syncback.RejectMode{syncback.RejectAbort, syncback.RejectApplyRest}
	for _, h := range hostOps {
		for _, sb := range sbOps {
			for _, mode := range modes {
				for _, rej := range rejects {
					name := h.name + "/" + sb.name + "/" + []string{"fail", "ours", "theirs"}[mode] + "/" + []string{"abort", "apply-rest"}[rej]
					t.Run(name, func(t *testing.T) {
						mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
							must(t, s.D.MkdirAll(ctx, "d"))
							must(t, s.D.WriteFile(ctx, "d/f", []byte("base"), 0o644))
							must(t, s.D.WriteFile(ctx, "d/g", []byte("g"), 0o644))
							must(t, s.D.WriteFile(ctx, "other", []byte("o"), 0o644))
							tr := checkout(t, s.D, materialize.Options{})
							sb.do(t, tr.Path())
							// An unrelated change beside it.
							must(t, os.WriteFile(filepath.Join(tr.Path(), "other"), []byte("o2"), 0o644))
							h.do(t, s.D)
							cs, err := tr.Diff(ctx)
							must(t, err)
							before := snapshot(t, s.D)
							rep, err := syncback.Run(ctx, tr, syncback.Options{Conflict: mode, OnReject: rej, JournalDir: journalDir(t)})
							accounted(t, cs, rep, tr)
							after := snapshot(t, s.D)
							c := causes(rep)
							want := map[string]string{}
							for k, v := range before {
								want[k] = v
							}
							set := func(p, v string) {
								if v == "" {
									delete(want, p)
								} else {
									want[p] = v
								}
							}
							switch conflict[h.name][sb.name] {
							case "":
								must(t, err)
								set(sb.path, sb.want)
								set("other", "f -rw-r--r-- o2")
							case "settled":
								must(t, err)
								if len(rep.Settled) != 1 || rep.Settled[0].Path != sb.path {
									t.Fatalf("settled %+v", rep)
								}
								set("other", "f -rw-r--r-- o2")
							default:
								if strings.Join(rep.Conflicts, ",") != sb.path {
									t.Fatalf("conflicts %v, want %s", rep.Conflicts, sb.path)
								}
								switch {
								case mode == syncback.ConflictKeepOurs:
									must(t, err)
									if _, ok := want["d"]; !ok && sb.want != "" {
										want["d"] = "d -rwxr-xr-x" // recreated
									}
									if sb.name == "chmod" && h.name == "edit" {
										// The sandbox changed the mode only: its mode, their contents.
										set(sb.path, "f -rw------- theirs")
									} else {
										set(sb.path, sb.want)
									}
									set("other", "f -rw-r--r-- o2")
								case mode == syncback.ConflictKeepTheirs:
									must(t, err)
									if c[sb.path] != syncback.CauseTheirs {
										t.Fatalf("causes %v", c)
									}
									set("other", "f -rw-r--r-- o2")
								case rej == syncback.RejectAbort:
									if vfs.CodeOf(err) != vfs.CodeConflict || c[sb.path] != syncback.CauseConflict || c["other"] != syncback.CauseAborted {
										t.Fatalf("abort: %v %v", err, c)
									}
								default:
									if vfs.CodeOf(err) != vfs.CodeConflict || c[sb.path] != syncback.CauseConflict {
										t.Fatalf("apply rest: %v %v", err, c)
									}
									set("other", "f -rw-r--r-- o2")
								}
							}
							sameMap(t, after, want)
						})
					})
				}
			}
		}
	}
}

// A refusal under RejectApplyRest applies the rest and keeps the checkout;
// once the refused change is undone in the checkout, the next sync applies
// nothing more and Close removes the checkout.
func TestSyncBackApplyRestKeepsCheckout(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		root := tr.Path()
		must(t, os.WriteFile(filepath.Join(root, "README"), []byte("edited"), 0o644))
		must(t, os.MkdirAll(filepath.Join(root, "gen"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "gen/out"), []byte("x"), 0o644))
		must(t, os.WriteFile(filepath.Join(root, "src/.bashrc"), []byte("evil"), 0o644))
		cs, err := tr.Diff(ctx)
		must(t, err)
		jd := journalDir(t)
		rep, err := syncback.Run(ctx, tr, syncback.Options{Policy: policy.Defaults(), OnReject: syncback.RejectApplyRest, JournalDir: jd})
		if vfs.CodeOf(err) != vfs.CodePermission || strings.Contains(err.Error(), root) {
			t.Fatalf("SyncBack: %v", err)
		}
		accounted(t, cs, rep, tr)
		if c := causes(rep); len(c) != 1 || c["src/.bashrc"] != syncback.CauseRefused || len(rep.Applied) != 3 {
			t.Fatalf("report %+v", rep)
		}
		if b, _ := s.D.ReadFile(ctx, "gen/out"); string(b) != "x" {
			t.Fatalf("gen/out %q", b)
		}
		if ok, _ := s.D.Exists(ctx, "src/.bashrc"); ok {
			t.Fatal("src/.bashrc written")
		}
		must(t, os.Remove(filepath.Join(root, "src/.bashrc")))
		rep, err = syncback.Run(ctx, tr, syncback.Options{Policy: policy.Defaults(), JournalDir: jd})
		must(t, err)
		if len(rep.Applied) != 0 || len(rep.NotApplied) != 0 || tr.Kept() || rep.Checkout != "" {
			t.Fatalf("second sync %+v kept %v", rep, tr.Kept())
		}
		must(t, tr.Close())
		if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("checkout not removed: %v", err)
		}
	})
}

// Keep keeps a checkout whose changes were all applied.
func TestKeepCheckout(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.WriteFile(filepath.Join(tr.Path(), "README"), []byte("edited"), 0o644))
		tr.Keep()
		rep, err := syncback.Run(ctx, tr, syncback.Options{JournalDir: journalDir(t)})
		must(t, err)
		if len(rep.Applied) != 1 || rep.Checkout != tr.Path() || !tr.Kept() {
			t.Fatalf("report %+v", rep)
		}
		must(t, tr.Close())
		if _, err := os.Stat(tr.Path()); err != nil {
			t.Fatalf("kept checkout removed: %v", err)
		}
	})
}

// Applied files keep the sandbox's modification times, and a file rewritten
// with the same bytes gets the sandbox's new time.
func TestSyncBackKeepsTimes(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		for _, p := range []string{"README", "src/main.go", "run.sh"} {
			must(t, s.D.Chtimes(ctx, p, old, old))
		}
		tr := checkout(t, s.D, materialize.Options{})
		root := tr.Path()
		t1 := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
		t2 := t1.Add(-time.Hour) // older than t1, and written after it
		t3 := t1.Add(time.Minute)
		must(t, os.WriteFile(filepath.Join(root, "src/main.go"), []byte("package main // edited\n"), 0o644))
		must(t, os.Chtimes(filepath.Join(root, "src/main.go"), t1, t1))
		must(t, os.WriteFile(filepath.Join(root, "a-new"), []byte("new"), 0o644))
		must(t, os.Chtimes(filepath.Join(root, "a-new"), t2, t2))
		// Same bytes, new time: a touched file.
		must(t, os.WriteFile(filepath.Join(root, "README"), []byte("hello\n"), 0o644))
		must(t, os.Chtimes(filepath.Join(root, "README"), t3, t3))
		// A mode change keeps its time too.
		must(t, os.Chmod(filepath.Join(root, "run.sh"), 0o700))
		must(t, os.Chtimes(filepath.Join(root, "run.sh"), t3, t3))
		cs, err := tr.Diff(ctx)
		must(t, err)
		if k := kinds(cs); k["README"] != materialize.Touched || k["run.sh"] != materialize.ModeChanged || len(k) != 4 {
			t.Fatalf("changes %v", k)
		}
		rep, err := syncback.Run(ctx, tr, syncback.Options{JournalDir: journalDir(t)})
		must(t, err)
		accounted(t, cs, rep, tr)
		for p, want := range map[string]time.Time{"src/main.go": t1, "a-new": t2, "README": t3, "run.sh": t3} {
			fi, err := s.D.Lstat(ctx, p)
			must(t, err)
			if !fi.ModTime().Equal(want) {
				t.Errorf("%s: mtime %v, want %v", p, fi.ModTime(), want)
			}
		}
		if b, _ := s.D.ReadFile(ctx, "README"); string(b) != "hello\n" {
			t.Fatalf("README %q", b)
		}
		// Nothing is left to sync.
		cs, err = tr.Diff(ctx)
		must(t, err)
		if len(cs) != 0 {
			t.Fatalf("still changed: %v", kinds(cs))
		}
	})
}

// The source changing between validation and the apply: the step whose base
// changed is not applied (a conflict) and the host's edit stays; under
// RejectApplyRest the others are applied, under RejectAbort the sync stops
// there and lists the rest.
func TestSyncBackSourceChangesDuringApply(t *testing.T) {
	for _, rej := range []syncback.RejectMode{syncback.RejectAbort, syncback.RejectApplyRest} {
		t.Run([]string{"abort", "apply-rest"}[rej], func(t *testing.T) {
			mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
				fill(t, s.D)
				tr := checkout(t, s.D, materialize.Options{})
				root := tr.Path()
				// Applied in path order: README, run.sh, src/main.go, then z-new.
				must(t, os.WriteFile(filepath.Join(root, "README"), []byte("ours"), 0o644))
				must(t, os.WriteFile(filepath.Join(root, "run.sh"), []byte("#!/bin/sh\necho ours\n"), 0o755))
				must(t, os.WriteFile(filepath.Join(root, "src/main.go"), []byte("package ours\n"), 0o644))
				must(t, os.WriteFile(filepath.Join(root, "z-new"), []byte("new"), 0o644))
				cs, err := tr.Diff(ctx)
				must(t, err)
				syncback.SetTestHook(func(point string) {
					if point == "committed" {
						// After validation, before the first change.
						must(t, s.D.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\necho the host's edit\n"), 0o755))
					}
				})
				defer syncback.SetTestHook(nil)
				rep, err := syncback.Run(ctx, tr, syncback.Options{OnReject: rej, JournalDir: journalDir(t)})
				accounted(t, cs, rep, tr)
				if vfs.CodeOf(err) != vfs.CodeConflict {
					t.Fatalf("SyncBack: %v", err)
				}
				if b, _ := s.D.ReadFile(ctx, "run.sh"); string(b) != "#!/bin/sh\necho the host's edit\n" {
					t.Fatalf("run.sh %q", b)
				}
				c := causes(rep)
				if c["run.sh"] != syncback.CauseConflict || strings.Join(rep.Conflicts, ",") != "run.sh" {
					t.Fatalf("report %+v", rep)
				}
				if b, _ := s.D.ReadFile(ctx, "README"); string(b) != "ours" {
					t.Fatalf("README %q", b)
				}
				b, _ := s.D.ReadFile(ctx, "src/main.go")
				if rej == syncback.RejectAbort {
					if c["src/main.go"] != syncback.CauseStopped || c["z-new"] != syncback.CauseStopped || string(b) != "package main\n" {
						t.Fatalf("abort: %v main.go %q", c, b)
					}
				} else if len(rep.Applied) != 3 || string(b) != "package ours\n" {
					t.Fatalf("apply rest: %+v", rep)
				}
			})
		})
	}
}

// A directory the host replaced by a symlink to a twin: a deletion beneath it
// would remove the twin's file. It is a conflict.
func TestSyncBackParentBecameSymlink(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		must(t, s.D.MkdirAll(ctx, "d"))
		must(t, s.D.MkdirAll(ctx, "twin"))
		must(t, s.D.WriteFile(ctx, "d/f", []byte("same"), 0o644))
		must(t, s.D.WriteFile(ctx, "twin/f", []byte("same"), 0o644))
		tr := checkout(t, s.D, materialize.Options{})
		must(t, os.Remove(filepath.Join(tr.Path(), "d/f")))
		must(t, s.D.RemoveAll(ctx, "d"))
		must(t, s.D.Symlink(ctx, "twin", "d"))
		cs, err := tr.Diff(ctx)
		must(t, err)
		rep, err := syncback.Run(ctx, tr, syncback.Options{OnReject: syncback.RejectApplyRest, JournalDir: journalDir(t)})
		accounted(t, cs, rep, tr)
		if vfs.CodeOf(err) != vfs.CodeConflict || causes(rep)["d/f"] != syncback.CauseConflict {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
		if b, err := s.D.ReadFile(ctx, "twin/f"); err != nil || string(b) != "same" {
			t.Fatalf("twin/f: %q %v", b, err)
		}
	})
}
