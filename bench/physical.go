package bench

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// HostTarget is the filesystem surface of the host-directory workloads, which
// measure capfs's physical backend beside plain os (the unconfined floor), os.Root
// and afero's BasePathFs over OsFs, each serving the same fresh directory under
// os.TempDir. Paths are slash-separated and relative to the target's root.
type HostTarget interface {
	// Open opens name for reading.
	Open(name string) (io.ReadCloser, error)
	// Create creates or truncates name for writing.
	Create(name string) (io.WriteCloser, error)
	// Stat returns the size of name, following a final symlink.
	Stat(name string) (int64, error)
	// ReadDir returns the number of entries of directory name, listed sorted with
	// their types: names and types only, no FileInfo (though os.Root, which cannot
	// stat an entry lazily, lstats every one).
	ReadDir(name string) (int, error)
	// Rename moves from to to, replacing a file at to.
	Rename(from, to string) error
	// Close releases what the target holds (a root handle); the directory stays.
	Close() error
}

// HostImpl is one implementation measured over a host directory.
type HostImpl struct {
	Name string // column name
	// Layered marks a dir.Dir over a backend, measured only on the workloads whose
	// Layered is set.
	Layered bool
	// ReadOnly marks a target that refuses writes (measured on reads only).
	ReadOnly bool
	// New serves the existing host directory root.
	New func(root string) (HostTarget, error)
}

// Names of the host-directory implementations, as the table prints them.
const (
	HostOS           = "os"
	HostOSRoot       = "os.Root"
	HostAferoBase    = "afero BasePathFs"
	PhysicalOpenat2  = "physical openat2"
	PhysicalPortable = "physical portable"
	PhysicalDir      = "Dir over physical openat2"
	// PhysicalDirPolicy is a Dir with policy.Defaults(): a custom policy, so each
	// call resolves its path to the canonical location before deciding and acting.
	PhysicalDirPolicy = "Dir (default policy) over physical openat2"
	// PhysicalDirReadOnly is PhysicalDirPolicy over vfs.ReadOnly of the
	// backend, and PhysicalDirSub over a Namespace's Sub of it: wrappers that
	// must keep the backend's fused calls (issue 28).
	PhysicalDirReadOnly = "Dir (default policy) over ReadOnly(physical)"
	PhysicalDirSub      = "Dir (default policy) over a Namespace Sub of physical"
	// PhysicalFused is the physical backend deciding with policy.Defaults() on the
	// canonical path through its fused ResolveOpen and ResolveStat, no Dir.
	PhysicalFused = "physical openat2, fused canonical decision"
)

// HostPeers returns the implementations capfs's physical backend is compared with:
// plain os on absolute host paths (no confinement at all: the floor), os.Root, and
// afero's BasePathFs over OsFs (string-prefix confinement, which symlinks escape).
func HostPeers() []HostImpl {
	return []HostImpl{
		{Name: HostOS, New: func(root string) (HostTarget, error) { return osTarget{root: root}, nil }},
		{Name: HostOSRoot, New: newRootTarget},
		{Name: HostAferoBase, New: func(root string) (HostTarget, error) {
			base := afero.NewBasePathFs(afero.NewOsFs(), root)
			return aferoHostTarget{AferoTarget{Fs: base}, afero.NewIOFS(base)}, nil
		}},
	}
}

// HostImpls returns the peers followed by capfs's physical backend with each
// resolver the kernel offers (the openat2 one is left out where openat2 is missing
// or refused) and a dir.Dir over the openat2 one.
func HostImpls() []HostImpl { return append(HostPeers(), physicalImpls()...) }

// HostWorkload is one measured host-directory job. One benchmark iteration is one
// operation.
type HostWorkload struct {
	Name string
	// Layered says the workload is also measured through a dir.Dir.
	Layered bool
	setup   func(root string) error
	run     func(b *hostB, t HostTarget, root string)
}

// Shapes of the host-directory workloads.
const (
	// ListSize is the number of entries of the listed directory.
	ListSize = 1000
	// ShallowFile is the file at depth 1: one path component, beneath the root.
	ShallowFile = "f4k"
	// DeepDepth is the number of path components of DeepFile.
	DeepDepth = 8
)

// DeepFile is the file at depth 8: seven directories and the file, eight path
// components beneath the root.
var DeepFile = func() string {
	var s []string
	for i := 1; i < DeepDepth; i++ {
		s = append(s, fmt.Sprintf("d%d", i))
	}
	return strings.Join(append(s, "f4k"), "/")
}()

// Names of the workloads the goals refer to.
const (
	ReadDeep = "open+read 4 KiB, depth 8"
	StatDeep = "stat, depth 8"
)

// HostWorkloads returns the host-directory workloads in table order.
func HostWorkloads() []HostWorkload {
	return []HostWorkload{
		{Name: "open+read 4 KiB, depth 1", setup: setupFiles, run: readLoop(ShallowFile)},
		{Name: ReadDeep, Layered: true, setup: setupFiles, run: readLoop(DeepFile)},
		{Name: "stat, depth 1", setup: setupFiles, run: statLoop(ShallowFile)},
		{Name: StatDeep, Layered: true, setup: setupFiles, run: statLoop(DeepFile)},
		{Name: "create+write 4 KiB+close", setup: setupCreate, run: createLoop},
		{Name: "ReadDir of 1,000 entries", Layered: true, setup: setupList, run: listLoop},
		{Name: "rename (back and forth)", setup: setupRename, run: renameLoop},
	}
}

// Goal is a performance target for the physical backend: on Workload, peer time /
// capfs time must be at least MinRatio.
type Goal struct {
	Workload string
	Peer     string
	MinRatio float64
	Text     string // the target as stated
}

// HostGoals returns the targets the physical backend is held to.
func HostGoals() []Goal {
	return []Goal{
		{ReadDeep, HostOS, 1, "open+read at depth 8 no slower than plain os.Open"},
		{ReadDeep, HostOS, 1 / 1.2, "open+read at depth 8 (through a Dir with a policy too) within 1.2× of plain os.Open"},
		{StatDeep, HostOS, 1 / 2.5, "stat at depth 8 within 2.5× of os.Stat"},
		{StatDeep, HostOSRoot, 4, "stat at depth 8 at least 4× faster than os.Root.Stat"},
	}
}

// Setup makes the directory w runs in: a fresh directory under os.TempDir, to be
// shared by every sample of w and removed by the caller. The workloads that write
// leave it as they found it.
func (w HostWorkload) Setup() (root string, err error) {
	root, err = os.MkdirTemp("", "capfs-bench-")
	if err != nil {
		return "", err
	}
	if err := w.setup(root); err != nil {
		os.RemoveAll(root)
		return "", err
	}
	return root, nil
}

// CPUMetric names the extra metric Run reports: CPU time (user and system) of the
// benchmark's OS thread per operation, over the timed part only. Unlike wall
// time, it leaves out the time the thread waits for a CPU, which on a shared
// machine is most of the noise. It is absent where the platform cannot tell.
const CPUMetric = "cpu-ns/op"

// Run runs b.N operations of w against im serving root, a directory made by
// w.Setup, on a goroutine locked to its OS thread so that thread's CPU time is
// the operations' (see CPUMetric). Opening and closing the target are not timed.
func (w HostWorkload) Run(b *testing.B, im HostImpl, root string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.StopTimer()
	t, err := im.New(root)
	must(b, err)
	defer t.Close()
	h := &hostB{B: b}
	h.StartTimer()
	w.run(h, t, root)
	h.StopTimer()
	if h.cpu >= 0 && threadCPU() >= 0 {
		b.ReportMetric(float64(h.cpu)/float64(b.N), CPUMetric)
	}
}

// hostB is a testing.B whose timer also accumulates the thread's CPU time.
type hostB struct {
	*testing.B
	running  bool
	cpu      time.Duration
	cpuStart time.Duration
}

// StartTimer starts both clocks.
func (h *hostB) StartTimer() {
	if !h.running {
		h.running = true
		h.cpuStart = threadCPU()
		h.B.StartTimer()
	}
}

// StopTimer stops both clocks.
func (h *hostB) StopTimer() {
	if h.running {
		h.B.StopTimer()
		h.cpu += threadCPU() - h.cpuStart
		h.running = false
	}
}

func host(root, name string) string { return filepath.Join(root, filepath.FromSlash(name)) }

func writeHost(root, name string, data []byte) error {
	return os.WriteFile(host(root, name), data, 0o644)
}

func setupFiles(root string) error {
	if err := os.MkdirAll(host(root, DeepFile[:strings.LastIndexByte(DeepFile, '/')]), 0o755); err != nil {
		return err
	}
	if err := writeHost(root, ShallowFile, fileData); err != nil {
		return err
	}
	return writeHost(root, DeepFile, fileData)
}

func setupCreate(root string) error { return os.Mkdir(host(root, "w"), 0o755) }

// listName is the name of the i-th entry of the listed directory.
func listName(i int) string { return fmt.Sprintf("list/e%04d", i) }

func setupList(root string) error {
	if err := os.Mkdir(host(root, "list"), 0o755); err != nil {
		return err
	}
	for i := 0; i < ListSize; i++ {
		f, err := os.Create(host(root, listName(i)))
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func setupRename(root string) error {
	if err := os.Mkdir(host(root, "r"), 0o755); err != nil {
		return err
	}
	return writeHost(root, "r/a", fileData)
}

// readFull reads r to EOF into buf, which must be larger than what r holds.
func readFull(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, fmt.Errorf("more than %d bytes", len(buf)-1)
}

// readOnce opens name, reads it to the end into buf and closes it.
func readOnce(t HostTarget, name string, buf []byte) (int, error) {
	r, err := t.Open(name)
	if err != nil {
		return 0, err
	}
	n, err := readFull(r, buf)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func readLoop(name string) func(b *hostB, t HostTarget, root string) {
	return func(b *hostB, t HostTarget, _ string) {
		buf := make([]byte, FileSize+1)
		b.SetBytes(FileSize)
		for i := 0; i < b.N; i++ {
			if n, err := readOnce(t, name, buf); n != FileSize || err != nil {
				b.Fatalf("read %s: %d bytes, %v", name, n, err)
			}
		}
	}
}

func statLoop(name string) func(b *hostB, t HostTarget, root string) {
	return func(b *hostB, t HostTarget, _ string) {
		for i := 0; i < b.N; i++ {
			if size, err := t.Stat(name); size != FileSize || err != nil {
				b.Fatalf("stat %s: %d, %v", name, size, err)
			}
		}
	}
}

// createOnce creates name, writes data and closes it.
func createOnce(t HostTarget, name string, data []byte) error {
	w, err := t.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// createLoop creates a new file per operation, so every operation creates rather
// than truncates, in a directory of its own that it removes afterwards (untimed).
func createLoop(b *hostB, t HostTarget, root string) {
	b.StopTimer()
	dir, err := os.MkdirTemp(host(root, "w"), "run")
	must(b.B, err)
	defer os.RemoveAll(dir)
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("w/%s/f%d", filepath.Base(dir), i)
	}
	b.SetBytes(FileSize)
	b.StartTimer()
	for _, n := range names {
		if err := createOnce(t, n, fileData); err != nil {
			b.Fatalf("create %s: %v", n, err)
		}
	}
	b.StopTimer()
	if fi, err := os.Stat(host(root, names[len(names)-1])); err != nil || fi.Size() != FileSize {
		b.Fatalf("the last file written is not on disk: %v", err)
	}
}

func listLoop(b *hostB, t HostTarget, _ string) {
	for i := 0; i < b.N; i++ {
		if n, err := t.ReadDir("list"); n != ListSize || err != nil {
			b.Fatalf("readdir: %d entries, %v", n, err)
		}
	}
}

// renameLoop renames r/a to r/b and back, one rename per operation.
func renameLoop(b *hostB, t HostTarget, root string) {
	names := [2]string{"r/a", "r/b"}
	for i := 0; i < b.N; i++ {
		if err := t.Rename(names[i&1], names[1-i&1]); err != nil {
			b.Fatalf("rename %s: %v", names[i&1], err)
		}
	}
	b.StopTimer()
	if fi, err := os.Stat(host(root, names[b.N&1])); err != nil || fi.Size() != FileSize {
		b.Fatalf("after %d renames the file is not at %s: %v", b.N, names[b.N&1], err)
	}
	if b.N&1 == 1 {
		must(b.B, os.Rename(host(root, names[1]), host(root, names[0])))
	}
}

// osTarget is plain os on absolute host paths: no confinement at all.
type osTarget struct{ root string }

func (t osTarget) path(name string) string { return t.root + "/" + name }

func (t osTarget) Open(name string) (io.ReadCloser, error) { return os.Open(t.path(name)) }

func (t osTarget) Create(name string) (io.WriteCloser, error) {
	return os.OpenFile(t.path(name), createFlags, 0o644)
}

func (t osTarget) Stat(name string) (int64, error) {
	fi, err := os.Stat(t.path(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (t osTarget) ReadDir(name string) (int, error) {
	ents, err := os.ReadDir(t.path(name))
	return len(ents), err
}

func (t osTarget) Rename(from, to string) error { return os.Rename(t.path(from), t.path(to)) }

func (t osTarget) Close() error { return nil }

// rootTarget is os.Root.
type rootTarget struct {
	r   *os.Root
	rfs fs.ReadDirFS
}

func newRootTarget(root string) (HostTarget, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	return rootTarget{r: r, rfs: r.FS().(fs.ReadDirFS)}, nil
}

func (t rootTarget) Open(name string) (io.ReadCloser, error) { return t.r.Open(name) }

func (t rootTarget) Create(name string) (io.WriteCloser, error) {
	return t.r.OpenFile(name, createFlags, 0o644)
}

func (t rootTarget) Stat(name string) (int64, error) {
	fi, err := t.r.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// ReadDir lists through Root.FS, which sorts, as os.ReadDir does.
func (t rootTarget) ReadDir(name string) (int, error) {
	ents, err := t.rfs.ReadDir(name)
	return len(ents), err
}

func (t rootTarget) Rename(from, to string) error { return t.r.Rename(from, to) }

func (t rootTarget) Close() error { return t.r.Close() }

// aferoHostTarget is afero's BasePathFs over OsFs. It lists through afero.IOFS,
// which reads typed entries without a stat each (afero.ReadDir would lstat all of
// them) and sorts them.
type aferoHostTarget struct {
	AferoTarget
	iofs afero.IOFS
}

func (t aferoHostTarget) ReadDir(name string) (int, error) {
	ents, err := t.iofs.ReadDir(name)
	return len(ents), err
}

func (t aferoHostTarget) Rename(from, to string) error { return t.Fs.Rename(from, to) }

func (t aferoHostTarget) Close() error { return nil }
