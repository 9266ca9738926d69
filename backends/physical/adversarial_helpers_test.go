//go:build linux

package physical_test

// Helpers of the adversarial suite (adversarial_*_test.go, race_*_test.go,
// basepath_escape_test.go): a host temporary directory holding the capability's
// root and, beside it, an "outside" tree the guest must never reach; every test
// runs once per resolver.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

const (
	insideData  = "INSIDE"
	outsideData = "OUTSIDE-SECRET"
)

// advResolvers are the resolvers every adversarial test runs with.
var advResolvers = []struct {
	name string
	mode physical.ResolverMode
}{
	{"openat2", physical.ResolverOpenat2},
	{"portable", physical.ResolverPortable},
}

// eachResolver runs fn as one subtest per resolver. The openat2 subtest is skipped,
// with a message, where the kernel (or a seccomp filter) lacks openat2. In a
// child of TestAdvSeccompOpenat2, whose seccomp filter refuses openat2, it runs
// one subtest with the default resolver (ResolverAuto), after checking that
// ResolverOpenat2 is refused.
func eachResolver(t *testing.T, fn func(t *testing.T, mode physical.ResolverMode)) {
	t.Helper()
	if errno := seccompChild(); errno != "" {
		t.Run("auto-seccomp-"+errno, func(t *testing.T) {
			if f, err := physical.New(t.TempDir(), physical.WithResolver(physical.ResolverOpenat2)); err == nil {
				f.Close()
				t.Fatal("New(ResolverOpenat2) succeeded under a filter refusing openat2")
			} else if vfs.CodeOf(err) != vfs.CodeNotSupported {
				t.Fatalf("New(ResolverOpenat2) under a filter refusing openat2: %v; want not_supported", err)
			}
			fn(t, physical.ResolverAuto)
		})
		return
	}
	for _, r := range advResolvers {
		t.Run(r.name, func(t *testing.T) { fn(t, r.mode) })
		// The same attack through a Dir over a Namespace that mounts the backend.
		t.Run(r.name+"-namespace", func(t *testing.T) {
			advViaNamespace = true
			defer func() { advViaNamespace = false }()
			fn(t, r.mode)
		})
	}
}

// advViaNamespace makes newWorld build the world's Dir over a vfs.Namespace with
// the physical backend mounted at its root, so the Namespace layer sits between
// the guest and the backend. The adversarial tests do not run in parallel.
var advViaNamespace bool

// world is one adversarial setup on the host:
//
//	tmp/root/              the capability's root (fs, dir)
//	tmp/outside/secret     outsideData
//	tmp/outside/dir/f      outsideData
//
// Tests plant more on the host with file, mkdir and link (directly, with package
// os, as an attacker sharing the host would).
type world struct {
	t       testing.TB
	ctx     context.Context
	tmp     string // host directory holding root and outside
	root    string // host path of the root
	outside string // host path of the outside tree
	mode    physical.ResolverMode
	fs      *physical.FS
	dir     *dir.Dir
}

// newWorld builds a world and opens the root with the given resolver and options.
func newWorld(t testing.TB, mode physical.ResolverMode, opts ...physical.Option) *world {
	t.Helper()
	tmp := t.TempDir()
	// Resolve the temp dir itself, so absolute link targets planted below name the
	// real place (TMPDIR may be a symlink).
	if r, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = r
	}
	w := &world{
		t:       t,
		ctx:     context.Background(),
		tmp:     tmp,
		root:    filepath.Join(tmp, "root"),
		outside: filepath.Join(tmp, "outside"),
		mode:    mode,
	}
	must(t, os.Mkdir(w.root, 0o755))
	must(t, os.MkdirAll(filepath.Join(w.outside, "dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(w.outside, "secret"), []byte(outsideData), 0o644))
	must(t, os.WriteFile(filepath.Join(w.outside, "dir", "f"), []byte(outsideData), 0o644))
	w.fs = openFS(t, w.root, mode, opts...)
	if advViaNamespace {
		ns := vfs.NewNamespace()
		must(t, ns.Mount(vfs.Root, w.fs, vfs.MountOptions{}))
		w.dir, _ = dir.New(ns)
	} else {
		w.dir, _ = dir.New(w.fs)
	}
	return w
}

// openFS opens root with the resolver forced to mode, skipping t where openat2 is
// missing, and closes it at the end of t.
func openFS(t testing.TB, root string, mode physical.ResolverMode, opts ...physical.Option) *physical.FS {
	t.Helper()
	f, err := physical.New(root, append([]physical.Option{physical.WithResolver(mode)}, opts...)...)
	if err != nil {
		if mode == physical.ResolverOpenat2 && vfs.CodeOf(err) == vfs.CodeNotSupported {
			t.Skipf("openat2 is not available on this kernel (or is refused by seccomp); the portable subtest covers this: %v", err)
		}
		t.Fatalf("physical.New(%s): %v", root, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// host returns the host path of rel beneath the root.
func (w *world) host(rel string) string { return filepath.Join(w.root, filepath.FromSlash(rel)) }

// out returns the host path of rel beneath the outside tree.
func (w *world) out(rel string) string { return filepath.Join(w.outside, filepath.FromSlash(rel)) }

// file writes a regular file beneath the root, creating parents.
func (w *world) file(rel, data string) {
	w.t.Helper()
	must(w.t, os.MkdirAll(filepath.Dir(w.host(rel)), 0o755))
	must(w.t, os.WriteFile(w.host(rel), []byte(data), 0o644))
}

// mkdir creates a directory (and parents) beneath the root.
func (w *world) mkdir(rel string) {
	w.t.Helper()
	must(w.t, os.MkdirAll(w.host(rel), 0o755))
}

// link plants symlink rel -> target beneath the root, creating parents.
func (w *world) link(target, rel string) {
	w.t.Helper()
	must(w.t, os.MkdirAll(filepath.Dir(w.host(rel)), 0o755))
	must(w.t, os.Symlink(target, w.host(rel)))
}

// p parses a guest path known to be valid.
func p(s string) vfs.Path { return vfs.MustParse(s) }

// noHostPath fails t if err's text or any path field names a host path.
func (w *world) noHostPath(what string, err error) {
	w.t.Helper()
	if err == nil {
		return
	}
	if strings.Contains(err.Error(), w.tmp) {
		w.t.Errorf("%s: error names a host path: %v", what, err)
	}
	var e *vfs.Error
	if errors.As(err, &e) && (strings.Contains(e.Path, w.tmp) || strings.Contains(e.Dest, w.tmp)) {
		w.t.Errorf("%s: error fields name a host path: %#v", what, e)
	}
}

// wantCode fails t unless err is a *vfs.Error with one of codes and no host path.
func (w *world) wantCode(what string, err error, codes ...vfs.Code) {
	w.t.Helper()
	if err == nil {
		w.t.Errorf("%s: succeeded; want %v", what, codes)
		return
	}
	w.noHostPath(what, err)
	c := vfs.CodeOf(err)
	if c == "" {
		w.t.Errorf("%s: %v is not a *vfs.Error; want %v", what, err, codes)
		return
	}
	if !slices.Contains(codes, c) {
		w.t.Errorf("%s: %v (code %s); want %v", what, err, c, codes)
	}
}

// wantOK fails t if err is not nil.
func (w *world) wantOK(what string, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Errorf("%s: %v", what, err)
		w.noHostPath(what, err)
	}
}

// readBackend reads p through the backend.
func (w *world) readBackend(s string) (string, error) {
	f, err := w.fs.OpenFile(w.ctx, p(s), os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

// snapshot describes a host tree (without following links) so that any change to
// it shows: every entry's type, permission bits, size, link count, modification
// time and, for files, content hash and, for links, target.
type snapshot map[string]string

func snap(t testing.TB, root string) snapshot {
	t.Helper()
	s := snapshot{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		desc := fi.Mode().String() + " " + fi.ModTime().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			desc += " " + sum(b) + " nlink=" + nlink(fi)
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, err := os.Readlink(path)
			if err != nil {
				return err
			}
			desc += " -> " + tgt
		}
		s[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return s
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

func nlink(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return strconv.FormatUint(uint64(st.Nlink), 10)
	}
	return "?"
}

// diff lists what changed from s to now.
func (s snapshot) diff(now snapshot) []string {
	var out []string
	for k, v := range s {
		if nv, ok := now[k]; !ok {
			out = append(out, "removed "+k)
		} else if nv != v {
			out = append(out, "changed "+k)
		}
	}
	for k := range now {
		if _, ok := s[k]; !ok {
			out = append(out, "created "+k)
		}
	}
	slices.Sort(out)
	return out
}

// outsideSnap snapshots the outside tree.
func (w *world) outsideSnap() snapshot { return snap(w.t, w.outside) }

// intact fails t if the outside tree changed since before.
func (w *world) intact(what string, before snapshot) {
	w.t.Helper()
	if d := before.diff(w.outsideSnap()); len(d) > 0 {
		w.t.Errorf("%s: the tree outside the root changed: %v", what, d)
	}
}

// guestCall is one Dir method, with the path under attack in one of its path
// arguments. The other argument, where there is one, names a harmless entry.
type guestCall struct {
	name string
	run  func(ctx context.Context, d *dir.Dir, path string) error
}

// guestCalls are every Dir method that takes a path, each with the attacked path in
// each of its path positions. "victim" is a regular file the caller has planted in
// the root.
func guestCalls() []guestCall {
	when := time.Unix(1e9, 0)
	return []guestCall{
		{"List", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.List(ctx, s); return err }},
		{"ReadDir", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.ReadDir(ctx, s); return err }},
		{"Stat", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.Stat(ctx, s); return err }},
		{"Lstat", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.Lstat(ctx, s); return err }},
		{"Exists", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.Exists(ctx, s); return err }},
		{"ReadFile", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.ReadFile(ctx, s); return err }},
		{"WriteFile", func(ctx context.Context, d *dir.Dir, s string) error {
			return d.WriteFile(ctx, s, []byte("GUEST"), 0o644)
		}},
		{"Append", func(ctx context.Context, d *dir.Dir, s string) error { return d.Append(ctx, s, []byte("GUEST")) }},
		{"Open(O_RDONLY)", func(ctx context.Context, d *dir.Dir, s string) error {
			return readHandle(d.Open(ctx, s, os.O_RDONLY, 0))
		}},
		{"Open(O_RDWR|O_CREATE)", func(ctx context.Context, d *dir.Dir, s string) error {
			return closeHandle(d.Open(ctx, s, os.O_RDWR|os.O_CREATE, 0o644))
		}},
		{"Open(O_WRONLY|O_TRUNC)", func(ctx context.Context, d *dir.Dir, s string) error {
			return closeHandle(d.Open(ctx, s, os.O_WRONLY|os.O_TRUNC, 0))
		}},
		{"Open(O_WRONLY|O_APPEND)", func(ctx context.Context, d *dir.Dir, s string) error {
			return closeHandle(d.Open(ctx, s, os.O_WRONLY|os.O_APPEND, 0))
		}},
		{"OpenFile+ReadBytes", func(ctx context.Context, d *dir.Dir, s string) error {
			f, err := d.OpenFile(ctx, s)
			if err != nil {
				return err
			}
			_, err = f.ReadBytes(ctx)
			return err
		}},
		{"CreateFile", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.CreateFile(ctx, s); return err }},
		{"CreateDir", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.CreateDir(ctx, s); return err }},
		{"MkdirAll", func(ctx context.Context, d *dir.Dir, s string) error { return d.MkdirAll(ctx, s) }},
		{"Remove", func(ctx context.Context, d *dir.Dir, s string) error { return d.Remove(ctx, s) }},
		{"RemoveAll", func(ctx context.Context, d *dir.Dir, s string) error { return d.RemoveAll(ctx, s) }},
		{"Move(from)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Move(ctx, s, "moved") }},
		{"Move(to)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Move(ctx, "victim", s) }},
		{"Copy(from)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Copy(ctx, s, "copied") }},
		{"Copy(to)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Copy(ctx, "victim", s) }},
		{"Symlink(link)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Symlink(ctx, "victim", s) }},
		{"Readlink", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.Readlink(ctx, s); return err }},
		{"Link(old)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Link(ctx, s, "linked") }},
		{"Link(new)", func(ctx context.Context, d *dir.Dir, s string) error { return d.Link(ctx, "victim", s) }},
		{"Chmod", func(ctx context.Context, d *dir.Dir, s string) error { return d.Chmod(ctx, s, 0o777) }},
		{"Chtimes", func(ctx context.Context, d *dir.Dir, s string) error { return d.Chtimes(ctx, s, when, when) }},
		{"Sub", func(ctx context.Context, d *dir.Dir, s string) error { _, err := d.Sub(ctx, s); return err }},
		{"Walk", func(ctx context.Context, d *dir.Dir, s string) error {
			return d.Walk(ctx, s, func(_ string, _ fs.DirEntry, err error) error { return err })
		}},
	}
}

func readHandle(h *dir.Handle, err error) error {
	if err != nil {
		return err
	}
	defer h.Close()
	_, err = io.ReadAll(h)
	return err
}

func closeHandle(h *dir.Handle, err error) error {
	if err != nil {
		return err
	}
	return h.Close()
}

// intactExceptNlink is intact, ignoring changes of link counts.
func (w *world) intactExceptNlink(what string, before snapshot) {
	w.t.Helper()
	strip := func(s snapshot) snapshot {
		out := snapshot{}
		for k, v := range s {
			if i := strings.Index(v, " nlink="); i >= 0 {
				v = v[:i]
			}
			out[k] = v
		}
		return out
	}
	if d := strip(before).diff(strip(w.outsideSnap())); len(d) > 0 {
		w.t.Errorf("%s: the tree outside the root changed: %v", what, d)
	}
}
