//go:build linux

package materialize_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/mattest"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

var ctx = context.Background()

// The shared fixtures (package mattest).
var (
	fill     = mattest.Fill
	must     = mattest.Must
	checkout = mattest.Checkout
	snapshot = mattest.Snapshot
	sameMap  = mattest.SameMap
	kinds    = mattest.Kinds
)

func TestCheckoutContents(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		old := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC)
		must(t, s.D.Chtimes(ctx, "README", old, old))
		tr := checkout(t, s.D, materialize.Options{})
		if tr.Strategy() != materialize.StrategyCopy || tr.Bound() || tr.BindFile() != nil {
			t.Fatalf("strategy %s, bound %v", tr.Strategy(), tr.Bound())
		}
		root := tr.Path()
		fi, err := os.Lstat(root)
		must(t, err)
		if fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Fatalf("checkout root mode %v", fi.Mode())
		}
		b, err := os.ReadFile(filepath.Join(root, "src/sub/util.go"))
		must(t, err)
		if string(b) != "package sub\n" {
			t.Fatalf("contents %q", b)
		}
		fi, err = os.Lstat(filepath.Join(root, "run.sh"))
		must(t, err)
		if fi.Mode().Perm() != 0o755 {
			t.Fatalf("run.sh mode %v", fi.Mode())
		}
		fi, err = os.Lstat(filepath.Join(root, "README"))
		must(t, err)
		if !fi.ModTime().Equal(old) {
			t.Fatalf("README mtime %v, want %v", fi.ModTime(), old)
		}
		tg, err := os.Readlink(filepath.Join(root, "src/sub/up"))
		must(t, err)
		if tg != "../main.go" {
			t.Fatalf("link target %q", tg)
		}
		m := tr.Manifest()
		e := m.Entries["README"]
		// sha256("hello\n")
		if e.Digest != "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" || e.Size != 6 || !e.ModTime.Equal(old) {
			t.Fatalf("README entry %+v", e)
		}
		if m.Entries["main-link"].Target != "src/main.go" || !m.Entries["src"].IsDir() {
			t.Fatalf("manifest %+v", m.Entries)
		}
		if len(m.Entries) != 8 {
			t.Fatalf("manifest has %d entries: %v", len(m.Entries), m.Paths())
		}
		if n, _ := m.Files(); n != 4 {
			t.Fatalf("Files() = %d", n)
		}
		cs, err := tr.Diff(ctx)
		must(t, err)
		if len(cs) != 0 {
			t.Fatalf("fresh checkout has changes: %+v", cs)
		}
	})
}

func TestRoundTrip(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		root := tr.Path()
		w := func(p, data string, perm os.FileMode) {
			must(t, os.WriteFile(filepath.Join(root, p), []byte(data), perm))
		}
		w("README", "changed\n", 0)
		w("new.txt", "new\n", 0o640)
		must(t, os.MkdirAll(filepath.Join(root, "out/bin"), 0o755))
		w("out/bin/tool", "binary", 0o755)
		must(t, os.Remove(filepath.Join(root, "src/sub/util.go")))
		must(t, os.Chmod(filepath.Join(root, "run.sh"), 0o700))
		must(t, os.Remove(filepath.Join(root, "main-link")))
		must(t, os.Symlink("README", filepath.Join(root, "main-link")))
		// a file becomes a directory and a directory a file
		must(t, os.Remove(filepath.Join(root, "src/main.go")))
		must(t, os.Mkdir(filepath.Join(root, "src/main.go"), 0o755))
		w("src/main.go/inner", "x", 0o644)
		must(t, os.RemoveAll(filepath.Join(root, "src/sub")))
		w("src/sub", "now a file", 0o644)

		cs, err := tr.Diff(ctx)
		must(t, err)
		want := map[string]materialize.ChangeKind{
			"README": materialize.Modified, "new.txt": materialize.Added, "out": materialize.Added,
			"out/bin": materialize.Added, "out/bin/tool": materialize.Added,
			"src/sub/util.go": materialize.Deleted, "src/sub/up": materialize.Deleted,
			"run.sh": materialize.ModeChanged, "main-link": materialize.Modified,
			"src/main.go": materialize.TypeChanged, "src/main.go/inner": materialize.Added,
			"src/sub": materialize.TypeChanged,
		}
		got := kinds(cs)
		if len(got) != len(want) {
			t.Fatalf("changes %v, want %v", got, want)
		}
		for p, k := range want {
			if got[p] != k {
				t.Fatalf("%s: %q, want %q (all: %v)", p, got[p], k, got)
			}
		}
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		must(t, err)
		if len(rep.Applied) != len(want) {
			t.Fatalf("applied %d changes: %+v", len(rep.Applied), rep)
		}
		sameMap(t, snapshot(t, s.D), map[string]string{
			"README":            "f -rw-r--r-- changed\n",
			"new.txt":           "f -rw-r----- new\n",
			"out":               "d -rwxr-xr-x",
			"out/bin":           "d -rwxr-xr-x",
			"out/bin/tool":      "f -rwxr-xr-x binary",
			"run.sh":            "f -rwx------ #!/bin/sh\n",
			"main-link":         "l README",
			"src":               "d -rwxr-xr-x",
			"src/main.go":       "d -rwxr-xr-x",
			"src/main.go/inner": "f -rw-r--r-- x",
			"src/sub":           "f -rw-r--r-- now a file",
		})
		// The manifest now records the applied state: nothing more to sync.
		cs, err = tr.Diff(ctx)
		must(t, err)
		if len(cs) != 0 {
			t.Fatalf("changes after SyncBack: %+v", cs)
		}
		// A later edit is synced on its own, without a conflict.
		must(t, os.WriteFile(filepath.Join(root, "new.txt"), []byte("again\n"), 0o640))
		rep, err = syncback.Run(ctx, tr, syncback.Options{})
		must(t, err)
		if len(rep.Applied) != 1 || rep.Applied[0].Path != "new.txt" {
			t.Fatalf("second sync %+v", rep)
		}
		if b, _ := s.D.ReadFile(ctx, "new.txt"); string(b) != "again\n" {
			t.Fatalf("new.txt = %q", b)
		}
	})
}

func TestDiffStatCache(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		old := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
		must(t, s.D.Chtimes(ctx, "src/main.go", old, old))
		tr := checkout(t, s.D, materialize.Options{})
		p := filepath.Join(tr.Path(), "src/main.go")
		// Same size, modification time put back: only the change time tells.
		must(t, os.WriteFile(p, []byte("package xxxx\n"), 0))
		must(t, os.Chtimes(p, old, old))
		cs, err := tr.Diff(ctx)
		must(t, err)
		if len(cs) != 1 || cs[0].Kind != materialize.Modified || cs[0].Path != "src/main.go" ||
			cs[0].New.Digest == cs[0].Old.Digest || cs[0].New.Size != 13 {
			t.Fatalf("changes %+v", cs)
		}
		// Touching a file without changing its contents is a time change only.
		must(t, os.Chtimes(filepath.Join(tr.Path(), "README"), time.Now(), time.Now()))
		cs, err = tr.Diff(ctx)
		must(t, err)
		if len(cs) != 2 || cs[0].Kind != materialize.Touched || cs[0].Path != "README" || cs[0].New.Digest != cs[0].Old.Digest {
			t.Fatalf("changes %+v", cs)
		}
	})
}

func TestCheckoutSkipsDenied(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		must(t, s.D.MkdirAll(ctx, "home/.ssh"))
		must(t, s.D.WriteFile(ctx, "home/.ssh/id_rsa", []byte("secret"), 0o600))
		must(t, s.D.MkdirAll(ctx, "app"))
		must(t, s.D.WriteFile(ctx, "app/.env", []byte("TOKEN=1"), 0o600))
		// The checkout reads through a Dir with the default policy.
		guarded, _ := dir.New(s.B, dir.WithPolicy(policy.Defaults()))
		tr := checkout(t, guarded, materialize.Options{})
		var got []string
		for _, sk := range tr.Skipped() {
			if sk.Code != vfs.CodePermission {
				t.Fatalf("skip %+v", sk)
			}
			got = append(got, sk.Path)
		}
		if strings.Join(got, ",") != "app/.env,home/.ssh" {
			t.Fatalf("skipped %v", got)
		}
		for _, p := range []string{"home/.ssh", "app/.env"} {
			if _, err := os.Lstat(filepath.Join(tr.Path(), p)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s checked out: %v", p, err)
			}
			if _, ok := tr.Manifest().Entries[p]; ok {
				t.Fatalf("%s in manifest", p)
			}
		}
		if _, err := os.Lstat(filepath.Join(tr.Path(), "src/main.go")); err != nil {
			t.Fatal(err)
		}
		// Skipped paths are not "deleted" by a sync.
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		must(t, err)
		if len(rep.Applied) != 0 {
			t.Fatalf("report %+v", rep)
		}
	})
}

func TestCheckoutSkipsHostSpecials(t *testing.T) {
	host := t.TempDir()
	must(t, os.WriteFile(filepath.Join(host, "ok"), []byte("ok"), 0o644))
	must(t, unix.Mkfifo(filepath.Join(host, "fifo"), 0o644))
	must(t, os.Symlink("/etc/passwd", filepath.Join(host, "abs")))
	must(t, os.Symlink("../outside", filepath.Join(host, "esc")))
	must(t, os.WriteFile(filepath.Join(host, "suid"), []byte("s"), 0o755))
	must(t, os.Chmod(filepath.Join(host, "suid"), 0o755|os.ModeSetuid))
	pb, err := physical.New(host)
	must(t, err)
	defer pb.Close()
	d, _ := dir.New(pb)
	tr := checkout(t, d, materialize.Options{})
	got := map[string]vfs.Code{}
	for _, sk := range tr.Skipped() {
		got[sk.Path] = sk.Code
	}
	// abs: the physical backend does not show an absolute target (a host
	// path); esc is checked out as it is (TestCheckoutPhysicalLeavingLinks).
	if len(got) != 2 || got["fifo"] != vfs.CodeNotRegular || got["abs"] != vfs.CodeOutside {
		t.Fatalf("skipped %v", got)
	}
	fi, err := os.Lstat(filepath.Join(tr.Path(), "suid"))
	must(t, err)
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("suid checked out as %v", fi.Mode())
	}
}

func TestClose(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		base := t.TempDir()
		tr, err := materialize.Checkout(ctx, s.D, materialize.Options{Base: base})
		must(t, err)
		root := tr.Path()
		if filepath.Dir(root) != base {
			t.Fatalf("checkout %s not under %s", root, base)
		}
		// What a sandbox might leave: an unreadable directory, a link out.
		must(t, os.MkdirAll(filepath.Join(root, "locked/inner"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "locked/inner/f"), []byte("x"), 0o644))
		must(t, os.Chmod(filepath.Join(root, "locked/inner"), 0))
		must(t, os.Chmod(filepath.Join(root, "locked"), 0))
		keep := t.TempDir()
		must(t, os.WriteFile(filepath.Join(keep, "precious"), []byte("p"), 0o644))
		must(t, os.Symlink(keep, filepath.Join(root, "out")))
		must(t, tr.Close())
		if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("checkout still there: %v", err)
		}
		if _, err := os.Stat(filepath.Join(keep, "precious")); err != nil {
			t.Fatalf("Close followed a link: %v", err)
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 0 {
			t.Fatalf("base not empty: %v", ents)
		}
		must(t, tr.Close())
		if _, err := tr.Diff(ctx); vfs.CodeOf(err) != vfs.CodeClosed {
			t.Fatalf("Diff after Close: %v", err)
		}
	})
}

func TestBind(t *testing.T) {
	host := t.TempDir()
	pb, err := physical.New(host)
	must(t, err)
	defer pb.Close()
	d, _ := dir.New(pb)
	fill(t, d)
	sub, err := pb.Sub(ctx, vfs.MustParse("src"))
	must(t, err)
	subDir, err := d.Sub(ctx, "src")
	must(t, err)
	for _, c := range []struct {
		name string
		d    *dir.Dir
		b    vfs.Backend
		path string
	}{{"root", d.ReadOnly(), vfs.ReadOnly(pb), host}, {"sub", subDir, sub, filepath.Join(host, "src")}} {
		t.Run(c.name, func(t *testing.T) {
			var last materialize.Progress
			calls := 0
			tr := checkout(t, c.d, materialize.Options{ReadOnly: true, Host: c.b, Progress: func(p materialize.Progress) {
				calls++
				last = p
			}})
			if !tr.Bound() || tr.Strategy() != materialize.StrategyBind || tr.Path() != c.path {
				t.Fatalf("bound %v strategy %s path %s", tr.Bound(), tr.Strategy(), tr.Path())
			}
			f := tr.BindFile()
			if f == nil {
				t.Fatal("no BindFile")
			}
			var a, b unix.Stat_t
			must(t, unix.Fstat(int(f.Fd()), &a))
			must(t, unix.Stat(c.path, &b))
			if a.Ino != b.Ino || a.Dev != b.Dev {
				t.Fatal("BindFile is not the directory")
			}
			if tr.Manifest().Entries["main.go"].Digest == "" && tr.Manifest().Entries["src/main.go"].Digest == "" {
				t.Fatalf("manifest %+v", tr.Manifest().Entries)
			}
			if !last.Done || last.Files != last.TotalFiles || calls == 0 {
				t.Fatalf("progress %+v after %d calls", last, calls)
			}
			cs, err := tr.Diff(ctx)
			must(t, err)
			if len(cs) != 0 {
				t.Fatalf("changes %+v", cs)
			}
			rep, err := syncback.Run(ctx, tr, syncback.Options{})
			if err != nil || len(rep.Applied) != 0 {
				t.Fatalf("SyncBack %+v %v", rep, err)
			}
			must(t, tr.Close())
			if _, err := os.Stat(filepath.Join(c.path, "main.go")); err != nil && c.name == "sub" {
				t.Fatalf("Close touched the bound directory: %v", err)
			}
			if _, err := os.Stat(filepath.Join(host, "README")); err != nil {
				t.Fatalf("Close touched the bound directory: %v", err)
			}
		})
	}
}

func TestHostEditsShowInBoundDiff(t *testing.T) {
	host := t.TempDir()
	pb, err := physical.New(host)
	must(t, err)
	defer pb.Close()
	d, _ := dir.New(pb)
	fill(t, d)
	tr := checkout(t, d, materialize.Options{ReadOnly: true, Host: pb})
	if !tr.Bound() {
		t.Fatal("not bound")
	}
	must(t, os.WriteFile(filepath.Join(host, "README"), []byte("host edit"), 0o644))
	cs, err := tr.Diff(ctx)
	must(t, err)
	if len(cs) != 1 || cs[0].Path != "README" || cs[0].Kind != materialize.Modified {
		t.Fatalf("changes %+v", cs)
	}
	if _, err := syncback.Run(ctx, tr, syncback.Options{}); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Fatalf("SyncBack of a read-only checkout with changes: %v", err)
	}
}

func TestHardLinks(t *testing.T) {
	host := t.TempDir()
	pb, err := physical.New(host)
	must(t, err)
	defer pb.Close()
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	fill(t, d)
	must(t, os.WriteFile(filepath.Join(host, ".env"), []byte("SECRET=1"), 0o600))
	must(t, os.WriteFile(filepath.Join(host, "suid"), []byte("s"), 0o755))
	must(t, os.Chmod(filepath.Join(host, "suid"), 0o755|os.ModeSetuid))
	// The denied .env rules out a bind; the base is on the host's filesystem.
	tr := checkout(t, d.ReadOnly(), materialize.Options{ReadOnly: true, Host: pb, Base: t.TempDir()})
	if !sameFS(t, host, tr.Path()) {
		t.Skip("temporary directories on different filesystems")
	}
	if tr.Strategy() != materialize.StrategyHardLink || tr.Bound() {
		t.Fatalf("strategy %s", tr.Strategy())
	}
	var a, b unix.Stat_t
	must(t, unix.Stat(filepath.Join(host, "src/main.go"), &a))
	must(t, unix.Stat(filepath.Join(tr.Path(), "src/main.go"), &b))
	if a.Ino != b.Ino {
		t.Fatal("src/main.go was copied, not linked")
	}
	must(t, unix.Stat(filepath.Join(host, "suid"), &a))
	must(t, unix.Stat(filepath.Join(tr.Path(), "suid"), &b))
	if a.Ino == b.Ino || b.Mode&unix.S_ISUID != 0 {
		t.Fatal("a setuid file was linked")
	}
	if _, err := os.Lstat(filepath.Join(tr.Path(), ".env")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(".env checked out")
	}
	if tr.Manifest().Entries["src/main.go"].Digest == "" {
		t.Fatal("no digest for a linked file")
	}
	cs, err := tr.Diff(ctx)
	must(t, err)
	if len(cs) != 0 {
		t.Fatalf("changes %+v", cs)
	}
	must(t, tr.Close())
	if b, err := os.ReadFile(filepath.Join(host, "src/main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("source after Close: %q %v", b, err)
	}
}

func sameFS(t *testing.T, a, b string) bool {
	var sa, sb unix.Stat_t
	must(t, unix.Stat(a, &sa))
	must(t, unix.Stat(b, &sb))
	return sa.Dev == sb.Dev
}

func TestProgress(t *testing.T) {
	m := memory.New()
	d, _ := dir.New(m)
	for i := range 50 {
		must(t, d.WriteFile(ctx, "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), bytes.Repeat([]byte("y"), i), 0o644))
	}
	var calls []materialize.Progress
	tr := checkout(t, d, materialize.Options{Workers: 3, Progress: func(p materialize.Progress) { calls = append(calls, p) }})
	if len(calls) == 0 {
		t.Fatal("no progress call")
	}
	last := calls[len(calls)-1]
	n, size := tr.Manifest().Files()
	if !last.Done || last.Files != 50 || last.TotalFiles != 50 || last.Bytes != size || last.TotalBytes != size || n != 50 {
		t.Fatalf("last progress %+v (manifest %d files, %d bytes)", last, n, size)
	}
	for _, p := range calls[:len(calls)-1] {
		if p.Done {
			t.Fatal("Done before the end")
		}
	}
}

func TestCheckoutCanceled(t *testing.T) {
	m := memory.New()
	d, _ := dir.New(m)
	fill(t, d)
	base := t.TempDir()
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := materialize.Checkout(c, d, materialize.Options{Base: base}); err == nil {
		t.Fatal("canceled checkout succeeded")
	}
	ents, _ := os.ReadDir(base)
	if len(ents) != 0 {
		t.Fatalf("canceled checkout left %v", ents)
	}
}

func TestBaseFromEnvironment(t *testing.T) {
	base := t.TempDir()
	t.Setenv(materialize.EnvTmpDir, base)
	d, _ := dir.New(memory.New())
	fill(t, d)
	tr, err := materialize.Checkout(ctx, d, materialize.Options{})
	must(t, err)
	defer tr.Close()
	if filepath.Dir(tr.Path()) != base {
		t.Fatalf("checkout at %s, not under %s", tr.Path(), base)
	}
}

func TestDiffNeverFollowsOrBlocks(t *testing.T) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) {
		fill(t, s.D)
		tr := checkout(t, s.D, materialize.Options{})
		root := tr.Path()
		outside := t.TempDir()
		must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host file"), 0o600))
		// a directory swapped for a link out; a file swapped for a FIFO
		must(t, os.RemoveAll(filepath.Join(root, "src")))
		must(t, os.Symlink(outside, filepath.Join(root, "src")))
		must(t, os.Remove(filepath.Join(root, "README")))
		must(t, unix.Mkfifo(filepath.Join(root, "README"), 0o644))
		cs, err := tr.Diff(ctx)
		must(t, err)
		got := kinds(cs)
		if got["src"] != materialize.TypeChanged || got["README"] != materialize.TypeChanged ||
			got["src/main.go"] != materialize.Deleted || got["src/secret"] != "" {
			t.Fatalf("changes %v", got)
		}
		for _, c := range cs {
			if c.Path == "README" && c.New.Type != fs.ModeNamedPipe {
				t.Fatalf("README new type %v", c.New.Type)
			}
		}
		before := snapshot(t, s.D)
		rep, err := syncback.Run(ctx, tr, syncback.Options{})
		if err == nil || len(rep.Refused) != 2 {
			t.Fatalf("SyncBack: %v %+v", err, rep)
		}
		sameMap(t, snapshot(t, s.D), before)
	})
}

func TestCheckoutIsAudited(t *testing.T) {
	var mu sync.Mutex
	var events []audit.Event
	sink := audit.Func(func(_ context.Context, e audit.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	b := memory.New()
	host, _ := dir.New(b)
	fill(t, host)
	must(t, host.WriteFile(ctx, "id.pem", []byte("key"), 0o600))
	d, _ := dir.New(b, dir.WithAudit(sink), dir.WithPolicy(policy.Defaults()), dir.WithSubject("builder"))
	mu.Lock()
	events = nil
	mu.Unlock()
	tr := checkout(t, d, materialize.Options{})
	must(t, os.WriteFile(filepath.Join(tr.Path(), "out.txt"), []byte("built"), 0o644))
	_, err := syncback.Run(ctx, tr, syncback.Options{})
	must(t, err)
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]audit.Outcome{}
	for _, e := range events {
		if e.Subject != "builder" {
			t.Fatalf("event without the subject: %+v", e)
		}
		seen[e.Op+" "+e.Path] = e.Outcome
	}
	// The secret is never read (the policy refuses even its listing entry's
	// metadata); the sync's write is checked, then made.
	if seen["read src/main.go"] != audit.OK || seen["read id.pem"] == audit.OK ||
		seen["check.write out.txt"] != audit.OK || seen["write out.txt"] != audit.OK {
		t.Fatalf("audit trail %v", seen)
	}
	var skipped bool
	for _, sk := range tr.Skipped() {
		skipped = skipped || (sk.Path == "id.pem" && sk.Code == vfs.CodePermission)
	}
	if !skipped {
		t.Fatalf("id.pem not skipped: %+v", tr.Skipped())
	}
}
