package dir_test

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func TestIsReadOnly(t *testing.T) {
	d, ctl := dir.New(memory.New())
	if d.IsReadOnly() {
		t.Fatal("a fresh Dir reports read-only")
	}
	if !d.ReadOnly().IsReadOnly() {
		t.Fatal("ReadOnly() does not report read-only")
	}
	ctl.SetWritable(false)
	if d.IsReadOnly() {
		t.Fatal("the host's write lock made IsReadOnly true; it can be lifted")
	}
	ro, _ := dir.New(vfs.ReadOnly(memory.New()))
	if !ro.IsReadOnly() {
		t.Fatal("a Dir over a read-only backend does not report read-only")
	}
}
