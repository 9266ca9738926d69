package dir_test

import (
	"io"
	"os"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestPolicyPathAllocs pins what enforcement costs with the default policy
// engine and no hooks: nothing beyond the same call without a policy, for a
// stat, an existence check, an open for reading, a create and write, a
// listing and a whole-file read; and a ReadFile of a memory file allocates
// once, its result, with or without a policy.
func TestPolicyPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	buf := make([]byte, 512)
	counts := func(d *dir.Dir) map[string]float64 {
		must(t, d.MkdirAll(bg, "a/b/c/d"))
		must(t, d.WriteFile(bg, "a/b/c/d/f", make([]byte, 100), 0o644))
		out := map[string]float64{}
		for name, fn := range map[string]func(){
			"Stat": func() {
				if _, err := d.Stat(bg, "a/b/c/d/f"); err != nil {
					t.Fatal(err)
				}
			},
			"Lstat": func() {
				if _, err := d.Lstat(bg, "a/b/c/d/f"); err != nil {
					t.Fatal(err)
				}
			},
			"Exists": func() {
				if ok, err := d.Exists(bg, "a/b/c/d/f"); !ok || err != nil {
					t.Fatal(ok, err)
				}
			},
			"Open, Read, Close": func() {
				h, err := d.Open(bg, "a/b/c/d/f", os.O_RDONLY, 0)
				must(t, err)
				if _, err := io.ReadFull(h, buf); err != io.ErrUnexpectedEOF {
					t.Fatal(err)
				}
				must(t, h.Close())
			},
			"create, Write, Close": func() {
				h, err := d.Open(bg, "a/b/c/d/g", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
				must(t, err)
				if _, err := h.Write(buf[:10]); err != nil {
					t.Fatal(err)
				}
				must(t, h.Close())
			},
			"ReadDir": func() {
				if _, err := d.ReadDir(bg, "a/b/c/d"); err != nil {
					t.Fatal(err)
				}
			},
			"ReadFile": func() {
				if data, err := d.ReadFile(bg, "a/b/c/d/f"); err != nil || len(data) != 100 {
					t.Fatal(len(data), err)
				}
			},
		} {
			out[name] = testing.AllocsPerRun(50, fn)
		}
		return out
	}
	plain, _ := dir.New(memory.New())
	policed, _ := dir.New(memory.New(), dir.WithPolicy(policy.Defaults()))
	without, with := counts(plain), counts(policed)
	for name, n := range without {
		if with[name] != n {
			t.Errorf("%s: %v allocations with the default policy, %v without", name, with[name], n)
		}
	}
	for _, c := range []struct {
		name string
		n    float64
	}{{"Stat", 0}, {"Lstat", 0}, {"Exists", 0}, {"ReadFile", 1}} {
		if with[c.name] != c.n {
			t.Errorf("%s with the default policy: %v allocations, want %v", c.name, with[c.name], c.n)
		}
	}
}

// TestPolicyDeepStatAliases: a Stat with a policy on memory answers from the
// status the backend keeps only where the path is canonical; a deep path
// through a symlink into a secret directory is refused however often it is
// asked (the backend's resolution cache answers the second time).
func TestPolicyDeepStatAliases(t *testing.T) {
	m := memory.New()
	host, _ := dir.New(m)
	must(t, host.MkdirAll(bg, "a/b/c/d/.ssh"))
	must(t, host.WriteFile(bg, "a/b/c/d/.ssh/id", []byte("k"), 0o600))
	must(t, host.WriteFile(bg, "a/b/c/d/ok", []byte("k"), 0o600))
	must(t, host.Symlink(bg, ".ssh", "a/b/c/d/k"))
	must(t, host.Symlink(bg, "a/b/c/d/.ssh", "x"))
	must(t, host.Symlink(bg, "a/b", "y"))
	d, _ := dir.New(m, dir.WithPolicy(policy.Defaults()))
	for range 3 {
		for _, p := range []string{"a/b/c/d/.ssh/id", "a/b/c/d/k/id", "x/id", "y/c/d/.ssh/id", "y/c/d/k/id", "y/c/d/k"} {
			if _, err := d.Stat(bg, p); vfs.CodeOf(err) != vfs.CodePermission {
				t.Errorf("Stat %s: %v, want fs_permission_denied", p, err)
			}
		}
		for _, p := range []string{"a/b/c/d/ok", "y/c/d/ok"} {
			if fi, err := d.Stat(bg, p); err != nil || fi.Name() != "ok" || fi.Size() != 1 {
				t.Errorf("Stat %s: %v %v", p, fi, err)
			}
		}
	}
}

// TestPolicyPathAllocsPhysical: over the physical backend, whose reads and
// listings resolve, decide and act in one call (the fused path), the default
// policy adds no allocation to an open and read, a ReadFile or a ReadDir.
func TestPolicyPathAllocsPhysical(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	root := t.TempDir()
	must(t, os.MkdirAll(root+"/a/b/c", 0o755))
	must(t, os.WriteFile(root+"/a/b/c/f", make([]byte, 100), 0o644))
	buf := make([]byte, 512)
	counts := func(opts ...dir.Option) map[string]float64 {
		b, err := physical.New(root)
		must(t, err)
		d, _ := dir.New(b, opts...)
		return map[string]float64{
			"Open, Read, Close": testing.AllocsPerRun(50, func() {
				h, err := d.Open(bg, "a/b/c/f", os.O_RDONLY, 0)
				must(t, err)
				if _, err := io.ReadFull(h, buf); err != io.ErrUnexpectedEOF {
					t.Fatal(err)
				}
				must(t, h.Close())
			}),
			"ReadFile": testing.AllocsPerRun(50, func() {
				if _, err := d.ReadFile(bg, "a/b/c/f"); err != nil {
					t.Fatal(err)
				}
			}),
			"ReadDir": testing.AllocsPerRun(50, func() {
				if _, err := d.ReadDir(bg, "a/b/c"); err != nil {
					t.Fatal(err)
				}
			}),
		}
	}
	without, with := counts(), counts(dir.WithPolicy(policy.Defaults()))
	for name, n := range without {
		if with[name] != n {
			t.Errorf("%s: %v allocations with the default policy, %v without", name, with[name], n)
		}
	}
}
