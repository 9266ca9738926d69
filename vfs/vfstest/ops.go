package vfstest

import (
	"os"

	"github.com/capfs/capfs/vfs"
)

// pathOp is one backend operation applied to a path under attack, so a threat can
// be checked against every operation at once.
type pathOp struct {
	name   string
	needs  []feature
	follow bool // resolves a final symlink
	slash  bool // does not follow a final symlink, but must for a trailing slash
	do     func(f *fx, q vfs.Path) error
}

// victim is a file the two-path operations use as their other end.
const victim = "victim"

// pathOps lists every Backend operation that takes a path, as pathOps. Two-path
// operations appear twice, with the attacked path at either end; the other end is
// the file victim (which must exist) or a fresh name.
func pathOps() []pathOp {
	return []pathOp{
		{name: "Stat", follow: true, do: func(f *fx, q vfs.Path) error { _, err := f.b.Stat(f.ctx, q); return err }},
		{name: "Lstat", slash: true, do: func(f *fx, q vfs.Path) error { _, err := f.b.Lstat(f.ctx, q); return err }},
		{name: "ReadDir", follow: true, do: func(f *fx, q vfs.Path) error { _, err := f.b.ReadDir(f.ctx, q); return err }},
		{name: "OpenRead", follow: true, do: func(f *fx, q vfs.Path) error { return openErr(f, q, os.O_RDONLY) }},
		{name: "OpenCreate", follow: true, do: func(f *fx, q vfs.Path) error { return openErr(f, q, os.O_WRONLY|os.O_CREATE) }},
		{name: "OpenTrunc", follow: true, do: func(f *fx, q vfs.Path) error { return openErr(f, q, os.O_RDWR|os.O_TRUNC) }},
		{name: "Mkdir", do: func(f *fx, q vfs.Path) error { return f.b.Mkdir(f.ctx, q, 0o755) }},
		{name: "Remove", do: func(f *fx, q vfs.Path) error { return f.b.Remove(f.ctx, q) }},
		{name: "RenameFrom", do: func(f *fx, q vfs.Path) error { return f.b.Rename(f.ctx, q, p("renamed"), 0) }},
		{name: "RenameTo", do: func(f *fx, q vfs.Path) error { return f.b.Rename(f.ctx, p(victim), q, 0) }},
		{name: "Symlink", needs: []feature{symlinks}, do: func(f *fx, q vfs.Path) error { return f.b.Symlink(f.ctx, "t", q) }},
		{name: "Readlink", needs: []feature{symlinks}, slash: true, do: func(f *fx, q vfs.Path) error { _, err := f.b.Readlink(f.ctx, q); return err }},
		{name: "LinkFrom", needs: []feature{hardLinks}, do: func(f *fx, q vfs.Path) error { return f.b.Link(f.ctx, q, p("linked")) }},
		{name: "LinkTo", needs: []feature{hardLinks}, do: func(f *fx, q vfs.Path) error { return f.b.Link(f.ctx, p(victim), q) }},
		{name: "Chmod", needs: []feature{chmod}, follow: true, do: func(f *fx, q vfs.Path) error { return f.b.Chmod(f.ctx, q, 0o600) }},
		{name: "Chtimes", needs: []feature{chtimes}, follow: true, do: func(f *fx, q vfs.Path) error { return f.b.Chtimes(f.ctx, q, t1, t2) }},
		{name: "Sub", follow: true, do: func(f *fx, q vfs.Path) error { _, err := f.b.Sub(f.ctx, q); return err }},
	}
}

func openErr(f *fx, q vfs.Path, flag int) error {
	h, err := f.b.OpenFile(f.ctx, q, flag, 0o644)
	if err == nil {
		err = h.Close()
	}
	return err
}

// supported reports whether the backend supports everything op needs.
func (f *fx) supported(op pathOp) bool {
	for _, n := range op.needs {
		if !has(f.feat, n) {
			return false
		}
	}
	return true
}

// attack applies every supported operation to path s and checks its code: want for
// every operation, or, if wantFollow is not empty, wantFollow for operations that
// resolve the final component (all do for a trailing slash; Lstat included) and any
// error for the others, whose code os itself does not pin. The tree must be
// unchanged afterwards.
func (f *fx) attack(s string, want, wantFollow vfs.Code) {
	f.t.Helper()
	before := f.snapshot()
	q := p(s)
	for _, op := range pathOps() {
		if !f.supported(op) {
			continue
		}
		err := op.do(f, q)
		switch {
		case wantFollow != "" && (op.follow || op.slash):
			f.wantCode(err, wantFollow, "%s(%q)", op.name, s)
		case wantFollow != "":
			if err == nil {
				f.t.Errorf("%s(%q) succeeded; want an error", op.name, s)
			}
		default:
			f.wantCode(err, want, "%s(%q)", op.name, s)
		}
		if after := f.snapshot(); after != before {
			f.t.Fatalf("%s(%q) changed the tree:\nbefore:\n%s\nafter:\n%s", op.name, s, before, after)
		}
	}
}
