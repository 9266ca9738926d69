//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/overlay"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/policy"
)

// Names of the FUSE comparison's implementations.
const (
	FUSENative       = "native directory (os)"
	FUSEMount        = "capfs FUSE mount (Dir over physical)"
	FUSEMountDefault = "capfs FUSE mount (Dir, default policy, over physical)"
	FUSEMountPT      = "capfs FUSE mount (Dir over physical, passthrough + readdirplus)"
)

// FUSEImpls returns the implementations of the FUSE comparison (issue 17): plain
// os on the host directory, and plain os on a capfs FUSE mount serving a Dir over
// the physical backend on that directory, without and with policy.Defaults(),
// and with the options a lazy run mounts its layer with (Passthrough: the
// kernel reads and writes the host files itself; ReadDirPlus). Each New
// mounts afresh on a new mount point; Close unmounts.
func FUSEImpls() []HostImpl {
	mount := func(fo fuseexport.Options, opts ...dir.Option) func(root string) (HostTarget, error) {
		return func(root string) (HostTarget, error) {
			pb, err := physical.New(root)
			if err != nil {
				return nil, err
			}
			mp, err := os.MkdirTemp("", "capfs-bench-mnt-")
			if err != nil {
				pb.Close()
				return nil, err
			}
			d, _ := dir.New(pb, opts...)
			s, err := fuseexport.Mount(mp, d, fo)
			if err != nil {
				pb.Close()
				os.Remove(mp)
				return nil, err
			}
			return &fuseTarget{osTarget: osTarget{root: mp}, s: s, pb: pb, mp: mp}, nil
		}
	}
	return []HostImpl{
		{Name: FUSENative, New: func(root string) (HostTarget, error) { return osTarget{root: root}, nil }},
		{Name: FUSEMount, New: mount(fuseexport.Options{})},
		{Name: FUSEMountDefault, New: mount(fuseexport.Options{}, dir.WithPolicy(policy.Defaults()))},
		{Name: FUSEMountPT, New: mount(fuseexport.Options{Passthrough: true, ReadDirPlus: true})},
	}
}

type fuseTarget struct {
	osTarget
	s  *fuseexport.Server
	pb *physical.FS
	mp string
}

func (t *fuseTarget) Close() error {
	err := t.s.Close(5 * time.Second)
	t.pb.Close()
	os.Remove(t.mp)
	return err
}

// FUSETable runs every host-directory workload (HostWorkloads: stat, open+read
// 4 KiB, create+write, ReadDir of 1,000 entries, rename) on the FUSE comparison's
// implementations, count rounds each (the median is kept), and writes a Markdown
// table of wall-clock time per operation with each mount's slowdown against the
// native directory (mount time / native time: 1× is native speed). Wall time, not
// the benchmark thread's CPU time: the work of a FUSE request is done by the
// server's threads. It needs FUSE (fuseexport.Available).
func FUSETable(out, progress io.Writer, count int, benchtime time.Duration, setBenchtime func(string) error) error {
	if err := fuseexport.Available(); err != nil {
		return err
	}
	impls := FUSEImpls()
	fmt.Fprintf(out, "| workload (wall time per op) | %s |", impls[0].Name)
	for _, im := range impls[1:] {
		fmt.Fprintf(out, " %s | slowdown |", im.Name)
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, "|---|---:|")
	for range impls[1:] {
		fmt.Fprint(out, "---:|---:|")
	}
	fmt.Fprintln(out)
	for _, w := range HostWorkloads() {
		root, err := w.Setup()
		if err != nil {
			return err
		}
		med := make([]float64, len(impls))
		for i, im := range impls {
			var samples []float64
			for range count {
				if err := setBenchtime(benchtime.String()); err != nil {
					return err
				}
				var runErr error
				r := testing.Benchmark(func(b *testing.B) {
					defer func() {
						if b.Failed() {
							runErr = fmt.Errorf("%s on %s failed", w.Name, im.Name)
						}
					}()
					w.Run(b, im, root)
				})
				if runErr != nil || r.N == 0 {
					os.RemoveAll(root)
					return fmt.Errorf("%s on %s failed", w.Name, im.Name)
				}
				samples = append(samples, float64(r.T.Nanoseconds())/float64(r.N))
			}
			slices.Sort(samples)
			med[i] = samples[len(samples)/2]
			fmt.Fprintf(progress, "fuse: %-28s %-52s %s/op\n", w.Name, im.Name, time.Duration(med[i]))
		}
		os.RemoveAll(root)
		fmt.Fprintf(out, "| %s | %s |", w.Name, fmtNs(med[0]))
		for i := range impls[1:] {
			fmt.Fprintf(out, " %s | %.1f× |", fmtNs(med[i+1]), med[i+1]/med[0])
		}
		fmt.Fprintln(out)
	}
	return nil
}

func fmtNs(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%.0f ns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.2f ms", ns/1e6)
}

// FUSEStartTable measures what a lazy sandbox pays before its command starts,
// on Go's source tree (GoSrcRepo's work tree) and on an empty directory: a
// copy-on-write overlay (overlay.Overlay) of a Dir with policy.Defaults()
// over the physical backend, mounted, its root listed once, and unmounted;
// beside it, a materialize.Checkout of the same Dir (what a run without --lazy
// does first). The median of count rounds of each is printed with the tree /
// empty ratio: a lazy start that does not grow with the tree is near 1×.
func FUSEStartTable(out, progress io.Writer, count int) error {
	if err := fuseexport.Available(); err != nil {
		return err
	}
	_, goTree, err := GoSrcRepo()
	if err != nil {
		return err
	}
	empty, err := os.MkdirTemp("", "capfs-bench-empty-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(empty)
	lazy := func(root string) error {
		pb, err := physical.New(root)
		if err != nil {
			return err
		}
		defer pb.Close()
		d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
		upper, err := os.MkdirTemp("", "capfs-bench-upper-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(upper)
		mp, err := os.MkdirTemp("", "capfs-bench-mnt-")
		if err != nil {
			return err
		}
		defer os.Remove(mp)
		ov, err := overlay.NewOverlay(d.Backend(), upper)
		if err != nil {
			return err
		}
		defer ov.Close()
		view, _ := dir.New(ov)
		s, err := fuseexport.Mount(mp, view, fuseexport.Options{})
		if err != nil {
			return err
		}
		if _, err := os.ReadDir(mp); err != nil {
			s.Close(time.Second)
			return err
		}
		return s.Close(5 * time.Second)
	}
	checkout := func(root string) error {
		pb, err := physical.New(root)
		if err != nil {
			return err
		}
		defer pb.Close()
		d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
		t, err := materialize.Checkout(context.Background(), d, materialize.Options{})
		if err != nil {
			return err
		}
		return t.Close()
	}
	median := func(fn func(string) error, root string) (time.Duration, error) {
		var ds []time.Duration
		for range count {
			start := time.Now()
			if err := fn(root); err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2], nil
	}
	fmt.Fprintln(out, "| start-up (median) | empty directory | Go source tree | tree / empty |")
	fmt.Fprintln(out, "|---|---:|---:|---:|")
	for _, row := range []struct {
		name string
		fn   func(string) error
	}{{"lazy: overlay + FUSE mount + list root + unmount", lazy}, {"checkout (materialize.Checkout + Close)", checkout}} {
		e, err := median(row.fn, empty)
		if err != nil {
			return err
		}
		g, err := median(row.fn, goTree)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "fuse start: %-50s empty %v, Go tree %v\n", row.name, e, g)
		fmt.Fprintf(out, "| %s | %s | %s | %.2f× |\n", row.name, fmtNs(float64(e)), fmtNs(float64(g)), float64(g)/float64(e))
	}
	return nil
}

// BuildSources is the number of C files of FUSEBuildTable's generated project.
const BuildSources = 200

// writeCProject writes a plain-Makefile C project of BuildSources files, each
// including a shared header, into root.
func writeCProject(root string) error {
	hdr := "#ifndef COMMON_H\n#define COMMON_H\nint helper(int);\n#define SCALE 3\n#endif\n"
	if err := os.WriteFile(root+"/common.h", []byte(hdr), 0o644); err != nil {
		return err
	}
	var objs []string
	mainSrc := "#include <stdio.h>\n#include \"common.h\"\n"
	call := ""
	for i := range BuildSources {
		src := fmt.Sprintf("#include \"common.h\"\nstatic int table%d[64];\nint f%d(int x) {\n\tfor (int i = 0; i < 64; i++) table%d[i] = i * SCALE + x;\n\tint s = 0;\n\tfor (int i = 0; i < 64; i++) s += table%d[i] %% (i + 1);\n\treturn s + %d;\n}\n", i, i, i, i, i)
		if err := os.WriteFile(fmt.Sprintf("%s/f%03d.c", root, i), []byte(src), 0o644); err != nil {
			return err
		}
		objs = append(objs, fmt.Sprintf("f%03d.o", i))
		mainSrc += fmt.Sprintf("int f%d(int);\n", i)
		call += fmt.Sprintf("\ts += f%d(%d);\n", i, i)
	}
	mainSrc += "int helper(int x) { return x; }\nint main(void) {\n\tint s = 0;\n" + call + "\tprintf(\"%d\\n\", s);\n\treturn 0;\n}\n"
	if err := os.WriteFile(root+"/main.c", []byte(mainSrc), 0o644); err != nil {
		return err
	}
	mk := "CFLAGS = -O1\nOBJS = main.o " + strings.Join(objs, " ") + "\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n%.o: %.c common.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\nclean:\n\trm -f prog $(OBJS)\n"
	return os.WriteFile(root+"/Makefile", []byte(mk), 0o644)
}

// FUSEBuildTable builds a generated C project (BuildSources files, a plain
// Makefile, `make -j2` from clean) three ways, count rounds each, median kept:
// on the host directory itself; in a capfs FUSE mount of a Dir (default policy)
// over that directory; and in a lazy sandbox's view, a mount of the
// copy-on-write overlay of the pristine project (objects land in a fresh upper
// directory each round). It prints wall time and the ratio to the plain build.
// It needs FUSE, make and a C compiler.
func FUSEBuildTable(out, progress io.Writer, count int) error {
	if err := fuseexport.Available(); err != nil {
		return err
	}
	for _, tool := range []string{"make", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed", tool)
		}
	}
	proj, err := os.MkdirTemp("", "capfs-bench-cproj-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(proj)
	if err := writeCProject(proj); err != nil {
		return err
	}
	makeIn := func(dir string, args ...string) error {
		c := exec.Command("make", append([]string{"-s"}, args...)...)
		c.Dir = dir
		if b, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("make %v in %s: %v: %s", args, dir, err, b)
		}
		return nil
	}
	mountDir := func(d *dir.Dir, fn func(mp string) error) error {
		mp, err := os.MkdirTemp("", "capfs-bench-mnt-")
		if err != nil {
			return err
		}
		defer os.Remove(mp)
		s, err := fuseexport.Mount(mp, d, fuseexport.Options{})
		if err != nil {
			return err
		}
		ferr := fn(mp)
		return errors.Join(ferr, s.Close(5*time.Second))
	}
	type mode struct {
		name  string
		round func() (time.Duration, error)
	}
	timed := func(dir string) (time.Duration, error) {
		start := time.Now()
		err := makeIn(dir, "-j2")
		return time.Since(start), err
	}
	modes := []mode{
		{"plain make -j2 on the host directory", func() (time.Duration, error) {
			if err := makeIn(proj, "clean"); err != nil {
				return 0, err
			}
			return timed(proj)
		}},
		{"make -j2 in a capfs FUSE mount (Dir, default policy, over physical)", func() (time.Duration, error) {
			if err := makeIn(proj, "clean"); err != nil {
				return 0, err
			}
			pb, err := physical.New(proj)
			if err != nil {
				return 0, err
			}
			defer pb.Close()
			d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
			var t time.Duration
			err = mountDir(d, func(mp string) error {
				var err error
				t, err = timed(mp)
				return err
			})
			return t, err
		}},
		{"make -j2 in a lazy view (overlay of the pristine tree, mounted)", func() (time.Duration, error) {
			if err := makeIn(proj, "clean"); err != nil {
				return 0, err
			}
			pb, err := physical.New(proj)
			if err != nil {
				return 0, err
			}
			defer pb.Close()
			src, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
			upper, err := os.MkdirTemp("", "capfs-bench-upper-")
			if err != nil {
				return 0, err
			}
			defer os.RemoveAll(upper)
			ov, err := overlay.NewOverlay(src.Backend(), upper)
			if err != nil {
				return 0, err
			}
			defer ov.Close()
			view, _ := dir.New(ov, dir.WithPolicy(policy.Defaults()))
			var t time.Duration
			err = mountDir(view, func(mp string) error {
				var err error
				t, err = timed(mp)
				return err
			})
			return t, err
		}},
	}
	samples := make([][]time.Duration, len(modes))
	for r := range count {
		for i, m := range modes { // interleaved rounds: load from elsewhere hits every mode alike
			d, err := m.round()
			if err != nil {
				return err
			}
			fmt.Fprintf(progress, "fuse build: round %d %-70s %v\n", r+1, m.name, d.Round(time.Millisecond))
			samples[i] = append(samples[i], d)
		}
	}
	res := make([]time.Duration, len(modes))
	for i := range modes {
		slices.Sort(samples[i])
		res[i] = samples[i][len(samples[i])/2]
	}
	fmt.Fprintf(out, "| build of %d C files, make -j2 from clean (median of %d) | wall time | / plain |\n|---|---:|---:|\n", BuildSources+1, count)
	for i, m := range modes {
		fmt.Fprintf(out, "| %s | %.2f s | %.2f× |\n", m.name, res[i].Seconds(), float64(res[i])/float64(res[0]))
	}
	return nil
}
