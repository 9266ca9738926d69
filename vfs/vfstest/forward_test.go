package vfstest_test

import (
	"fmt"
	"strings"
	"testing"

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
