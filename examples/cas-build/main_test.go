//go:build linux

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/dir"
)

func TestBuildTwice(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	src := filepath.Join(tmp, "project")
	if err := writeProject(src); err != nil {
		t.Fatal(err)
	}
	st, err := cas.OpenStore(filepath.Join(tmp, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r1, err := buildOnce(ctx, st, src, filepath.Join(tmp, "run1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := buildOnce(ctx, st, src, filepath.Join(tmp, "run2"))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Input != r2.Input || r1.Output != r2.Output {
		t.Fatalf("digests differ between runs: %+v vs %+v", r1, r2)
	}
	if r1.Materialized.Extracted != 4 || r2.Materialized.Extracted != 0 || r2.Materialized.Linked != 4 {
		t.Errorf("link cache: first %+v, second %+v", r1.Materialized, r2.Materialized)
	}
	if r1.NewBlobs == 0 || r2.NewBlobs != 0 {
		t.Errorf("new blobs: first run %d, second run %d (want >0, then 0)", r1.NewBlobs, r2.NewBlobs)
	}
	// The output tree holds the build's results.
	f, err := st.Mount(ctx, r1.Output, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(f)
	lines, err := d.ReadFile(ctx, "lines")
	if err != nil || strings.TrimSpace(string(lines)) != "6" {
		t.Errorf("lines = %q, %v", lines, err)
	}
	up, err := d.ReadFile(ctx, "a.txt.upper")
	if err != nil || string(up) != "ALPHA\nBETA\n" {
		t.Errorf("a.txt.upper = %q, %v", up, err)
	}
	var out bytes.Buffer
	if err := run(ctx, &out, "", "", 2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "run 2: 4 files linked, 0 extracted into the link cache, 0 new blobs") {
		t.Errorf("output:\n%s", out.String())
	}
}
