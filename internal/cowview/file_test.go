package cowview

import (
	"context"
	"io/fs"
	"os"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
)

// elsewhereLower is fakeLower whose files name a path of their own, as a
// lower tree's may.
type elsewhereLower struct{ fakeLower }

func (l elsewhereLower) Open(ctx context.Context, op string, p vfs.Path, lo *ent, name string) (vfs.File, error) {
	i, _ := l.Info(op, p, lo, name)
	return rofile.NewData(vfs.MustParse("elsewhere"), i, []byte(lo.data), "lower tree is read-only"), nil
}

// A view's files answer with the guest's path and name: a lower file's
// writes fail as on a handle not open for writing, its other errors name the
// path the guest opened, and a directory's Stat and Type are the view's.
func TestViewFileAddress(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Store: memory.New(), InoPrefix: "t", BaseTime: baseTime}
	_, v := New[*ent](elsewhereLower{}, cfg, lowerTree())
	f, err := v.OpenFile(ctx, vfs.MustParse("d/b.txt"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for op, call := range map[string]func() error{
		"write":    func() error { _, err := f.Write([]byte("x")); return err },
		"truncate": func() error { return f.Truncate(0) },
	} {
		e, ok := call().(*vfs.Error)
		if !ok || e.Code != vfs.CodePermission || e.Op != op || e.Path != "d/b.txt" {
			t.Errorf("%s of a lower file: %v, want fs_permission_denied on d/b.txt", op, e)
		}
	}
	if info, err := f.Stat(); err != nil || info.Name != "b.txt" || info.Size != 4 {
		t.Errorf("Stat: %+v %v, want b.txt of 4 bytes", info, err)
	}
	if tf, ok := f.(vfs.TypedFile); !ok || tf.Type() != 0 {
		t.Errorf("a lower file %T is no TypedFile of a regular file", f)
	}
	f.Close()
	if _, err := f.Read(make([]byte, 1)); vfs.CodeOf(err) != vfs.CodeClosed || err.(*vfs.Error).Path != "d/b.txt" {
		t.Errorf("Read after Close: %v, want closed on d/b.txt", err)
	}
	d, err := v.OpenFile(ctx, vfs.MustParse("d/e"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if info, err := d.Stat(); err != nil || info.Name != "e" || !info.Mode.IsDir() {
		t.Errorf("Stat of a directory: %+v %v, want directory e", info, err)
	}
	if tf, ok := d.(vfs.TypedFile); !ok || tf.Type() != fs.ModeDir {
		t.Errorf("a directory %T is no TypedFile of a directory", d)
	}
	if _, err := d.Read(make([]byte, 1)); vfs.CodeOf(err) != vfs.CodeIsDir || err.(*vfs.Error).Path != "d/e" {
		t.Errorf("Read of a directory: %v, want is_a_directory on d/e", err)
	}
}
