package vfstest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// testBasics checks what the differential cannot: the root, declared features,
// rename flags, the exported helpers, and sizes beyond a few bytes.
func testBasics(t *testing.T, cfg Config) {
	t.Run("root", func(t *testing.T) { basicsRoot(t, cfg) })

	t.Run("unsupported-features", func(t *testing.T) { basicsUnsupportedFeatures(t, cfg) })

	t.Run("info", func(t *testing.T) { basicsInfo(t, cfg) })

	t.Run("rename-flags", func(t *testing.T) { basicsRenameFlags(t, cfg) })

	t.Run("helpers", func(t *testing.T) { basicsHelpers(t, cfg) })

	t.Run("sizes-and-names", func(t *testing.T) { basicsSizesAndNames(t, cfg) })
}

// testReadOnly checks that a ReadOnly backend refuses every mutation.
func testReadOnly(t *testing.T, cfg Config) {
	raw := cfg.New(t)
	f := &fx{cfg: cfg, t: t, ctx: t.Context(), b: newChecked(t, raw), feat: raw.Features()}
	if _, err := f.b.Stat(f.ctx, vfs.Root); err != nil {
		t.Fatalf("Stat(.): %v", err)
	}
	if _, err := f.b.ReadDir(f.ctx, vfs.Root); err != nil {
		t.Fatalf("ReadDir(.): %v", err)
	}
	x := p("x")
	f.wantCode(f.b.Mkdir(f.ctx, x, 0o755), vfs.CodeReadOnly, "Mkdir")
	f.wantCode(f.create("x", 0), vfs.CodeReadOnly, "OpenFile(O_CREATE)")
	f.wantCode(f.b.Symlink(f.ctx, "t", x), vfs.CodeReadOnly, "Symlink")
	for name, err := range map[string]error{
		"Remove":  f.b.Remove(f.ctx, x),
		"Rename":  f.b.Rename(f.ctx, x, p("y"), 0),
		"Link":    f.b.Link(f.ctx, x, p("y")),
		"Chmod":   f.b.Chmod(f.ctx, x, 0o600),
		"Chtimes": f.b.Chtimes(f.ctx, x, t1, t2),
	} {
		if c := vfs.CodeOf(err); c != vfs.CodeReadOnly && c != vfs.CodeNotFound {
			t.Errorf("%s on a ReadOnly backend: %v; want read_only (or not_found)", name, err)
		}
	}
	if err := f.b.Remove(f.ctx, vfs.Root); err == nil {
		t.Error("Remove(.) succeeded on a ReadOnly backend")
	}
}

// basicsRoot is testBasics's "root" subtest.
func basicsRoot(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.wantNames(".")
	for _, st := range []func() (vfs.Info, error){
		func() (vfs.Info, error) { return f.b.Stat(f.ctx, vfs.Root) },
		func() (vfs.Info, error) { return f.b.Lstat(f.ctx, vfs.Root) },
	} {
		info, err := st()
		if f.wantOK(err, "Stat(.)") && (!info.Mode.IsDir() || info.Name != ".") {
			t.Errorf("root: name %q mode %v; want a directory named \".\"", info.Name, info.Mode)
		}
	}
	f.write("f", "F")
	f.wantCode(f.b.Mkdir(f.ctx, vfs.Root, 0o755), vfs.CodeExists, "Mkdir(.)")
	if err := f.b.Remove(f.ctx, vfs.Root); err == nil {
		t.Error("Remove(.) succeeded")
	}
	if err := f.b.Rename(f.ctx, vfs.Root, p("x"), 0); err == nil {
		t.Error("Rename(., x) succeeded")
	}
	if err := f.b.Rename(f.ctx, p("f"), vfs.Root, 0); err == nil {
		t.Error("Rename(f, .) succeeded")
	}
	f.wantNames(".", "f")
	h, err := f.b.OpenFile(f.ctx, vfs.Root, os.O_RDONLY, 0)
	if f.wantOK(err, "OpenFile(., O_RDONLY)") {
		info, err := h.Stat()
		if f.wantOK(err, "root handle Stat") && !info.Mode.IsDir() {
			t.Errorf("root handle Stat mode %v; want a directory", info.Mode)
		}
		_, err = h.Read(make([]byte, 1))
		f.wantCode(err, vfs.CodeIsDir, "Read on a directory handle")
		f.wantOK(h.Close(), "Close")
	}
}

// basicsUnsupportedFeatures is testBasics's "unsupported-features" subtest.
func basicsUnsupportedFeatures(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("f=F")
	if !f.feat.Symlinks {
		f.wantCode(f.b.Symlink(f.ctx, "f", p("l")), vfs.CodeNotSupported, "Symlink without Features.Symlinks")
	}
	if !f.feat.HardLinks {
		f.wantCode(f.b.Link(f.ctx, p("f"), p("g")), vfs.CodeNotSupported, "Link without Features.HardLinks")
	}
	if !f.feat.Chmod {
		f.wantCode(f.b.Chmod(f.ctx, p("f"), 0o600), vfs.CodeNotSupported, "Chmod without Features.Chmod")
	}
	if !f.feat.Chtimes {
		f.wantCode(f.b.Chtimes(f.ctx, p("f"), t1, t2), vfs.CodeNotSupported, "Chtimes without Features.Chtimes")
	}
	f.wantNames(".", "f")
}

// basicsInfo is testBasics's "info" subtest.
func basicsInfo(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("d/", "d/e/", "d/e/file=12345")
	statsFile(f)
	info, err := f.b.Stat(f.ctx, p("d/e"))
	if f.wantOK(err, "Stat") && (info.Name != "e" || !info.Mode.IsDir() || info.ModTime.IsZero()) {
		t.Errorf("Stat(d/e) = %+v; want a directory named e with a modification time", info)
	}
	listsOne(f)
	if f.feat.Chtimes {
		writeTouches(f, "d/e/file")
	}
	if f.feat.Symlinks {
		f.symlink("d/e/file", "l")
		ents, err := f.b.ReadDir(f.ctx, vfs.Root)
		if f.wantOK(err, "ReadDir") && (len(ents) != 2 || ents[1].Name != "l" || ents[1].Type != fs.ModeSymlink) {
			t.Errorf("ReadDir(.) = %+v; want d and the symlink l", ents)
		}
	}
}

// statsFile: Stat of d/e/file (seeded by basicsInfo) describes it, and so
// does its FileInfo.
func statsFile(f *fx) {
	info, err := f.b.Stat(f.ctx, p("d/e/file"))
	if !f.wantOK(err, "Stat") {
		return
	}
	if info.Name != "file" || info.Size != 5 || !info.Mode.IsRegular() || info.ModTime.IsZero() {
		f.t.Errorf("Stat(d/e/file) = %+v; want name file, size 5, a regular file, a modification time", info)
	}
	if fi := info.FileInfo(); fi.Name() != "file" || fi.Size() != 5 || fi.IsDir() {
		f.t.Errorf("Info.FileInfo() = %v", fi)
	}
}

// listsOne: d and d/e (seeded by basicsInfo) each list their one entry
// with its type.
func listsOne(f *fx) {
	t := f.t
	ents, err := f.b.ReadDir(f.ctx, p("d"))
	if f.wantOK(err, "ReadDir") && (len(ents) != 1 || ents[0].Name != "e" || ents[0].Type != fs.ModeDir) {
		t.Errorf("ReadDir(d) = %+v; want [{e ModeDir}]", ents)
	}
	ents, err = f.b.ReadDir(f.ctx, p("d/e"))
	if f.wantOK(err, "ReadDir") && (len(ents) != 1 || ents[0].Name != "file" || ents[0].Type != 0) {
		t.Errorf("ReadDir(d/e) = %+v; want [{file 0}]", ents)
	}
}

// writeTouches: a write to file name sets its modification time anew.
func writeTouches(f *fx, name string) {
	f.wantOK(f.b.Chtimes(f.ctx, p(name), t1, t1), "Chtimes")
	h, err := f.b.OpenFile(f.ctx, p(name), os.O_WRONLY, 0)
	if !f.wantOK(err, "OpenFile") {
		return
	}
	h.Write([]byte("x"))
	h.Close()
	if info, err := f.b.Stat(f.ctx, p(name)); f.wantOK(err, "Stat") && info.ModTime.Equal(t1) {
		f.t.Error("a write did not update the modification time")
	}
}

// basicsRenameFlags is testBasics's "rename-flags" subtest.
func basicsRenameFlags(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.seed("a=A", "b=B", "d/", "d/x=X", "e/")
	f.wantCode(f.b.Rename(f.ctx, p("a"), p("b"), vfs.RenameNoReplace), vfs.CodeExists, "Rename(a, b, NoReplace)")
	f.wantCode(f.b.Rename(f.ctx, p("d"), p("e"), vfs.RenameNoReplace), vfs.CodeExists, "Rename(d, e, NoReplace) onto an empty directory")
	if f.read("a") != "A" || f.read("b") != "B" {
		t.Error("a failed NoReplace rename changed a or b")
	}
	f.wantOK(f.b.Rename(f.ctx, p("a"), p("c"), vfs.RenameNoReplace), "Rename(a, c, NoReplace)")
	if f.exists("a") || f.read("c") != "A" {
		t.Error("Rename(a, c, NoReplace) did not move a to c")
	}
	if f.feat.Symlinks {
		f.symlink("nowhere", "dangle")
		f.wantCode(f.b.Rename(f.ctx, p("c"), p("dangle"), vfs.RenameNoReplace), vfs.CodeExists, "Rename(c, dangle, NoReplace) onto a dangling symlink")
		if f.exists("nowhere") || !f.exists("c") {
			t.Error("NoReplace onto a dangling link moved something")
		}
	}
	f.wantOK(f.b.Rename(f.ctx, p("c"), p("d"), vfs.RenameExchange), "Rename(c, d, Exchange) of a file and a directory")
	if got := f.read("d"); got != "A" {
		t.Errorf("after exchange d = %q; want A", got)
	}
	if got := f.read("c/x"); got != "X" {
		t.Errorf("after exchange c/x = %q; want X", got)
	}
	f.wantCode(f.b.Rename(f.ctx, p("c"), p("missing"), vfs.RenameExchange), vfs.CodeNotFound, "Rename(c, missing, Exchange)")
	f.wantCode(f.b.Rename(f.ctx, p("missing"), p("c"), vfs.RenameExchange), vfs.CodeNotFound, "Rename(missing, c, Exchange)")
	if f.feat.Symlinks {
		f.wantNames(".", "b", "c", "d", "dangle", "e")
	} else {
		f.wantNames(".", "b", "c", "d", "e")
	}
}

// basicsHelpers is testBasics's "helpers" subtest.
func basicsHelpers(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	f.wantOK(MkdirAll(f.ctx, f.b, p("a/b/c"), 0o755), "MkdirAll(a/b/c)")
	f.wantOK(MkdirAll(f.ctx, f.b, p("a/b"), 0o755), "MkdirAll of an existing directory")
	f.wantOK(MkdirAll(f.ctx, f.b, vfs.Root, 0o755), "MkdirAll(.)")
	f.wantNames("a/b", "c")
	f.wantOK(WriteFile(f.ctx, f.b, p("a/b/c/f"), []byte("long content")), "WriteFile")
	f.wantOK(WriteFile(f.ctx, f.b, p("a/b/c/f"), []byte("short")), "WriteFile again")
	if got := f.read("a/b/c/f"); got != "short" {
		t.Errorf("ReadFile after two WriteFiles = %q; want short (WriteFile truncates)", got)
	}
	f.wantCode(MkdirAll(f.ctx, f.b, p("a/b/c/f/g"), 0o755), vfs.CodeNotDir, "MkdirAll through a file")
	_, err := ReadFile(f.ctx, f.b, p("a/missing"))
	f.wantCode(err, vfs.CodeNotFound, "ReadFile(missing)")
	f.wantCode(WriteFile(f.ctx, f.b, p("missing/f"), nil), vfs.CodeNotFound, "WriteFile(missing/f)")
}

// basicsSizesAndNames is testBasics's "sizes-and-names" subtest.
func basicsSizesAndNames(t *testing.T, cfg Config) {
	f := newFx(t, cfg)
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i*7 + i>>9)
	}
	f.wantOK(WriteFile(f.ctx, f.b, p("big"), big), "WriteFile(300 KiB)")
	got, err := ReadFile(f.ctx, f.b, p("big"))
	if f.wantOK(err, "ReadFile(big)") && !bytes.Equal(got, big) {
		t.Errorf("300 KiB round trip differs (got %d bytes)", len(got))
	}
	h, err := f.b.OpenFile(f.ctx, p("sparse"), os.O_RDWR|os.O_CREATE, 0o644)
	if f.wantOK(err, "OpenFile(sparse)") {
		const off = 8 << 20
		if _, err := h.WriteAt([]byte("end"), off); f.wantOK(err, "WriteAt 8 MiB") {
			info, err := h.Stat()
			if f.wantOK(err, "Stat") && info.Size != off+3 {
				t.Errorf("sparse size %d; want %d", info.Size, off+3)
			}
			buf := make([]byte, 4)
			n, _ := h.ReadAt(buf, off-1)
			if string(buf[:n]) != "\x00end" {
				t.Errorf("ReadAt around the gap = %q", buf[:n])
			}
		}
		h.Close()
	}
	long := strings.Repeat("n", vfs.MaxNameLen)
	f.write(long, "L")
	f.wantNames(".", "big", long, "sparse")
	deep := ""
	for i := range 40 {
		deep += fmt.Sprintf("d%d/", i)
		f.mkdir(deep)
	}
	f.write(deep+"leaf", "deep")
	if got := f.read(deep + "leaf"); got != "deep" {
		t.Errorf("40 levels deep: %q", got)
	}
}
