package vfstest_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// hiding embeds the Backend interface, hiding every optional interface: the
// mistake CheckForwards exists to catch.
type hiding struct{ vfs.Backend }

// CheckForwards fails on a wrapper that drops optional interfaces, naming
// each one it drops, and passes on one that drops none.
func TestCheckForwardsFailsOnADroppingWrapper(t *testing.T) {
	rec := &recorder{TB: t}
	vfstest.CheckForwards(rec, memory.New(), func(b vfs.Backend) vfs.Backend { return hiding{b} }, vfstest.Forwarding{})
	got := strings.Join(rec.errs, "\n")
	for _, o := range vfs.Optionals() {
		if !strings.Contains(got, "drops vfs."+o.Name+" ") {
			t.Errorf("CheckForwards over a hiding wrapper did not report vfs.%s dropped; it reported:\n%s", o.Name, got)
		}
	}
	rec = &recorder{TB: t}
	vfstest.CheckForwards(rec, memory.New(), func(b vfs.Backend) vfs.Backend { return b }, vfstest.Forwarding{})
	if len(rec.errs) != 0 {
		t.Errorf("CheckForwards over no wrapper failed:\n%s", strings.Join(rec.errs, "\n"))
	}
}

// droppingFd's files keep TypedFile, OpenStater and AttrFile but drop the
// host descriptor: the mistake a File wrapper written by hand makes.
type droppingFd struct{ vfs.Backend }

type fdlessFile struct{ vfs.File }

func (f fdlessFile) Type() fs.FileMode { return f.File.(vfs.TypedFile).Type() }

func (f fdlessFile) OpenStat() (vfs.Info, bool) { return f.File.(vfs.OpenStater).OpenStat() }

func (f fdlessFile) Chmod(mode fs.FileMode) error { return f.File.(vfs.AttrFile).Chmod(mode) }

func (f fdlessFile) Chtimes(atime, mtime time.Time) error {
	return f.File.(vfs.AttrFile).Chtimes(atime, mtime)
}

func (d droppingFd) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := d.Backend.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, err
	}
	return fdlessFile{f}, nil
}

// leakyReadOnly is a read-only view that opens what it reads for writing
// in the backend beneath, and so hands out a descriptor that writes.
type leakyReadOnly struct {
	vfs.Backend // vfs.ReadOnly(rw)
	rw          vfs.Backend
}

func (l leakyReadOnly) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if _, err := l.Backend.OpenFile(ctx, p, flag, perm); err != nil {
		return nil, err // the read-only view's refusal
	}
	return l.rw.OpenFile(ctx, p, os.O_RDWR, 0)
}

// CheckForwards fails on a wrapper whose files drop the host descriptor,
// and on a read-only wrapper whose files give one open for writing.
func TestCheckForwardsFailsOnAFileDroppingHostFd(t *testing.T) {
	rec := &recorder{TB: t}
	vfstest.CheckForwards(rec, memory.New(), func(b vfs.Backend) vfs.Backend { return droppingFd{b} }, vfstest.Forwarding{})
	got := strings.Join(rec.errs, "\n")
	for _, level := range []string{"wrapped OpenFile ", "wrapped OpenFile O_RDWR "} {
		if !strings.Contains(got, level+"vfstest_test.fdlessFile: drops hostfd.Filer (host descriptor)") {
			t.Errorf("CheckForwards did not report that %sdrops hostfd.Filer; it reported:\n%s", level, got)
		}
	}
	if strings.Contains(got, "fdlessFile: drops vfs.") {
		t.Errorf("CheckForwards reported a File interface fdlessFile keeps:\n%s", got)
	}
	rec = &recorder{TB: t}
	leaky := func(b vfs.Backend) vfs.Backend { return leakyReadOnly{Backend: vfs.ReadOnly(b), rw: b} }
	vfstest.CheckForwards(rec, memory.New(), leaky, vfstest.Forwarding{NoSub: "the test's wrapper has none"})
	if !slices.ContainsFunc(rec.errs, func(e string) bool {
		return strings.HasPrefix(e, "wrapped OpenFile ") && strings.HasSuffix(e, "a read-only file gave a descriptor open for writing")
	}) {
		t.Errorf("CheckForwards did not report a read-only file's writable descriptor; it reported:\n%s", strings.Join(rec.errs, "\n"))
	}
}

// CheckForwards fails where Forwarding says a wrapper's files refuse an
// optional File interface but the call reaches the wrapped File.
func TestCheckForwardsFailsOnAFileNotRefusing(t *testing.T) {
	rec := &recorder{TB: t}
	vfstest.CheckForwards(rec, memory.New(), func(b vfs.Backend) vfs.Backend { return b }, vfstest.Forwarding{
		Refused: map[string]vfs.Code{"AttrFile": vfs.CodeReadOnly},
	})
	for _, level := range []string{"wrapped OpenFile ", "wrapped ResolveOpen ", "its Sub OpenFile "} {
		if !slices.ContainsFunc(rec.errs, func(e string) bool {
			return strings.HasPrefix(e, level) && strings.HasSuffix(e, "vfs.AttrFile answered <nil> (reached the wrapped File: true), want a refusal with read_only")
		}) {
			t.Errorf("CheckForwards did not report that %sreached AttrFile; it reported:\n%s", level, strings.Join(rec.errs, "\n"))
		}
	}
}
