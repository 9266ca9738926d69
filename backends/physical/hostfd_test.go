//go:build linux

package physical

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/internal/hostfd"
)

// TestHostFdNeverWiderThanTheOpen: a file gives its host descriptor only
// when the descriptor allows no more than the open asked for. O_RDONLY|O_TRUNC
// is opened O_RDWR (Linux truncates read-only opens), so that file answers no:
// a write through its descriptor would bypass the handle's read-only mode.
func TestHostFdNeverWiderThanTheOpen(t *testing.T) {
	eachResolver(t, func(t *testing.T, opts ...Option) {
		f := newTestFS(t, opts...)
		ctx := t.Context()
		if err := writeAll(ctx, f, "x", os.O_WRONLY|os.O_CREATE, "data"); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			flag     int
			ok       bool
			wantMode int
		}{
			{os.O_RDONLY, true, unix.O_RDONLY},
			{os.O_RDWR, true, unix.O_RDWR},
			{os.O_RDONLY | os.O_TRUNC, false, 0},
		} {
			h, err := f.OpenFile(ctx, P("x"), c.flag, 0)
			if err != nil {
				t.Fatal(err)
			}
			fd, ok := hostfd.Of(h)
			if ok != c.ok {
				t.Errorf("open %#x: HostFd ok = %v, want %v", c.flag, ok, c.ok)
			} else if ok {
				fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
				if err != nil || fl&unix.O_ACCMODE != c.wantMode {
					t.Errorf("open %#x: descriptor mode %#x, %v; want %#x", c.flag, fl&unix.O_ACCMODE, err, c.wantMode)
				}
			}
			h.Close()
		}
	})
}
