package cas

import (
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestOverlayConformance runs the whole suite over an overlay of the empty tree,
// and again over an overlay of a tree with content.
func TestOverlayConformance(t *testing.T) {
	s := newStore(t)
	empty := snap(t, s, build(t))
	vfstest.TestBackend(t, vfstest.Config{New: func(t *testing.T) vfs.Backend {
		o, err := s.OpenOverlay(bg, empty)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}})
}

func TestOverlayCommit(t *testing.T) {
	s := newStore(t)
	base := snap(t, s, build(t, goldenSpec...))
	o, err := s.OpenOverlay(bg, base)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := o.Commit(bg, ""); err != nil || d != base {
		t.Fatalf("commit of an unchanged overlay = %s, %v; want %s", d, err, base)
	}
	if err := vfstest.WriteFile(bg, o, P("bar"), []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(bg, P("a")); err != nil {
		t.Fatal(err)
	}
	d, err := o.Commit(bg, "edited")
	if err != nil || d == base || o.Base() != d {
		t.Fatalf("commit = %s, %v", d, err)
	}
	if r, _ := s.Root("edited"); r != d {
		t.Fatalf("root edited = %s, want %s", r, d)
	}
	want := snap(t, s, build(t, "bar=changed", "empty/", "foo/", "foo/baz*=#!/bin/sh\n", "link->foo/baz"))
	if d != want {
		t.Fatalf("committed %s, want %s", d, want)
	}
	// The base is untouched.
	if got, _ := readFile(mount(t, s, base), "bar"); got != "hello" {
		t.Fatalf("base changed: %q", got)
	}
	nf := mount(t, s, d)
	i1, _ := nf.Stat(bg, P("foo"))
	i2, _ := mount(t, s, base).Stat(bg, P("foo"))
	if i1.Sys.(*Entry).Digest != i2.Sys.(*Entry).Digest {
		t.Error("an unchanged subtree changed digest")
	}
}
