//go:build linux

package physical

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// resolvers are the two resolvers every test runs with.
var resolvers = []struct {
	name string
	mode ResolverMode
}{
	{"openat2", ResolverOpenat2},
	{"portable", ResolverPortable},
}

// newTestFS returns a backend over a fresh temporary directory, closed at the end of
// t. A backend forced to openat2 where the kernel lacks it skips t.
func newTestFS(t *testing.T, opts ...Option) *FS {
	t.Helper()
	return newAt(t, t.TempDir(), opts...)
}

// newAt returns a backend over dir, closed at the end of t.
func newAt(t *testing.T, dir string, opts ...Option) *FS {
	t.Helper()
	f, err := New(dir, opts...)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodeNotSupported {
			t.Skipf("openat2 is not available here: %v", err)
		}
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// eachResolver runs fn as a subtest per resolver, with options for New, and once
// more with openat2 and the fallback way of opening (withoutReopen).
func eachResolver(t *testing.T, fn func(t *testing.T, opts ...Option)) {
	for _, r := range resolvers {
		t.Run(r.name, func(t *testing.T) { fn(t, WithResolver(r.mode)) })
		if r.mode == ResolverOpenat2 {
			t.Run(r.name+"-noreopen", func(t *testing.T) { fn(t, WithResolver(r.mode), withoutReopen()) })
		}
	}
}

// host is a temporary base directory holding the backend's root and, beside it,
// an outside directory with a secret file the backend must never reach.
type host struct {
	t       *testing.T
	base    string
	root    string
	outside string
}

const secret = "SECRET"

func newHost(t *testing.T) *host {
	t.Helper()
	base := t.TempDir()
	h := &host{t: t, base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{h.root, h.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.writeHost(filepath.Join(h.outside, "secret"), secret)
	return h
}

func (h *host) writeHost(path, data string) {
	h.t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// in returns the host path of guest path s under the root.
func (h *host) in(s string) string { return filepath.Join(h.root, filepath.FromSlash(s)) }

// plant creates symlink s (a guest path) with target on the host, as a host tool
// would, bypassing the backend's refusal.
func (h *host) plant(target, s string) {
	h.t.Helper()
	if err := os.Symlink(target, h.in(s)); err != nil {
		h.t.Fatal(err)
	}
}

// state describes the outside directory in full (names, types, modes, sizes,
// modification times and contents), to check that nothing changed it.
func (h *host) state() string {
	h.t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(h.outside, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d %d", path, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return b.String()
}

// P parses a guest path known to be valid.
func P(s string) vfs.Path { return vfs.MustParse(s) }

// wantCode fails t unless err carries code.
func wantCode(t *testing.T, err error, code vfs.Code, what string, args ...any) {
	t.Helper()
	if got := vfs.CodeOf(err); got != code {
		t.Errorf("%s: got %v, want %s", fmt.Sprintf(what, args...), errText(err), code)
	}
}

func errText(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

// readAll reads guest file s through b.
func readAll(ctx context.Context, b vfs.Backend, s string) ([]byte, error) {
	f, err := b.OpenFile(ctx, P(s), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeAll opens guest file s through b with flag and writes data.
func writeAll(ctx context.Context, b vfs.Backend, s string, flag int, data string) error {
	f, err := b.OpenFile(ctx, P(s), flag, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(data))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
