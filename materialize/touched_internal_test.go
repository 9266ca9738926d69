//go:build linux

package materialize

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
)

// A checkout on a filesystem coarser than the source's clock stores the
// source's time rounded: that is no change. A time the sandbox sets is one.
func TestTouchedIgnoresCheckoutRounding(t *testing.T) {
	ctx := context.Background()
	d, _ := dir.New(memory.New())
	if err := d.WriteFile(ctx, "f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Checkout(ctx, d, Options{Base: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// As if the source's time had a precision the checkout's filesystem lacks.
	e := tr.manifest.Entries["f"]
	e.ModTime = e.ModTime.Add(time.Nanosecond)
	tr.manifest.Entries["f"] = e
	cs, err := tr.Diff(ctx)
	if err != nil || len(cs) != 0 {
		t.Fatalf("Diff: %v %+v", err, cs)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(tr.Path(), "f"), later, later); err != nil {
		t.Fatal(err)
	}
	cs, err = tr.Diff(ctx)
	if err != nil || len(cs) != 1 || cs[0].Kind != Touched {
		t.Fatalf("Diff after a touch: %v %+v", err, cs)
	}
}
