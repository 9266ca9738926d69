//go:build linux

package physical

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/capfs/capfs/internal/testenv"
	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

// openOutcome is what one open for reading gave: the error's code, or the type
// and content of what was opened, and the location a ResolveOpen decided on.
func openOutcome(t *testing.T, f *FS, ctx context.Context, name string, fused bool) string {
	t.Helper()
	var (
		h   vfs.File
		loc vfs.Location
		err error
	)
	if fused {
		h, loc, err = f.ResolveOpen(ctx, P(name), func(l vfs.Location) error {
			loc = l
			return nil
		})
	} else {
		h, err = f.OpenFile(ctx, P(name), os.O_RDONLY, 0)
	}
	where := fmt.Sprintf("loc %q found %v type %v", loc.Path.String(), loc.Found, loc.Type)
	if err != nil {
		var e *vfs.Error
		if !errors.As(err, &e) {
			return fmt.Sprintf("untyped error %v", err)
		}
		return fmt.Sprintf("%s: %s %s %s", where, e.Code, e.Op, e.Path)
	}
	defer h.Close()
	info, err := h.Stat()
	if err != nil {
		return "stat: " + err.Error()
	}
	out := fmt.Sprintf("%s: opened %v %d", where, info.Mode.Type(), info.Size)
	if st, ok := h.(vfs.OpenStater); ok {
		if oi, ok := st.OpenStat(); ok {
			out += fmt.Sprintf(" openstat %v %d", oi.Mode.Type(), oi.Size)
		}
	}
	if info.Mode.IsRegular() {
		data, err := io.ReadAll(h)
		out += fmt.Sprintf(" %q %v", data, err)
	}
	return out
}

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestExpectRegularChangesNoResult: vfs.ExpectRegular changes no result. Every
// kind of name (a regular file, a directory, links to each, a link out of the
// root, a FIFO, a hard-linked file, a missing name, a name under a file) opens,
// or fails, through OpenFile and ResolveOpen exactly as without the hint, with
// every resolver, under each hard-link rule; and no descriptor is left open.
func TestExpectRegularChangesNoResult(t *testing.T) {
	for _, hl := range []HardLinkPolicy{HardLinksReplace, HardLinksReject} {
		t.Run(fmt.Sprint("hardlinks-", hl), func(t *testing.T) {
			eachResolver(t, func(t *testing.T, opts ...Option) {
				h := newHost(t)
				h.writeHost(h.in("f"), "data")
				if err := os.Mkdir(h.in("d"), 0o755); err != nil {
					t.Fatal(err)
				}
				h.writeHost(h.in("d/g"), "deeper")
				h.writeHost(h.in("h1"), "linked")
				if err := os.Link(h.in("h1"), h.in("h2")); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mkfifo(h.in("fifo"), 0o644); err != nil {
					t.Fatal(err)
				}
				h.plant("f", "lf")
				h.plant("d", "ld")
				h.plant("fifo", "lfifo")
				h.plant(h.in("f"), "abs")
				h.plant("../outside/secret", "lout")
				h.plant("missing", "dangling")
				f := newAt(t, h.root, append(opts, WithHardLinks(hl))...)
				ctx := t.Context()
				hint := vfs.ExpectRegular(ctx)
				before := openFds(t)
				for _, name := range []string{"f", "d", "d/g", "h1", "fifo", "lf", "ld", "ld/g", "lfifo", "abs", "lout", "dangling", "missing", "f/x", "d/"} {
					for _, fused := range []bool{false, true} {
						want := openOutcome(t, f, ctx, name, fused)
						got := openOutcome(t, f, hint, name, fused)
						if got != want {
							t.Errorf("%q (fused %v) with the hint:\n  %s\nwithout:\n  %s", name, fused, got, want)
						}
					}
				}
				if after := openFds(t); after > before {
					t.Errorf("%d descriptors open after the opens, %d before", after, before)
				}
			})
		})
	}
}

// TestExpectRegularRefusalClosesUnread: a decision that refuses a hinted open
// comes back unchanged, and the file opened for it is closed; the location
// decided on is the canonical one Resolve reports.
func TestExpectRegularRefusalClosesUnread(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		if err := os.MkdirAll(h.in("a/b"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.writeHost(h.in("a/b/f"), "data")
		f := newAt(t, h.root, opts...)
		ctx := vfs.ExpectRegular(t.Context())
		refusal := errors.New("refused by the test")
		want, err := f.Resolve(ctx, P("a/b/f"), true)
		if err != nil {
			t.Fatal(err)
		}
		before := openFds(t)
		for range 50 {
			var got vfs.Location
			fh, _, err := f.ResolveOpen(ctx, P("a/b/f"), func(l vfs.Location) error {
				got = l
				return refusal
			})
			if err != refusal || fh != nil {
				t.Fatalf("ResolveOpen with a refusing decision = %v, %v; want the refusal unchanged and no file", fh, err)
			}
			if got.Path.String() != want.Path.String() || !got.Path.IsResolved() || !got.Found || got.Type != want.Type {
				t.Fatalf("decided on %+v; Resolve reports %+v", got, want)
			}
		}
		if after := openFds(t); after > before {
			t.Errorf("%d descriptors open after 50 refused opens, %d before", after, before)
		}
	})
}

// TestExpectRegularFIFOSwap: a FIFO exchanged, again and again, with a regular
// file the caller expects. A hinted open never waits, opens only the regular
// file (its content whole) or fails with not_regular_file, and never reads the
// FIFO: bytes written into it beforehand are all still there afterwards.
func TestExpectRegularFIFOSwap(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		h := newHost(t)
		h.writeHost(h.in("f"), "data")
		if err := unix.Mkfifo(h.in("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		// O_RDWR opens a FIFO at once on Linux and holds both its ends, so the
		// bytes written stay in it until someone reads them.
		keep, err := unix.Open(h.in("fifo"), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(keep)
		const inFIFO = "never-read"
		if _, err := unix.Write(keep, []byte(inFIFO)); err != nil {
			t.Fatal(err)
		}
		f := newAt(t, h.root, opts...)
		ctx := vfs.ExpectRegular(t.Context())
		opened, refused := 0, 0
		testenv.Exchanging(t, h.root, [][2]string{{"f", "fifo"}}, func() {
			returns(t, "hinted opens racing a FIFO swap", func() {
				for i := range 1000 {
					var fh vfs.File
					var err error
					if i%2 == 0 {
						fh, err = f.OpenFile(ctx, P("f"), os.O_RDONLY, 0)
					} else {
						fh, _, err = f.ResolveOpen(ctx, P("f"), func(vfs.Location) error { return nil })
					}
					if err != nil {
						if vfs.CodeOf(err) != vfs.CodeNotRegular {
							t.Errorf("open %d: %v; want the file or not_regular_file", i, err)
						}
						refused++
						continue
					}
					opened++
					data, err := io.ReadAll(fh)
					fh.Close()
					if string(data) != "data" || err != nil {
						t.Errorf("open %d read %q, %v; want the regular file's content", i, data, err)
					}
				}
			})
		})
		buf := make([]byte, 64)
		n, err := unix.Read(keep, buf)
		if string(buf[:max(n, 0)]) != inFIFO {
			t.Fatalf("the FIFO holds %q (%v) after the race; want %q: something read it", buf[:max(n, 0)], err, inFIFO)
		}
		t.Logf("%d opens of the regular file, %d refusals of the FIFO", opened, refused)
	})
}
