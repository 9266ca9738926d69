package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

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
)

// FUSEImpls returns the implementations of the FUSE comparison (issue 17): plain
// os on the host directory, and plain os on a capfs FUSE mount serving a Dir over
// the physical backend on that directory, without and with policy.Defaults().
// Each New mounts afresh on a new mount point; Close unmounts.
func FUSEImpls() []HostImpl {
	mount := func(opts ...dir.Option) func(root string) (HostTarget, error) {
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
			s, err := fuseexport.Mount(mp, d, fuseexport.Options{})
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
		{Name: FUSEMount, New: mount()},
		{Name: FUSEMountDefault, New: mount(dir.WithPolicy(policy.Defaults()))},
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
// copy-on-write overlay (fuseexport.Overlay) of a Dir with policy.Defaults()
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
		ov, err := fuseexport.NewOverlay(d.Backend(), upper)
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
