//go:build linux

package physical

import (
	"testing"

	"github.com/capfs/capfs/vfs"
)

// resolvers are the two resolvers every test runs with.
var resolvers = []struct {
	name string
	mode ResolverMode
}{
	{"openat2", ResolverOpenat2},
	{"portable", ResolverPortable},
}

// newTestFS returns a backend over a fresh temporary directory, closed at the end of
// t. A backend forced to openat2 where the kernel lacks it skips t.
func newTestFS(t *testing.T, opts ...Option) *FS {
	t.Helper()
	return newAt(t, t.TempDir(), opts...)
}

// newAt returns a backend over dir, closed at the end of t.
func newAt(t *testing.T, dir string, opts ...Option) *FS {
	t.Helper()
	f, err := New(dir, opts...)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodeNotSupported {
			t.Skipf("openat2 is not available here: %v", err)
		}
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
