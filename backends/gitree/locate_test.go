package gitree

import (
	"context"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestOverlayLocate: a pinned Sub of the overlay reports where its directory is
// now, so a Dir decides on its current location.
func TestOverlayLocate(t *testing.T) {
	ctx := context.Background()
	d, _ := overlayRepo(t)
	o := openOverlay(t, d)
	P := vfs.MustParse
	sub, err := o.Sub(ctx, P("dir/sub"))
	if err != nil {
		t.Fatal(err)
	}
	loc := sub.(vfs.Locator)
	if p, err := loc.Locate(ctx); err != nil || p.String() != "dir/sub" {
		t.Fatalf("Locate = %v, %v; want dir/sub", p, err)
	}
	if err := o.Mkdir(ctx, P("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := o.Rename(ctx, P("dir"), P("x/moved"), 0); err != nil {
		t.Fatal(err)
	}
	if p, err := loc.Locate(ctx); err != nil || p.String() != "x/moved/sub" {
		t.Fatalf("after the move, Locate = %v, %v; want x/moved/sub", p, err)
	}
	removeAll(t, o, P("x"))
	_, err = loc.Locate(ctx)
	wantCode(t, err, vfs.CodeNotFound)
}
