package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/vfs"
)

// GitreeFixture is what the git revision workloads run on: the Go source
// repository of GoSrcRepo and what its HEAD holds, as the git CLI lists it.
type GitreeFixture struct {
	Repo     string   // bare git directory
	WorkTree string   // the committed copy of GOROOT/src
	Paths    int      // leaves of HEAD's tree (files, symlinks, submodules)
	BlobIDs  []string // one blob id per file or symlink, in ls-tree order (ids repeat for equal content)
	Bytes    int64    // total size of those blobs
}

// NewGitreeFixture builds (or reuses) the Go source repository and lists HEAD with
// git ls-tree -r -l.
func NewGitreeFixture() (*GitreeFixture, error) {
	repo, work, err := GoSrcRepo()
	if err != nil {
		return nil, err
	}
	return gitreeFixtureAt(repo, work)
}

func gitreeFixtureAt(repo, work string) (*GitreeFixture, error) {
	cmd := exec.Command("git", "--git-dir="+repo, "ls-tree", "-r", "-l", "-z", "HEAD")
	cmd.Env = GitEnv()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-tree: %w", err)
	}
	fx := &GitreeFixture{Repo: repo, WorkTree: work}
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "<mode> SP <type> SP <id> SP+ <size> TAB <path>"
		meta, _, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("git ls-tree: odd record %q", rec)
		}
		fx.Paths++
		if f[1] != "blob" {
			continue
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: odd size in %q", rec)
		}
		fx.BlobIDs = append(fx.BlobIDs, f[2])
		fx.Bytes += size
	}
	return fx, nil
}

// GitreeImpl is one way of doing a git revision workload: capfs's gitree backend
// or the git CLI peer it is measured against.
type GitreeImpl struct {
	Name string // column name: the Go code's description, or the peer's command line
	Peer bool
	// Run runs b.N iterations of the workload. Every iteration starts cold for
	// capfs (a fresh gitree.Open, so no tree or object is cached) as it does for
	// the peer's new process; the page cache is warm for both.
	Run func(b *testing.B, fx *GitreeFixture)
}

// GitreeWorkload is one git revision workload with its implementations, capfs's
// first.
type GitreeWorkload struct {
	Name  string
	Impls []GitreeImpl
	// Target is the ratio capfs time / peer time the issue asks not to exceed
	// (0: none).
	Target float64
}

// GitreeWorkloads returns the workloads of issue 4's benchmark: listing every
// path, reading every blob and checking the whole tree out into a directory. The
// parallel variants use GOMAXPROCS goroutines over one FS; the peers
// git ls-tree and git cat-file are single-threaded, git archive | tar is a
// two-process pipeline.
func GitreeWorkloads() []GitreeWorkload {
	workers := runtime.GOMAXPROCS(0)
	par := fmt.Sprintf("gitree, %d goroutines", workers)
	return []GitreeWorkload{
		{Name: "list every path", Target: 3, Impls: []GitreeImpl{
			{Name: "gitree walk", Run: gitreeList},
			{Name: "git ls-tree -r --name-only HEAD", Peer: true, Run: gitLsTree},
		}},
		{Name: "read every blob", Target: 1.5, Impls: []GitreeImpl{
			{Name: "gitree", Run: func(b *testing.B, fx *GitreeFixture) { gitreeRead(b, fx, 1) }},
			{Name: par, Run: func(b *testing.B, fx *GitreeFixture) { gitreeRead(b, fx, workers) }},
			{Name: "git cat-file --batch", Peer: true, Run: gitCatFile},
		}},
		{Name: "check out into a directory", Impls: []GitreeImpl{
			{Name: "gitree", Run: func(b *testing.B, fx *GitreeFixture) { gitreeCheckout(b, fx, 1) }},
			{Name: par, Run: func(b *testing.B, fx *GitreeFixture) { gitreeCheckout(b, fx, workers) }},
			{Name: "git archive HEAD | tar -x", Peer: true, Run: gitArchive},
		}},
	}
}

// GitreeSetting is one configuration of gitree whose cost the tuning table
// measures.
type GitreeSetting struct {
	Name    string
	Workers int // goroutines reading blobs
	Opts    []gitree.Option
}

// GitreeSettings returns the configurations the tuning table compares: the
// defaults, then one change at a time.
func GitreeSettings() []GitreeSetting {
	workers := runtime.GOMAXPROCS(0)
	return []GitreeSetting{
		{Name: "defaults (direct pack reads, 32 MiB delta base cache)", Workers: 1},
		{Name: fmt.Sprintf("defaults, %d goroutines", workers), Workers: workers},
		{Name: "no delta base cache", Workers: 1, Opts: []gitree.Option{gitree.WithDeltaBaseCacheSize(0)}},
		{Name: "go-git storage (16 pack descriptors kept, 96 MiB object cache)", Workers: 1, Opts: []gitree.Option{gitree.WithDirectPacks(false)}},
		{Name: fmt.Sprintf("go-git storage, %d goroutines", workers), Workers: workers, Opts: []gitree.Option{gitree.WithDirectPacks(false)}},
		{Name: "go-git storage, descriptors not kept (MaxOpenDescriptors 0)", Workers: 1, Opts: []gitree.Option{gitree.WithDirectPacks(false), gitree.WithMaxOpenDescriptors(0)}},
		{Name: "go-git storage, LargeObjectThreshold 64 KiB", Workers: 1, Opts: []gitree.Option{gitree.WithDirectPacks(false), gitree.WithLargeObjectThreshold(64 << 10)}},
		{Name: "go-git storage, 1 MiB object cache", Workers: 1, Opts: []gitree.Option{gitree.WithDirectPacks(false), gitree.WithObjectCacheSize(1 << 20)}},
	}
}

// GitreeCPUMetric names the extra metric the git revision workloads report: CPU
// time (user and system, all threads) per iteration of the process doing the
// work: this one for gitree (the timed parts only), the git CLI's processes
// (the shell and the processes it waited for) for the peers, not counting this
// process reading their output.
const GitreeCPUMetric = "proc-cpu-ns/op"

// cpuMeter sums the CPU time of the timed parts of a benchmark.
type cpuMeter struct{ total, from time.Duration }

func (m *cpuMeter) start()              { m.from = processCPU() }
func (m *cpuMeter) stop()               { m.total += processCPU() - m.from }
func (m *cpuMeter) add(d time.Duration) { m.total += d }
func (m *cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.total)/float64(b.N), GitreeCPUMetric)
}

// walkTree calls leaf for every non-directory of g, depth first in name order,
// and dir for every directory below the root before its contents.
func walkTree(g vfs.Backend, p vfs.Path, dir func(vfs.Path) error, leaf func(vfs.Path, fs.FileMode) error) error {
	ents, err := g.ReadDir(context.Background(), p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		c, err := p.Child(e.Name)
		if err != nil {
			return err
		}
		if e.Type.IsDir() {
			if dir != nil {
				if err := dir(c); err != nil {
					return err
				}
			}
			if err := walkTree(g, c, dir, leaf); err != nil {
				return err
			}
			continue
		}
		if err := leaf(c, e.Type); err != nil {
			return err
		}
	}
	return nil
}

func openGitree(b *testing.B, fx *GitreeFixture, opts ...gitree.Option) *gitree.FS {
	g, err := gitree.Open(fx.Repo, "HEAD", opts...)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func gitreeList(b *testing.B, fx *GitreeFixture) { GitreeList(b, fx) }

// GitreeList is the listing workload with gitree opened with opts.
func GitreeList(b *testing.B, fx *GitreeFixture, opts ...gitree.Option) {
	var m cpuMeter
	m.start()
	defer m.report(b)
	defer m.stop()
	for i := 0; i < b.N; i++ {
		g := openGitree(b, fx, opts...)
		n := 0
		err := walkTree(g, vfs.Path{}, nil, func(vfs.Path, fs.FileMode) error { n++; return nil })
		g.Close()
		if err != nil || n != fx.Paths {
			b.Fatalf("gitree walk: %d paths (want %d), %v", n, fx.Paths, err)
		}
	}
}

func gitLsTree(b *testing.B, fx *GitreeFixture) {
	var m cpuMeter
	defer m.report(b)
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("git", "--git-dir="+fx.Repo, "ls-tree", "-r", "--name-only", "HEAD")
		cmd.Env = GitEnv()
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n++
		}
		err = cmd.Wait()
		m.add(childCPU(cmd.ProcessState))
		if err != nil || n != fx.Paths {
			b.Fatalf("git ls-tree: %d paths (want %d), %v", n, fx.Paths, err)
		}
	}
}

// parallel runs work on every item sent by produce, in workers goroutines (in the
// caller's when workers is 1), and returns the first error.
func parallel(workers int, produce func(send func(item) error) error, work func(item) error) error {
	if workers <= 1 {
		return produce(work)
	}
	ch := make(chan item, 256)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if first.Load() != nil {
					continue
				}
				if err := work(it); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	err := produce(func(it item) error {
		if e := first.Load(); e != nil {
			return *e
		}
		ch <- it
		return nil
	})
	close(ch)
	wg.Wait()
	if err != nil {
		return err
	}
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

type item struct {
	p    vfs.Path
	mode fs.FileMode
}

func gitreeRead(b *testing.B, fx *GitreeFixture, workers int) { GitreeRead(b, fx, workers) }

// GitreeRead is the reading workload in workers goroutines with gitree opened
// with opts: it opens and reads every file and symlink of HEAD to its end.
func GitreeRead(b *testing.B, fx *GitreeFixture, workers int, opts ...gitree.Option) {
	b.SetBytes(fx.Bytes)
	bufs := sync.Pool{New: func() any { return new([64 << 10]byte) }}
	var m cpuMeter
	m.start()
	defer m.report(b)
	defer m.stop()
	for i := 0; i < b.N; i++ {
		g := openGitree(b, fx, opts...)
		var total, files atomic.Int64
		err := parallel(workers, func(send func(item) error) error {
			return walkTree(g, vfs.Path{}, nil, func(p vfs.Path, m fs.FileMode) error {
				if m.IsDir() { // a submodule
					return nil
				}
				return send(item{p, m})
			})
		}, func(it item) error {
			buf := bufs.Get().(*[64 << 10]byte)
			defer bufs.Put(buf)
			n, err := readAll(g, it.p, it.mode, buf[:])
			total.Add(n)
			files.Add(1)
			return err
		})
		g.Close()
		if err != nil || total.Load() != fx.Bytes || files.Load() != int64(len(fx.BlobIDs)) {
			b.Fatalf("gitree read: %d bytes in %d files (want %d in %d), %v", total.Load(), files.Load(), fx.Bytes, len(fx.BlobIDs), err)
		}
	}
}

// readAll reads p, of type mode as its directory listed it, to its end through buf
// and returns the byte count. A symlink is not followed: its blob is its target.
func readAll(g vfs.Backend, p vfs.Path, mode fs.FileMode, buf []byte) (int64, error) {
	ctx := context.Background()
	if mode == fs.ModeSymlink {
		t, err := g.Readlink(ctx, p)
		return int64(len(t)), err
	}
	f, err := g.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func gitCatFile(b *testing.B, fx *GitreeFixture) {
	b.SetBytes(fx.Bytes)
	input := strings.Join(fx.BlobIDs, "\n") + "\n"
	var m cpuMeter
	defer m.report(b)
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("git", "--git-dir="+fx.Repo, "cat-file", "--batch")
		cmd.Env = GitEnv()
		cmd.Stdin = strings.NewReader(input)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		total, files, perr := countBatch(bufio.NewReaderSize(out, 64<<10))
		err = cmd.Wait()
		m.add(childCPU(cmd.ProcessState))
		if err != nil || perr != nil || total != fx.Bytes || files != len(fx.BlobIDs) {
			b.Fatalf("git cat-file: %d bytes in %d objects (want %d in %d), %v, %v", total, files, fx.Bytes, len(fx.BlobIDs), err, perr)
		}
	}
}

// countBatch reads git cat-file --batch output ("<id> <type> <size>\n<content>\n"
// per object) and returns the total content size and the object count.
func countBatch(r *bufio.Reader) (int64, int, error) {
	var total int64
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return total, n, nil
		}
		if err != nil {
			return total, n, err
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return total, n, fmt.Errorf("cat-file: odd header %q", line)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return total, n, err
		}
		if _, err := r.Discard(int(size) + 1); err != nil {
			return total, n, err
		}
		total += size
		n++
	}
}

func gitreeCheckout(b *testing.B, fx *GitreeFixture, workers int) { GitreeCheckout(b, fx, workers) }

// GitreeInflaters returns the two ways of inflating whole objects the inflater
// table compares: gitree's own decoder (the default) and klauspost/compress's
// zlib reader (gitree.WithLibraryInflater), each in one goroutine.
func GitreeInflaters() []GitreeSetting {
	return []GitreeSetting{
		{Name: "gitree's inflater", Workers: 1},
		{Name: "klauspost/compress", Workers: 1, Opts: []gitree.Option{gitree.WithLibraryInflater(true)}},
	}
}

// GitreeCheckout is the checkout workload in workers goroutines with gitree
// opened with opts: it writes every directory, file (0644 or 0755) and symlink
// of HEAD into a new directory.
func GitreeCheckout(b *testing.B, fx *GitreeFixture, workers int, opts ...gitree.Option) {
	b.SetBytes(fx.Bytes)
	ctx := context.Background()
	bufs := sync.Pool{New: func() any { return new([]byte) }}
	var m cpuMeter
	m.start()
	defer m.report(b)
	defer m.stop()
	for i := 0; i < b.N; i++ {
		dst := checkoutDir(b, &m)
		g := openGitree(b, fx, opts...)
		var files atomic.Int64
		err := parallel(workers, func(send func(item) error) error {
			return walkTree(g, vfs.Path{}, func(p vfs.Path) error {
				return os.Mkdir(filepath.Join(dst, filepath.FromSlash(p.String())), 0o755)
			}, func(p vfs.Path, m fs.FileMode) error {
				if m.IsDir() {
					return nil
				}
				return send(item{p, m})
			})
		}, func(it item) error {
			to := filepath.Join(dst, filepath.FromSlash(it.p.String()))
			files.Add(1)
			if it.mode == fs.ModeSymlink {
				t, err := g.Readlink(ctx, it.p)
				if err != nil {
					return err
				}
				return os.Symlink(t, to)
			}
			f, err := g.OpenFile(ctx, it.p, os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return err
			}
			bp := bufs.Get().(*[]byte)
			defer bufs.Put(bp)
			if int64(cap(*bp)) < info.Size {
				*bp = make([]byte, info.Size)
			}
			buf := (*bp)[:info.Size]
			if _, err := io.ReadFull(f, buf); err != nil {
				return err
			}
			return os.WriteFile(to, buf, info.Mode.Perm())
		})
		g.Close()
		if err != nil || files.Load() != int64(len(fx.BlobIDs)) {
			b.Fatalf("gitree checkout: %d files (want %d), %v", files.Load(), len(fx.BlobIDs), err)
		}
		checkCheckout(b, fx, dst, i, &m)
	}
}

func gitArchive(b *testing.B, fx *GitreeFixture) {
	b.SetBytes(fx.Bytes)
	var m cpuMeter
	defer m.report(b)
	for i := 0; i < b.N; i++ {
		dst := checkoutDir(b, nil)
		cmd := exec.Command("sh", "-c", `git --git-dir="$1" archive HEAD | tar -x -C "$2"`, "sh", fx.Repo, dst)
		cmd.Env = GitEnv()
		out, err := cmd.CombinedOutput()
		m.add(childCPU(cmd.ProcessState))
		if err != nil {
			b.Fatalf("git archive | tar: %v: %s", err, out)
		}
		checkCheckout(b, fx, dst, i, nil)
	}
}

// checkoutDir makes a new empty directory for one checkout, outside the timed
// part (and outside m's, when m is not nil), and removes it when the benchmark
// ends.
func checkoutDir(b *testing.B, m *cpuMeter) string {
	untimed(b, m)
	defer timed(b, m)
	dst, err := os.MkdirTemp("", "capfs-bench-checkout-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dst) })
	return dst
}

// checkCheckout checks, outside the timed part, that the first checkout of a
// run holds every file with the right total size, and removes every checkout.
func checkCheckout(b *testing.B, fx *GitreeFixture, dst string, i int, m *cpuMeter) {
	untimed(b, m)
	defer timed(b, m)
	defer os.RemoveAll(dst)
	if i > 0 {
		return
	}
	n, size, err := countTree(dst)
	if err != nil || n != len(fx.BlobIDs) || size != fx.Bytes {
		b.Fatalf("checkout holds %d files of %d bytes (want %d, %d), %v", n, size, len(fx.BlobIDs), fx.Bytes, err)
	}
}

// untimed stops the benchmark's timer and m.
func untimed(b *testing.B, m *cpuMeter) {
	if m != nil {
		m.stop()
	}
	b.StopTimer()
}

// timed restarts the benchmark's timer and m.
func timed(b *testing.B, m *cpuMeter) {
	b.StartTimer()
	if m != nil {
		m.start()
	}
}

// countTree counts the files and symlinks under root and their sizes (a symlink's
// size being its target's length, as git stores it).
func countTree(root string) (int, int64, error) {
	n, size := 0, int64(0)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			size += int64(len(t))
			return err
		}
		fi, err := d.Info()
		size += fi.Size()
		return err
	})
	return n, size, err
}
