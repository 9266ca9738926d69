//go:build linux

package physical

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

// op is one backend call on a path under attack.
type op struct {
	name   string
	follow bool // resolves the final component too
	do     func(ctx context.Context, f *FS, q vfs.Path) (string, error)
}

// ops lists every path-taking call. What a call returns (file data, listed names)
// comes back as text, so the test can check that no outside content shows.
func ops() []op {
	return []op{
		{"Stat", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			i, err := f.Stat(ctx, q)
			return i.Name, err
		}},
		{"Lstat", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			i, err := f.Lstat(ctx, q)
			return i.Name, err
		}},
		{"ReadDir", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			ents, err := f.ReadDir(ctx, q)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			return strings.Join(names, ","), err
		}},
		{"ReadFile", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			data, err := readAll(ctx, f, q.String())
			return string(data), err
		}},
		{"OpenCreate", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", openClose(ctx, f, q, os.O_WRONLY|os.O_CREATE)
		}},
		{"OpenTrunc", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", openClose(ctx, f, q, os.O_RDWR|os.O_TRUNC)
		}},
		{"OpenAppend", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", openClose(ctx, f, q, os.O_WRONLY|os.O_APPEND)
		}},
		{"Mkdir", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Mkdir(ctx, q, 0o777)
		}},
		{"Remove", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Remove(ctx, q)
		}},
		{"RenameFrom", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Rename(ctx, q, P("moved"), 0)
		}},
		{"RenameTo", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Rename(ctx, P("victim"), q, vfs.RenameNoReplace)
		}},
		{"Symlink", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Symlink(ctx, "victim", q)
		}},
		{"Readlink", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return f.Readlink(ctx, q)
		}},
		{"LinkFrom", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Link(ctx, q, P("linked"))
		}},
		{"LinkTo", false, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Link(ctx, P("victim"), q)
		}},
		{"Chmod", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Chmod(ctx, q, 0o777)
		}},
		{"Chtimes", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			return "", f.Chtimes(ctx, q, time.Unix(1, 0), time.Unix(2, 0))
		}},
		{"Sub", true, func(ctx context.Context, f *FS, q vfs.Path) (string, error) {
			sub, err := f.Sub(ctx, q)
			if err != nil {
				return "", err
			}
			defer sub.(*FS).Close()
			data, err := readAll(ctx, sub, "secret")
			return string(data), err
		}},
	}
}

func openClose(ctx context.Context, f *FS, q vfs.Path, flag int) error {
	h, err := f.OpenFile(ctx, q, flag, 0o666)
	if err == nil {
		err = h.Close()
	}
	return err
}

// TestPlantedEscapes: symlinks the host planted that lead outside the root
// (THREATS 15-19), directly, through intermediate directories, in chains and with
// trailing slashes, under every call: each call through them fails with
// path_outside_sandbox, none shows outside content, and the outside directory is
// unchanged. Errors never show the host paths.
func TestPlantedEscapes(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		h.writeHost(h.in("victim"), "V")
		if err := os.MkdirAll(h.in("d/e"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.plant(h.outside, "absl")
		h.plant(filepath.Join(h.outside, "secret"), "absf")
		h.plant("../outside", "rell")
		h.plant("../outside/secret", "relf")
		h.plant("../../outside", "d/deep")
		h.plant("../../../outside", "d/e/deeper")
		h.plant("c2", "d/c1")
		h.plant("../rell", "d/c2") // a chain whose last hop escapes
		h.plant("..", "up")
		h.plant("e/../../..", "d/dotty")
		h.plant("/", "slash")
		before := h.state()
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		links := []string{"absl", "absf", "rell", "relf", "d/deep", "d/e/deeper", "d/c1", "up", "d/dotty", "slash"}
		for _, l := range links {
			for _, suffix := range []string{"", "/", "/secret", "/new", "/x/y", "/."} {
				s := l + suffix
				q := P(s)
				through := suffix != "" // the path needs the link followed
				for _, o := range ops() {
					if !through && !o.follow {
						continue // acts on the link itself, legitimately
					}
					out, err := o.do(ctx, f, q)
					if strings.Contains(out, secret) || strings.Contains(out, "secret") {
						t.Errorf("%s(%s) showed outside content: %q", o.name, s, out)
					}
					if err != nil && strings.Contains(err.Error(), h.base) {
						t.Errorf("%s(%s): error names a host path: %v", o.name, s, err)
					}
					if slashOnly := suffix == "/" || suffix == "/."; slashOnly && !o.follow && o.name != "Lstat" && o.name != "Readlink" {
						// Acts on the link's own name, which a trailing slash does
						// not follow: any error (as on Linux), never success.
						if err == nil {
							t.Errorf("%s(%s) succeeded", o.name, s)
						}
						continue
					}
					wantCode(t, err, vfs.CodeOutside, "%s(%s)", o.name, s)
				}
			}
		}
		if after := h.state(); after != before {
			t.Fatalf("the outside directory changed:\n%s\nwant:\n%s", after, before)
		}
		// The links themselves are still there, untouched by the calls above.
		for _, l := range links {
			if fi, err := os.Lstat(h.in(l)); err != nil || fi.Mode().Type() != os.ModeSymlink {
				t.Errorf("%s: %v, %v; want the planted link", l, fi, err)
			}
		}
	})
}

// TestReadlink: Readlink returns stored relative targets verbatim, even escaping
// ones, but never an absolute (host) target (THREATS 27).
func TestReadlink(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		h.plant(h.outside, "absl")
		h.plant("/", "slash")
		h.plant("../outside", "rell")
		h.plant("a/./b//c/", "weird")
		h.writeHost(h.in("f"), "F")
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		for _, l := range []string{"absl", "slash"} {
			got, err := f.Readlink(ctx, P(l))
			wantCode(t, err, vfs.CodeOutside, "Readlink(%s)", l)
			if got != "" || (err != nil && strings.Contains(err.Error(), h.base)) {
				t.Errorf("Readlink(%s) = %q, %v: shows the host path", l, got, err)
			}
		}
		for l, want := range map[string]string{"rell": "../outside", "weird": "a/./b//c/"} {
			if got, err := f.Readlink(ctx, P(l)); err != nil || got != want {
				t.Errorf("Readlink(%s) = %q, %v; want %q", l, got, err, want)
			}
		}
		_, err := f.Readlink(ctx, P("f"))
		wantCode(t, err, vfs.CodeInvalidPath, "Readlink of a regular file")
		_, err = f.Readlink(ctx, P("missing"))
		wantCode(t, err, vfs.CodeNotFound, "Readlink(missing)")
	})
}

// TestSymlinkCreation: Symlink refuses targets that leave the root, judged from
// the directory the link really lands in, not only its lexical path (THREATS 26).
func TestSymlinkCreation(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		f := newAt(t, h.root, opts...)
		ctx := t.Context()
		if err := f.Mkdir(ctx, P("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tt := range [][2]string{{".", "s"}, {"..", "d/up"}, {"../d", "d/self"}, {"x/../../d", "d/y"}} {
			if err := f.Symlink(ctx, tt[0], P(tt[1])); err != nil {
				t.Errorf("Symlink(%q, %s): %v", tt[0], tt[1], err)
			}
		}
		// s -> . and d/up -> ..: lexically inside, physically in the root.
		for _, tt := range [][2]string{
			{"../x", "s/s/l"}, {"../../x", "d/up/d/l"}, {"..", "s/s/l2"}, {"../outside/secret", "s/d/up/l3"},
			{h.outside, "abs"}, {"/", "root"}, {"../x", "l4"}, {"d/../../x", "l5"},
		} {
			err := f.Symlink(ctx, tt[0], P(tt[1]))
			wantCode(t, err, vfs.CodeOutside, "Symlink(%q, %s)", tt[0], tt[1])
			if err != nil && strings.Contains(err.Error(), h.base) {
				t.Errorf("Symlink error names a host path: %v", err)
			}
		}
		ents, _ := os.ReadDir(h.root)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, ",") != "d,s" {
			t.Errorf("root holds %q after the refused links; want d,s", names)
		}
		// The accepted links work.
		if err := writeAll(ctx, f, "s/s/d/up/d/file", os.O_WRONLY|os.O_CREATE, "ok"); err != nil {
			t.Fatal(err)
		}
		if data, err := os.ReadFile(h.in("d/file")); err != nil || string(data) != "ok" {
			t.Errorf("d/file = %q, %v", data, err)
		}
	})
}

// TestNoHostPathInErrors provokes many errors, on the root and on a Sub, on the
// backend and on files, and checks that none names a host path.
func TestNoHostPathInErrors(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		for _, d := range []string{"d", "d/full", "box"} {
			if err := os.Mkdir(h.in(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		h.writeHost(h.in("f"), "F")
		h.writeHost(h.in("d/full/x"), "X")
		h.plant(h.outside, "absl")
		h.plant("../outside", "rell")
		h.plant("loop", "loop")
		h.plant("../../outside", "box/out")
		f := newAt(t, h.root, append(opts, WithMaxFileSize(4))...)
		ctx := t.Context()
		sub, err := f.Sub(ctx, P("box"))
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		add := func(err error) { errs = append(errs, err) }
		for _, b := range []vfs.Backend{f, sub} {
			for _, s := range []string{"missing", "f/x", "absl", "absl/x", "rell/secret", "loop", "out/secret", "d/full", "."} {
				_, err := b.Stat(ctx, P(s))
				add(err)
				_, err = b.ReadDir(ctx, P(s+"/"))
				add(err)
				_, err = b.OpenFile(ctx, P(s), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
				add(err)
				add(b.Mkdir(ctx, P(s), 0o755))
				add(b.Remove(ctx, P(s)))
				add(b.Rename(ctx, P(s), P("d"), 0))
				add(b.Symlink(ctx, "/etc/passwd", P(s)))
				add(b.Chmod(ctx, P(s), fs0o4755))
				add(b.Link(ctx, P(s), P("f")))
				_, err = b.Readlink(ctx, P(s))
				add(err)
				_, err = b.Sub(ctx, P(s))
				add(err)
			}
		}
		add(f.Rename(ctx, P("d"), P("d/full/in"), 0))
		w, err := f.OpenFile(ctx, P("new"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Write([]byte("too long"))
		add(err)
		add(w.Close())
		_, err = w.Read(make([]byte, 1))
		add(err)
		add(w.Close())
		sub.(*FS).Close()
		_, err = sub.Stat(ctx, vfs.Root)
		add(err)
		n := 0
		for _, err := range errs {
			if err == nil {
				continue
			}
			n++
			text := err.Error()
			for c := errors.Unwrap(err); c != nil; c = errors.Unwrap(c) {
				text += " " + c.Error()
			}
			if strings.Contains(text, h.base) || strings.Contains(text, "/tmp") {
				t.Errorf("error names a host path: %s", text)
			}
			var e *vfs.Error
			if !errors.As(err, &e) || strings.HasPrefix(e.Path, "/") || strings.HasPrefix(e.Dest, "/") {
				t.Errorf("not a *vfs.Error with guest paths: %#v", err)
			}
		}
		if n < 150 {
			t.Errorf("only %d errors provoked; the test lost its reach", n)
		}
	})
}

const fs0o4755 = os.ModeSetuid | 0o755
