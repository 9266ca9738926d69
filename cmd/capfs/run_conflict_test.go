//go:build linux

package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/capfs/capfs/aferodir"
	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/run"
	"github.com/capfs/capfs/materialize/syncback"
)

// The conflict matrix (issue 27): what the sandbox does to a file (conf) ×
// when the host edits it × how the work tree reached the sandbox. Every
// cell has one expected result, the same in every mode: a sync-back applies
// the sandbox's change only when the sandbox saw the host's edit (the edit
// came before its first read), and otherwise reports a conflict on conf and
// keeps the host's edit. Nothing is ever lost.
//
// "Before the read" means before the work tree's view read the file from the
// source: for a lazy run, before the sandbox's first lookup; for a checkout,
// before the checkout (which reads every file when it is made; an edit after
// it is one the sandbox cannot have seen).

const (
	confBase = "base\n"
	confHost = "host edit, longer\n" // another size: caught without hashing too
)

// conflictOp is what the sandbox does: it always reads conf first (read),
// then changes it (change; nil for a sandbox that only reads).
type conflictOp struct {
	name   string
	change func(sb afero.Fs, seen string) error
	// applied is conf on the host once the change is synced back over the
	// host's edit the sandbox saw: its contents, "<absent>" or "<dir>".
	applied string
}

var conflictOps = []conflictOp{
	{name: "read", applied: confHost},
	{name: "write", applied: confHost + "sandbox\n", change: func(sb afero.Fs, _ string) error {
		return writeConf(sb, "conf", os.O_WRONLY|os.O_APPEND, "sandbox\n")
	}},
	{name: "truncate", applied: confHost + "sandbox\n", change: func(sb afero.Fs, seen string) error {
		return writeConf(sb, "conf", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, seen+"sandbox\n")
	}},
	{name: "rename-over", applied: confHost + "sandbox\n", change: func(sb afero.Fs, seen string) error {
		if err := writeConf(sb, "conf.tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, seen+"sandbox\n"); err != nil {
			return err
		}
		return sb.Rename("conf.tmp", "conf")
	}},
	{name: "delete", applied: "<absent>", change: func(sb afero.Fs, _ string) error {
		return sb.Remove("conf")
	}},
	{name: "mkdir", applied: "<dir>", change: func(sb afero.Fs, _ string) error {
		// A directory where the file was.
		if err := sb.Remove("conf"); err != nil {
			return err
		}
		return sb.Mkdir("conf", 0o755)
	}},
}

func writeConf(sb afero.Fs, name string, flag int, data string) error {
	f, err := sb.OpenFile(name, flag, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(data))
	return errors.Join(err, f.Close())
}

// The moments of the host's edit.
const (
	editBefore  = "before-read"
	editBetween = "between-read-and-write"
	editAfter   = "after-write"
)

// conflictWork is one way of handing the work tree to a sandbox: start
// makes the sandbox's view of src (host directory root), finish the Tree of
// what the sandbox changed.
type conflictWork struct {
	name  string
	need  func(t *testing.T)
	start func(t *testing.T, ctx context.Context, src *dir.Dir) (sb afero.Fs, finish func() (*materialize.Tree, error))
}

var conflictWorks = []conflictWork{
	{name: "checkout", start: func(t *testing.T, ctx context.Context, src *dir.Dir) (afero.Fs, func() (*materialize.Tree, error)) {
		tr, err := materialize.Checkout(ctx, src, materialize.Options{Base: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return afero.NewBasePathFs(afero.NewOsFs(), tr.Path()), func() (*materialize.Tree, error) { return tr, nil }
	}},
	// The lazy layer as the mount serves it (a Dir over the Overlay), without
	// the kernel in between.
	{name: "lazy", start: func(t *testing.T, ctx context.Context, src *dir.Dir) (afero.Fs, func() (*materialize.Tree, error)) {
		ov, err := overlay.NewOverlay(src.Backend(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		view, _ := dir.New(ov)
		return aferodir.New(view), func() (*materialize.Tree, error) {
			defer ov.Close()
			return run.UpperTree(ctx, ov, src)
		}
	}},
	// The lazy work tree of a run: the FUSE mount, with the kernel's caches.
	{name: "lazy-fuse", need: needFUSE, start: func(t *testing.T, ctx context.Context, src *dir.Dir) (afero.Fs, func() (*materialize.Tree, error)) {
		lw, err := run.StartLazy(ctx, src, run.LazyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lw.Close() })
		return afero.NewBasePathFs(afero.NewOsFs(), lw.Mountpoint), func() (*materialize.Tree, error) { return lw.Finish(ctx, src) }
	}},
}

func needFUSE(t *testing.T) {
	t.Helper()
	if err := lazyAvailable(); err != nil {
		t.Skipf("FUSE is not usable here (needs /dev/fuse and root or fusermount3; make sysdeps installs fuse3): %v", err)
	}
	t.Setenv("CAPFS_TMPDIR", t.TempDir())
	t.Setenv(syncback.EnvStateDir, t.TempDir())
}

// conflictCell is one cell's outcome: conf on the host after the sync-back,
// whether a conflict on conf was reported, and whether the sandbox's change
// failed because conf was gone.
type conflictCell struct {
	conf     string
	conflict bool
	gone     bool
}

// wantCell is the expected outcome of op with the host's edit at when, the
// same in every mode.
func wantCell(op conflictOp, when string) conflictCell {
	switch {
	case op.change == nil:
		return conflictCell{conf: confHost} // nothing to sync; the edit stays
	case when == editBefore:
		return conflictCell{conf: op.applied} // the sandbox saw the edit
	}
	return conflictCell{conf: confHost, conflict: true}
}

// TestConflictMatrix: for each sandbox operation × moment of the host's edit ×
// mode, the sync-back applies the sandbox's change only when the sandbox saw
// the host's edit, and otherwise reports a conflict and keeps the edit; the
// lazy modes agree with the checkout in every cell. (Before the lazy layer
// recorded a base at first sight, the lazy cells "between-read-and-write" of
// write, truncate, rename-over, delete and mkdir applied the sandbox's change
// over the host's edit.)
func TestConflictMatrix(t *testing.T) {
	for _, w := range conflictWorks {
		t.Run(w.name, func(t *testing.T) {
			if w.need != nil {
				w.need(t)
			}
			for _, op := range conflictOps {
				for _, when := range []string{editBefore, editBetween, editAfter} {
					t.Run(op.name+"/"+when, func(t *testing.T) {
						got := runConflictCell(t, w, op, when, hostRewrite)
						if want := wantCell(op, when); got != want {
							t.Errorf("host edit %s the sandbox's %s: conf %q, conflict %v; want conf %q, conflict %v",
								when, op.name, got.conf, got.conflict, want.conf, want.conflict)
						}
					})
				}
			}
		})
	}
}

// TestConflictHostRemoved: the host removes conf between the sandbox's read
// and its write; writing it again (a truncating open that creates, a rename
// over it) is a conflict in every mode, and conf stays removed. Through the
// mount, the kernel may still hold conf's entry and send the truncating open
// to it without O_CREAT: the sandbox then gets ENOENT, which is also no loss.
func TestConflictHostRemoved(t *testing.T) {
	for _, w := range conflictWorks {
		t.Run(w.name, func(t *testing.T) {
			if w.need != nil {
				w.need(t)
			}
			for _, op := range conflictOps {
				if op.name != "truncate" && op.name != "rename-over" {
					continue
				}
				t.Run(op.name, func(t *testing.T) {
					got := runConflictCell(t, w, op, editBetween, hostRemove)
					if w.name == "lazy-fuse" && got.gone {
						got = conflictCell{conf: got.conf, conflict: true} // saw the removal: as good
					}
					if want := (conflictCell{conf: "<absent>", conflict: true}); got != want {
						t.Errorf("host removed conf before the sandbox's %s: conf %q, conflict %v; want conf %q, conflict %v",
							op.name, got.conf, got.conflict, want.conf, want.conflict)
					}
				})
			}
		})
	}
}

func hostRewrite(t *testing.T, root string) {
	if err := os.WriteFile(filepath.Join(root, "conf"), []byte(confHost), 0o644); err != nil {
		t.Fatal(err)
	}
}

func hostRemove(t *testing.T, root string) {
	if err := os.Remove(filepath.Join(root, "conf")); err != nil {
		t.Fatal(err)
	}
}

// runConflictCell runs one cell: conf holds confBase, the sandbox reads it and
// does op, the host does edit at when, and the Tree is synced back (applying
// what is not in conflict).
func runConflictCell(t *testing.T, w conflictWork, op conflictOp, when string, edit func(*testing.T, string)) conflictCell {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "conf"), []byte(confBase), 0o644); err != nil {
		t.Fatal(err)
	}
	pb, err := physical.New(root)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := dir.New(pb)
	if when == editBefore {
		edit(t, root)
	}
	sb, finish := w.start(t, ctx, src)
	b, err := afero.ReadFile(sb, "conf")
	if err != nil {
		t.Fatalf("the sandbox's read: %v", err)
	}
	if when == editBetween {
		edit(t, root)
	}
	var gone bool
	if op.change != nil {
		err := op.change(sb, string(b))
		gone = errors.Is(err, fs.ErrNotExist)
		if err != nil && !gone {
			t.Fatalf("the sandbox's %s: %v", op.name, err)
		}
	}
	if when == editAfter {
		edit(t, root)
	}
	got := syncConflict(t, ctx, finish, root)
	got.gone = gone
	return got
}

// syncConflict syncs back the Tree finish returns (applying what is not in
// conflict) and returns the outcome for conf in root.
func syncConflict(t *testing.T, ctx context.Context, finish func() (*materialize.Tree, error), root string) conflictCell {
	t.Helper()
	tr, err := finish()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := syncback.Run(ctx, tr, syncback.Options{OnReject: syncback.RejectApplyRest, JournalDir: t.TempDir()})
	if err != nil && rep == nil {
		t.Fatalf("sync-back: %v", err)
	}
	var got conflictCell
	for _, p := range rep.Conflicts {
		got.conflict = got.conflict || p == "conf"
	}
	got.conf = hostConf(t, root)
	return got
}

// TestConflictHostCreated: the sandbox looks conf up and finds nothing, the
// host then makes conf, and the sandbox writes conf (a truncating open that
// creates): a conflict in every mode ("added in the source too"), and the
// host's file stays.
func TestConflictHostCreated(t *testing.T) {
	for _, w := range conflictWorks {
		t.Run(w.name, func(t *testing.T) {
			if w.need != nil {
				w.need(t)
			}
			ctx := context.Background()
			root := t.TempDir()
			pb, err := physical.New(root)
			if err != nil {
				t.Fatal(err)
			}
			src, _ := dir.New(pb)
			sb, finish := w.start(t, ctx, src)
			if _, err := sb.Stat("conf"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the sandbox's lookup: %v, want not exist", err)
			}
			hostRewrite(t, root)
			if err := writeConf(sb, "conf", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, "sandbox\n"); err != nil {
				t.Fatalf("the sandbox's write: %v", err)
			}
			got := syncConflict(t, ctx, finish, root)
			if want := (conflictCell{conf: confHost, conflict: true}); got != want {
				t.Errorf("conf %q, conflict %v; want conf %q, conflict %v", got.conf, got.conflict, want.conf, want.conflict)
			}
		})
	}
}

// hostConf is conf on the host: its contents, "<absent>" or "<dir>".
func hostConf(t *testing.T, root string) string {
	fi, err := os.Lstat(filepath.Join(root, "conf"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "<absent>"
	case err != nil:
		t.Fatal(err)
	case fi.IsDir():
		return "<dir>"
	}
	return readFile(t, filepath.Join(root, "conf"))
}

// TestRunConflictEndToEnd: the cells through capfs run, lazy and
// checked out: the sandbox reads conf.txt, the host rewrites it, then the
// sandbox writes it (truncating, or to a temporary file renamed over it).
// Both modes report the conflict and keep the host's edit.
func TestRunConflictEndToEnd(t *testing.T) {
	needLazy(t)
	for _, mode := range []string{"--lazy", "--no-lazy"} {
		for _, write := range []string{`echo "$c+sandbox" > conf.txt`, `echo "$c+sandbox" > conf.tmp && mv conf.tmp conf.txt`} {
			t.Run(mode+"/"+strings.Fields(write)[3], func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, map[string]string{"conf.txt": "base\n"})
				env, base := stateEnv(t)
				script := `c=$(cat conf.txt); echo > ready; read line; rm ready; ` + write
				stderr, code := runWithHostEdit(t, root, env, base, []string{"run", mode, "--", "sh", "-c", script}, func() {
					if err := os.WriteFile(filepath.Join(root, "conf.txt"), []byte("host-edit\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				})
				if code != exitSyncBack {
					t.Errorf("exit %d, want %d\n%s", code, exitSyncBack, stderr)
				}
				if got := readFile(t, filepath.Join(root, "conf.txt")); got != "host-edit\n" {
					t.Errorf("the host's edit was overwritten: %q\n%s", got, stderr)
				}
				if !strings.Contains(stderr, "conf.txt") || !strings.Contains(stderr, "changed in the source") {
					t.Errorf("the conflict is not reported:\n%s", stderr)
				}
			})
		}
	}
}

// runWithHostEdit runs capfs with args in root, calls edit once the sandbox
// made the file "ready" in its work tree (under base), then lets it go on
// (a line on its stdin); it returns capfs's stderr and exit code.
func runWithHostEdit(t *testing.T, root string, env []string, base string, args []string, edit func()) (string, int) {
	t.Helper()
	cmd := exec.Command(capfsBinary(t), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(base, "capfs-checkout-*", "ready")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the sandbox never got ready:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	edit()
	in.Write([]byte("go\n"))
	in.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return stderr.String(), 0
}
