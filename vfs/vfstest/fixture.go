package vfstest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// fx is one subtest's view of a fresh backend, with helpers that fail the test on
// unexpected errors.
type fx struct {
	cfg  Config
	t    *testing.T
	ctx  context.Context
	b    vfs.Backend // the checked backend under test
	feat vfs.Features
}

// feature names the Features field a test needs.
type feature int

const (
	symlinks feature = iota
	hardLinks
	chmod
	chtimes
)

func (f feature) String() string {
	return [...]string{"Symlinks", "HardLinks", "Chmod", "Chtimes"}[f]
}

func has(feat vfs.Features, f feature) bool {
	switch f {
	case symlinks:
		return feat.Symlinks
	case hardLinks:
		return feat.HardLinks
	case chmod:
		return feat.Chmod
	case chtimes:
		return feat.Chtimes
	}
	return false
}

func newFx(t *testing.T, cfg Config, needs ...feature) *fx {
	t.Helper()
	skipIfAsked(t, cfg)
	raw := cfg.New(t)
	if raw == nil {
		t.Fatal("Config.New returned nil")
	}
	feat := raw.Features()
	for _, n := range needs {
		if !has(feat, n) {
			t.Skipf("backend does not support %s (Features.%s is false)", strings.ToLower(n.String()), n)
		}
	}
	return &fx{cfg: cfg, t: t, ctx: t.Context(), b: newChecked(t, raw), feat: feat}
}

// skipIfAsked skips t if Config.Skip names it or a group containing it.
func skipIfAsked(t *testing.T, cfg Config) {
	t.Helper()
	name := t.Name()
	for k, why := range cfg.Skip {
		if strings.HasSuffix(name, "/"+k) || strings.Contains(name, "/"+k+"/") {
			t.Skipf("skipped by Config.Skip[%q]: %s", k, why)
		}
	}
}

// on returns a copy of f working on backend b (a Sub of f's backend).
func (f *fx) on(b vfs.Backend) *fx {
	c := *f
	c.b = b
	return &c
}

// p parses a guest path; the tests only use valid ones.
func p(s string) vfs.Path { return vfs.MustParse(s) }

func (f *fx) mkdir(s string) {
	f.t.Helper()
	if err := f.b.Mkdir(f.ctx, p(s), 0o755); err != nil {
		f.t.Fatalf("seed: Mkdir(%s): %v", s, err)
	}
}

func (f *fx) write(s, data string) {
	f.t.Helper()
	if err := WriteFile(f.ctx, f.b, p(s), []byte(data)); err != nil {
		f.t.Fatalf("seed: WriteFile(%s): %v", s, err)
	}
}

func (f *fx) symlink(target, s string) {
	f.t.Helper()
	if err := f.b.Symlink(f.ctx, target, p(s)); err != nil {
		f.t.Fatalf("seed: Symlink(%q, %s): %v", target, s, err)
	}
}

// plant creates symlink s whose target leaves the root. A backend with
// Config.RejectsEscapingSymlinks must refuse it with path_outside_sandbox, and the
// test stops there (skipped): everything after needs the link.
func (f *fx) plant(target, s string) {
	f.t.Helper()
	if f.cfg.RejectsEscapingSymlinks {
		err := f.b.Symlink(f.ctx, target, p(s))
		f.wantCode(err, vfs.CodeOutside, "Symlink(%q, %s) with Config.RejectsEscapingSymlinks", target, s)
		f.t.Skipf("the backend refuses escaping symlinks (Config.RejectsEscapingSymlinks); the rest of this test needs %s -> %q", s, target)
	}
	f.symlink(target, s)
}

// seed builds a tree from specs: "d/" is a directory, "l -> t" a symlink (whose
// target stays inside the root; see plant), "f=text" a file holding text, "f" an
// empty file. Parents must come first.
func (f *fx) seed(specs ...string) {
	f.t.Helper()
	for _, s := range specs {
		if name, target, ok := strings.Cut(s, " -> "); ok {
			f.symlink(target, name)
		} else if strings.HasSuffix(s, "/") {
			f.mkdir(s)
		} else {
			name, data, _ := strings.Cut(s, "=")
			f.write(name, data)
		}
	}
}

// read returns the contents of s, failing the test on error.
func (f *fx) read(s string) string {
	f.t.Helper()
	data, err := ReadFile(f.ctx, f.b, p(s))
	if err != nil {
		f.t.Fatalf("ReadFile(%s): %v", s, err)
	}
	return string(data)
}

// names lists directory s, failing the test on error.
func (f *fx) names(s string) []string {
	f.t.Helper()
	ents, err := f.b.ReadDir(f.ctx, p(s))
	if err != nil {
		f.t.Fatalf("ReadDir(%s): %v", s, err)
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name
	}
	return out
}

// wantNames checks the listing of directory s.
func (f *fx) wantNames(s string, want ...string) {
	f.t.Helper()
	if got := f.names(s); !slices.Equal(got, want) {
		f.t.Errorf("ReadDir(%s) = %q, want %q", s, got, want)
	}
}

// exists reports whether s exists (without following a final symlink).
func (f *fx) exists(s string) bool {
	f.t.Helper()
	_, err := f.b.Lstat(f.ctx, p(s))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.t.Fatalf("Lstat(%s): %v", s, err)
	}
	return err == nil
}

// wantCode checks that err carries code; what describes the call.
func (f *fx) wantCode(err error, code vfs.Code, what string, args ...any) bool {
	f.t.Helper()
	if got := vfs.CodeOf(err); got != code {
		f.t.Errorf("%s: got %v, want %s", fmt.Sprintf(what, args...), errOrOK(err), code)
		return false
	}
	return true
}

// wantOK checks that err is nil.
func (f *fx) wantOK(err error, what string, args ...any) bool {
	f.t.Helper()
	if err != nil {
		f.t.Errorf("%s: %v", fmt.Sprintf(what, args...), err)
		return false
	}
	return true
}

func errOrOK(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

// create opens s with O_CREATE and the given extra flags, returning the error.
func (f *fx) create(s string, extra int) error {
	h, err := f.b.OpenFile(f.ctx, p(s), os.O_WRONLY|os.O_CREATE|extra, 0o644)
	if err == nil {
		err = h.Close()
	}
	return err
}

// snapshot returns a textual description of the whole tree of b, for "nothing
// changed" checks: one line per entry with its type and, for links, the target.
func (f *fx) snapshot() string {
	f.t.Helper()
	var b strings.Builder
	var walk func(dir vfs.Path)
	walk = func(dir vfs.Path) {
		ents, err := f.b.ReadDir(f.ctx, dir)
		if err != nil {
			f.t.Fatalf("snapshot: ReadDir(%s): %v", dir, err)
		}
		for _, e := range ents {
			c, err := dir.Child(e.Name)
			if err != nil {
				f.t.Fatalf("snapshot: listed name %q: %v", e.Name, err)
			}
			fmt.Fprintf(&b, "%s %v", c, e.Type.Type())
			switch {
			case e.Type&fs.ModeSymlink != 0:
				target, err := f.b.Readlink(f.ctx, c)
				if err != nil {
					f.t.Fatalf("snapshot: Readlink(%s): %v", c, err)
				}
				fmt.Fprintf(&b, " -> %q", target)
			case e.Type.IsDir():
				b.WriteString("\n")
				walk(c)
				continue
			}
			b.WriteString("\n")
		}
	}
	walk(vfs.Root)
	return b.String()
}
