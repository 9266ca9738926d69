package dir_test

import (
	"testing"
	"testing/fstest"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// nestedNamespace returns a namespace with memory mounts at the root, at "src",
// at "src/vendor/lib" (a mount nested inside a mount) and at "ref/main" (below a
// synthetic directory, read-only), each holding a few files.
func nestedNamespace(t *testing.T) *vfs.Namespace {
	t.Helper()
	mk := func(files ...string) vfs.Backend {
		b := memory.New()
		for _, f := range files {
			dirPart := ""
			if i := lastSlash(f); i >= 0 {
				dirPart = f[:i]
			}
			if dirPart != "" {
				must(t, vfstest.MkdirAll(bg, b, vfs.MustParse(dirPart), 0o755))
			}
			must(t, vfstest.WriteFile(bg, b, vfs.MustParse(f), []byte("content of "+f)))
		}
		return b
	}
	ns := vfs.NewNamespace()
	mounts := []struct {
		at    string
		b     vfs.Backend
		ro    bool
		files []string
	}{
		{".", nil, false, []string{"README.md", "docs/guide.md"}},
		{"src", nil, false, []string{"main.go", "vendor/keep.txt", "internal/x/y.go"}},
		{"src/vendor/lib", nil, false, []string{"lib.go", "sub/deep.go"}},
		{"ref/main", nil, true, []string{"old.go", "pkg/a.go"}},
	}
	for _, m := range mounts {
		must(t, ns.Mount(vfs.MustParse(m.at), mk(m.files...), vfs.MountOptions{ReadOnly: m.ro}))
	}
	return ns
}

// TestFSOverNestedNamespace runs testing/fstest.TestFS on the io/fs view of a Dir
// over a namespace with nested mounts, on a Sub that spans a nested mount, on a Sub
// inside one mount, and on a read-only Sub of the synthetic part.
func TestFSOverNestedNamespace(t *testing.T) {
	root, _ := dir.New(nestedNamespace(t))
	if err := fstest.TestFS(root.FS(),
		"README.md", "docs/guide.md", "src/main.go", "src/vendor/keep.txt",
		"src/internal/x/y.go", "src/vendor/lib/lib.go", "src/vendor/lib/sub/deep.go",
		"ref/main/old.go", "ref/main/pkg/a.go"); err != nil {
		t.Fatal(err)
	}
	src, err := root.Sub(bg, "src")
	must(t, err)
	if err := fstest.TestFS(src.FS(), "main.go", "vendor/keep.txt", "vendor/lib/lib.go", "vendor/lib/sub/deep.go"); err != nil {
		t.Fatal(err)
	}
	lib, err := src.Sub(bg, "vendor/lib/sub")
	must(t, err)
	if err := fstest.TestFS(lib.FS(), "deep.go"); err != nil {
		t.Fatal(err)
	}
	ref, err := root.ReadOnly().Sub(bg, "ref")
	must(t, err)
	if err := fstest.TestFS(ref.FS(), "main/old.go", "main/pkg/a.go"); err != nil {
		t.Fatal(err)
	}
	// The synthetic parent and the read-only mount refuse writes through the Dir.
	wantCode(t, root.WriteFile(bg, "ref/new.txt", []byte("x"), 0o644), vfs.CodeReadOnly)
	wantCode(t, root.WriteFile(bg, "ref/main/old.go", []byte("x"), 0o644), vfs.CodeReadOnly)
}

// TestDirOverNamespaceConformance runs the conformance suite through a Dir whose
// backend is a namespace: a memory mount at the root and a nested one below it, the
// Dir granted on the nested mount through a Child control. The view stores link
// targets verbatim (a test-only seam): below the tree's root the Dir refuses a
// climbing target and takes an absolute one as data, which the suite's one
// switch (Config.RejectsEscapingSymlinks) cannot describe; TestSymlinkRules checks
// that rule.
func TestDirOverNamespaceConformance(t *testing.T) {
	vfstest.TestBackend(t, vfstest.Config{
		New: func(t *testing.T) vfs.Backend {
			ns := vfs.NewNamespace()
			must(t, ns.Mount(vfs.Root, memory.New(), vfs.MountOptions{}))
			must(t, ns.Mount(vfs.MustParse("work/area"), memory.New(), vfs.MountOptions{}))
			_, ctl := dir.New(ns)
			child, err := ctl.Child(bg, "work/area")
			must(t, err)
			return dir.BackendWithVerbatimLinks(child.Dir())
		},
	})
}
