package cas

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	capdir "github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

var goldenSpec = []string{"a=", "bar=hello", "empty/", "foo/", "foo/baz*=#!/bin/sh\n", "link->foo/baz"}

func TestSnapshotGolden(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, goldenSpec...))
	if got, want := d.String(), "4503a5ef32acd84cd91114435c7fe60c864a08ea558e888872a3e149f088f5a0/321"; got != want {
		t.Fatalf("snapshot of the golden tree = %s, want %s", got, want)
	}
	f := mount(t, s, d)
	info, err := f.Stat(bg, P("foo"))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Sys.(*Entry).Digest.String(); got != "55c5e11657f77eb26d51a45c126caa66e5905f0b290bf0f3d3788388df3d9e87/79" {
		t.Errorf("foo's digest = %s", got)
	}
	b, err := vfstest.ReadFile(bg, f, P("link"))
	if err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("read through link = %q, %v", b, err)
	}
	info, _ = f.Stat(bg, P("foo/baz"))
	if info.Mode != 0o755 || info.Size != 10 || !info.ModTime.Equal(testTime) {
		t.Errorf("foo/baz info = %+v", info)
	}
}

func TestConformanceReadOnly(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, goldenSpec...))
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend { return mount(t, s, d) }})
}

// hostile is a tree with every kind of link a resolver must handle.
var hostile = []string{
	"d/", "d/e/", "d/e/f=deep", "d/g=gee", "x*=exe",
	"up->../x", "abs->/etc/passwd", "esc->d/../../x", "loop1->loop2", "loop2->loop1",
	"self->self", "dl->nothing", "dd->d", "d/e/back->../../x", "d/e/toabove->../../..",
	"chain->dd/e/back", "dotdot->..", "slash->d/", "filedir->x/",
}

var queries = []string{
	"", "d", "d/", "d/e", "d/e/f", "d/g", "x", "x/", "up", "abs", "esc", "loop1", "self",
	"dl", "dl/", "dd", "dd/", "dd/e/f", "dd/g", "d/e/back", "d/e/toabove", "chain", "empty",
	"dotdot", "slash", "slash/e", "filedir", "nope", "d/nope", "x/y", "dd/e/back/z",
	"dd/e/../g", "d/e/f/", "up/", "chain/",
}

// TestDifferential compares every read call on a hostile tree with the memory
// backend holding the same tree: same error codes, same results.
func TestDifferential(t *testing.T) {
	m := build(t, hostile...)
	s := newStore(t)
	f := mount(t, s, snap(t, s, m))
	type out struct {
		code  vfs.Code
		mode  fs.FileMode
		size  int64
		text  string
		found bool
		path  string
	}
	call := func(b vfs.Backend, op, q string) out {
		p, err := vfs.ParseGuest(q)
		if q == "" {
			p, err = vfs.Root, nil
		}
		if err != nil {
			return out{code: vfs.CodeOf(err)}
		}
		var o out
		switch op {
		case "stat", "lstat":
			var info vfs.Info
			if op == "stat" {
				info, err = b.Stat(bg, p)
			} else {
				info, err = b.Lstat(bg, p)
			}
			o.mode = info.Mode
			if err == nil && !info.Mode.IsDir() {
				o.size = info.Size
			}
		case "readdir":
			var ents []vfs.DirEntry
			ents, err = b.ReadDir(bg, p)
			for _, e := range ents {
				o.text += e.Name + ":" + e.Type.String() + ","
			}
		case "read":
			var data []byte
			data, err = vfstest.ReadFile(bg, b, p)
			o.text = string(data)
		case "readlink":
			o.text, err = b.Readlink(bg, p)
		case "resolve", "resolvefollow":
			var loc vfs.Location
			loc, err = b.Resolve(bg, p, op == "resolvefollow")
			o.found, o.path, o.mode = loc.Found, loc.Path.String(), loc.Type
		case "sub":
			var sb vfs.Backend
			sb, err = b.Sub(bg, p)
			if err == nil {
				var ents []vfs.DirEntry
				ents, err = sb.ReadDir(bg, vfs.Root)
				o.size = int64(len(ents))
			}
		}
		if err != nil {
			var ve *vfs.Error
			if !errors.As(err, &ve) {
				t.Errorf("%s %q: error %v is not a *vfs.Error", op, q, err)
			}
			o.code = vfs.CodeOf(err)
		}
		return o
	}
	n := 0
	for _, op := range []string{"stat", "lstat", "readdir", "read", "readlink", "resolve", "resolvefollow", "sub"} {
		for _, q := range queries {
			want, got := call(m, op, q), call(f, op, q)
			// Permission bits of directories and links are backend-defined.
			if want.mode.IsDir() || want.mode&fs.ModeSymlink != 0 {
				want.mode, got.mode = want.mode.Type(), got.mode.Type()
			}
			if want != got {
				t.Errorf("%s %q: cas %+v, memory %+v", op, q, got, want)
			}
			n++
		}
	}
	t.Logf("%d calls compared", n)
}

func TestFSView(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, "a.txt=a\n", "bin/", "bin/run*=#!/bin/sh\n", "x/", "x/y/", "x/y/z.txt=z\n",
		"lz->x/y/z.txt", "bin/lx->run", "ly->x/y", "e/"))
	rd, _ := capdir.New(mount(t, s, d))
	if err := fstest.TestFS(rd.FS(), "a.txt", "bin/run", "x/y/z.txt", "lz", "bin/lx", "ly", "e"); err != nil {
		t.Fatal(err)
	}
	sub, err := mount(t, s, d).Sub(bg, P("x"))
	if err != nil {
		t.Fatal(err)
	}
	sd, _ := capdir.New(sub)
	if err := fstest.TestFS(sd.FS(), "y/z.txt"); err != nil {
		t.Fatal(err)
	}
}

func TestBackendCorruptBlob(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, "f=some content that is long enough to compress compress compress"))
	f := mount(t, s, d)
	info, _ := f.Stat(bg, P("f"))
	bd := info.Sys.(*Entry).Digest
	// Replace the blob with another blob's bytes.
	other, _ := s.PutBytes(bg, []byte("other"))
	raw, _ := os.ReadFile(s.blobPath(other))
	os.WriteFile(s.blobPath(bd), raw, 0o600)
	_, err := vfstest.ReadFile(bg, f, P("f"))
	if vfs.CodeOf(err) != vfs.CodeIO || !errors.Is(err, ErrCorrupt) && vfs.CodeOf(err) != vfs.CodeIO {
		t.Fatalf("read of a corrupt blob: %v, want io_error", err)
	}
	// Writes are refused.
	if _, err := f.OpenFile(bg, P("f"), os.O_RDWR, 0); vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Errorf("open for write: %v", err)
	}
}

func TestBackendLargeStreamed(t *testing.T) {
	s := newStore(t)
	big := make([]byte, 5<<20)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	m := build(t)
	vfstest.WriteFile(bg, m, P("big"), big)
	f := mount(t, s, snap(t, s, m))
	h, err := f.OpenFile(bg, P("big"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, 1000)
	for _, off := range []int64{4<<20 + 7, 100, 5<<20 - 500} { // forward, backward, across the end
		n, err := h.ReadAt(buf, off)
		want := big[off:min(off+1000, int64(len(big)))]
		if n != len(want) || string(buf[:n]) != string(want) {
			t.Fatalf("ReadAt %d: %d bytes, %v", off, n, err)
		}
		if n < len(buf) && err != io.EOF {
			t.Fatalf("short ReadAt at %d: err %v, want EOF", off, err)
		}
	}
	all, err := io.ReadAll(h)
	if err != nil || len(all) != len(big) {
		t.Fatalf("ReadAll: %d, %v", len(all), err)
	}
}

// TestBackendErrorsNameNoHostPath: a blob file the store cannot read fails the
// read with io_error, and the message does not name the store's directory.
func TestBackendErrorsNameNoHostPath(t *testing.T) {
	s := newStore(t)
	d := snap(t, s, build(t, "f=some content"))
	f := mount(t, s, d)
	info, _ := f.Stat(bg, P("f"))
	p := s.blobPath(info.Sys.(*Entry).Digest)
	os.Remove(p)
	os.Mkdir(p, 0o700) // a directory where the blob file was: reading it fails
	_, err := vfstest.ReadFile(bg, f, P("f"))
	if vfs.CodeOf(err) != vfs.CodeIO {
		t.Fatalf("read: %v, want io_error", err)
	}
	if strings.Contains(err.Error(), s.Dir()) {
		t.Fatalf("error names the store: %v", err)
	}
}
