//go:build linux

package fuseexport

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// rawNames lists directory p with getdents64 itself, "." and ".." included
// (os.ReadDir leaves them out), sorted.
func rawNames(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	buf := make([]byte, 1<<16)
	for {
		n, err := syscall.ReadDirent(int(f.Fd()), buf)
		if err != nil {
			t.Fatalf("getdents %s: %v", p, err)
		}
		if n == 0 {
			break
		}
		for b := buf[:n]; len(b) > 0; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			name := b[19:reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			names = append(names, string(name))
			b = b[reclen:]
		}
	}
	slices.Sort(names)
	return names
}

// TestListingHidesWhatLookupRefuses: the mount lists what the Dir's
// ReadDirVisible lists, "." and ".." included: no secret's name (which the
// Dir's Walk shows, and a lookup answers absent, so `ls -la` showed
// "-????????? .env"), no secret directory, and every name it lists can be
// looked up; with and without READDIRPLUS, with the openat2 and the portable
// resolvers. Before the fix, the listing showed .env and left out "." and "..".
// A name no path can hold (sub/a\b) is not listed, and the host is told of it
// once (Options.Unaddressable); before, nobody was.
func TestListingHidesWhatLookupRefuses(t *testing.T) {
	for _, mode := range []physical.ResolverMode{physical.ResolverAuto, physical.ResolverPortable} {
		for _, plus := range []bool{false, true} {
			name := map[physical.ResolverMode]string{physical.ResolverAuto: "openat2", physical.ResolverPortable: "portable"}[mode]
			if plus {
				name += "/readdirplus"
			}
			t.Run(name, func(t *testing.T) { listingHides(t, mode, plus) })
		}
	}
}

func listingHides(t *testing.T, mode physical.ResolverMode, plus bool) {
	host := t.TempDir()
	for name, body := range map[string]string{".env": "TOKEN=1", ".ssh/id_rsa": "KEY", "main.go": "package main", "sub/key.pem": "PEM", "sub/x.go": "x", `sub/a\b`: "odd"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pb, err := physical.New(host, physical.WithResolver(mode))
	if err != nil {
		t.Skipf("physical backend: %v", err)
	}
	t.Cleanup(func() { pb.Close() })
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	var mu sync.Mutex
	var told []string
	mp, _ := mountT(t, d, Options{ReadDirPlus: plus, Unaddressable: func(dir vfs.Path, u vfs.Unaddressable) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, dir.String()+": "+u.String())
	}})

	for _, c := range []struct {
		dir  string
		want []string
	}{
		{".", []string{".", "..", "main.go", "sub"}},
		{"sub", []string{".", "..", "x.go"}},
	} {
		got := rawNames(t, filepath.Join(mp, c.dir))
		if !slices.Equal(got, c.want) {
			t.Errorf("getdents %s = %q; want %q", c.dir, got, c.want)
		}
		for _, n := range got {
			if _, err := os.Lstat(filepath.Join(mp, c.dir, n)); err != nil {
				t.Errorf("%s/%s is listed, and lstat fails: %v", c.dir, n, err)
			}
		}
		// The one rule: what the Dir itself lists for a view.
		ents, err := d.ReadDirVisible(bg, c.dir)
		if err != nil {
			t.Fatal(err)
		}
		dirNames := []string{".", ".."}
		for _, e := range ents {
			dirNames = append(dirNames, e.Name())
		}
		slices.Sort(dirNames)
		if !slices.Equal(got, dirNames) {
			t.Errorf("mount lists %q, the Dir %q", got, dirNames)
		}
	}
	// sub\a\b cannot be looked up, so it is not listed: the host is told,
	// once however often sub is listed.
	rawNames(t, filepath.Join(mp, "sub"))
	mu.Lock()
	defer mu.Unlock()
	if want := []string{`sub: "a\\b": contains a backslash`}; !slices.Equal(told, want) {
		t.Errorf("told of %q; want %q", told, want)
	}
}
