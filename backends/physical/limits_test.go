//go:build linux

package physical

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestMaxFileSize: writes past the limit fail and write nothing; reads stop after
// limit+1 bytes (THREATS 36), including on a 1 TiB sparse file.
func TestMaxFileSize(t *testing.T) {
	const max = 10
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		h.writeHost(h.in("exact"), strings.Repeat("e", max))
		h.writeHost(h.in("over"), strings.Repeat("o", max+1))
		h.writeHost(h.in("big"), strings.Repeat("b", 100))
		if err := os.Truncate(h.writeEmpty("sparse"), 1<<40); err != nil {
			t.Skipf("cannot make a 1 TiB sparse file here: %v", err)
		}
		f := newAt(t, h.root, append(opts, WithMaxFileSize(max))...)
		ctx := t.Context()

		if data, err := readAll(ctx, f, "exact"); err != nil || len(data) != max {
			t.Errorf("ReadFile(exact) = %d bytes, %v; want all %d", len(data), err, max)
		}
		for _, name := range []string{"over", "big", "sparse"} {
			data, err := readAll(ctx, f, name)
			wantCode(t, err, vfs.CodeTooLarge, "ReadFile(%s)", name)
			if len(data) != max+1 {
				t.Errorf("ReadFile(%s) read %d bytes before failing; want %d", name, len(data), max+1)
			}
		}
		r, err := f.OpenFile(ctx, P("big"), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 50)
		n, err := r.ReadAt(buf, 0)
		if n != max+1 || vfs.CodeOf(err) != vfs.CodeTooLarge {
			t.Errorf("ReadAt(50 bytes, 0) = %d, %v; want %d bytes and file_too_large", n, err, max+1)
		}
		n, err = r.ReadAt(buf, 40)
		if n != 0 || vfs.CodeOf(err) != vfs.CodeTooLarge {
			t.Errorf("ReadAt(50 bytes, 40) = %d, %v; want 0 and file_too_large", n, err)
		}
		r.Close()
		r, err = f.OpenFile(ctx, P("exact"), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := r.ReadAt(buf, 30); n != 0 || err != io.EOF {
			t.Errorf("ReadAt past the end of a file within the limit = %d, %v; want io.EOF", n, err)
		}
		r.Close()

		w, err := f.OpenFile(ctx, P("new"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(strings.Repeat("n", max))); err != nil {
			t.Errorf("writing exactly the limit: %v", err)
		}
		n, err = w.Write([]byte("x"))
		if n != 0 || vfs.CodeOf(err) != vfs.CodeTooLarge {
			t.Errorf("Write past the limit = %d, %v; want 0, file_too_large", n, err)
		}
		n, err = w.WriteAt([]byte("xyz"), max-2)
		if n != 0 || vfs.CodeOf(err) != vfs.CodeTooLarge {
			t.Errorf("WriteAt across the limit = %d, %v; want 0, file_too_large", n, err)
		}
		wantCode(t, w.Truncate(max+1), vfs.CodeTooLarge, "Truncate(max+1)")
		if err := w.Truncate(max); err != nil {
			t.Errorf("Truncate(max): %v", err)
		}
		w.Close()
		a, err := f.OpenFile(ctx, P("new"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Write([]byte("!"))
		wantCode(t, err, vfs.CodeTooLarge, "O_APPEND write past the limit")
		a.Close()
		if fi, err := os.Stat(h.in("new")); err != nil || fi.Size() != max {
			t.Errorf("new has %v bytes, %v; want %d (failed writes write nothing)", fi.Size(), err, max)
		}

		// Copying a hard-linked file bigger than the limit, to write it, fails too.
		if err := os.Link(h.in("big"), h.in("big2")); err != nil {
			t.Fatal(err)
		}
		_, err = f.OpenFile(ctx, P("big2"), os.O_WRONLY, 0)
		wantCode(t, err, vfs.CodeTooLarge, "OpenFile of a shared file over the limit for writing")
	})
}

func (h *host) writeEmpty(s string) string {
	h.writeHost(h.in(s), "")
	return h.in(s)
}
