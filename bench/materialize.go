//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
)

// MaterializeFixture is what the materialize workloads (issue 5's benchmark) run
// on: the Go source repository of GoSrcRepo, its work tree as a physical source,
// and the base directory every checkout, capfs's and the peers', is made under.
type MaterializeFixture struct {
	Repo     string // bare git directory, HEAD holding WorkTree
	WorkTree string // the copy of GOROOT/src (read only)
	// Base is materialize's default base directory (/dev/shm when it is a
	// writable tmpfs with room), found by a first checkout: the peers write
	// there too, so every column writes to the same filesystem.
	Base  string
	Files int   // regular files of WorkTree
	Links int   // symlinks of WorkTree
	Dirs  int   // directories below WorkTree's root
	Bytes int64 // total size of the regular files
}

// NewMaterializeFixture builds (or reuses) the Go source repository and counts its
// work tree.
func NewMaterializeFixture() (*MaterializeFixture, error) {
	repo, work, err := GoSrcRepo()
	if err != nil {
		return nil, err
	}
	return materializeFixtureAt(repo, work)
}

func materializeFixtureAt(repo, work string) (*MaterializeFixture, error) {
	fx := &MaterializeFixture{Repo: repo, WorkTree: work}
	var err error
	if fx.Files, fx.Links, fx.Dirs, fx.Bytes, err = census(work); err != nil {
		return nil, err
	}
	// The default base, as Checkout chooses it for a tree of this size.
	d, pb, err := physicalSource(work)
	if err != nil {
		return nil, err
	}
	defer pb.Close()
	tr, err := materialize.Checkout(context.Background(), d, materialize.Options{})
	if err != nil {
		return nil, err
	}
	fx.Base = filepath.Dir(tr.Path())
	if err := tr.Close(); err != nil {
		return nil, err
	}
	return fx, nil
}

// physicalSource serves work through a physical backend and a read-only Dir (the
// fixture must not change) with default options. Its policy allows every path, as
// the peers copy every path: policy.Defaults() would leave out Go's test
// certificates and keys (**/*.pem).
func physicalSource(work string) (*dir.Dir, *physical.FS, error) {
	pb, err := physical.New(work)
	if err != nil {
		return nil, nil, err
	}
	d, _ := dir.New(pb)
	return d.ReadOnly(), pb, nil
}

// MaterializeImpl is one way of doing a materialize workload: capfs's or the peer
// it is measured against.
type MaterializeImpl struct {
	Name string // column name: capfs's configuration, or the peer's command line
	Peer bool
	// Run runs b.N iterations. Only the work itself is timed: making an empty
	// destination, checking the result and removing it are not.
	Run func(b *testing.B, fx *MaterializeFixture)
}

// MaterializeWorkload is one materialize workload with its implementations,
// capfs's first, and the target.
type MaterializeWorkload struct {
	Name  string
	Impls []MaterializeImpl
	// Target is the ratio capfs time / peer time the issue asks not to exceed.
	Target float64
}

// MaterializeWorkloads returns the workloads of issue 5's benchmark: a checkout
// of a physical directory beside cp -a, a checkout of a git revision beside
// git archive | tar -x, and a sync-back scan (Tree.Diff) of an unchanged checkout
// beside git status on the same tree.
func MaterializeWorkloads() []MaterializeWorkload {
	return []MaterializeWorkload{
		{Name: "check out a physical directory", Target: 1.2, Impls: []MaterializeImpl{
			{Name: "materialize.Checkout", Run: checkoutPhysical},
			{Name: "cp -a", Peer: true, Run: cpA},
		}},
		{Name: "check out a git revision", Target: 1, Impls: []MaterializeImpl{
			{Name: "materialize.Checkout of gitree", Run: checkoutGit},
			{Name: "git archive HEAD | tar -x", Peer: true, Run: archiveTar},
		}},
		{Name: "sync-back scan of an unchanged checkout", Target: 1, Impls: []MaterializeImpl{
			{Name: "Tree.Diff", Run: diffUnchanged},
			{Name: "git status --porcelain", Peer: true, Run: gitStatus},
		}},
	}
}

// checkTree checks, untimed, that dst holds what the work tree holds: the same
// numbers of files, symlinks and directories and the same total size.
func checkTree(b *testing.B, fx *MaterializeFixture, dst string) {
	b.StopTimer()
	defer b.StartTimer()
	f, l, d, n, err := census(dst)
	if err != nil || f != fx.Files || l != fx.Links || d != fx.Dirs || n != fx.Bytes {
		b.Fatalf("%s holds %d files, %d links, %d dirs, %d bytes (want %d, %d, %d, %d), %v",
			dst, f, l, d, n, fx.Files, fx.Links, fx.Dirs, fx.Bytes, err)
	}
}

// checkManifest checks, untimed, that a capfs checkout copied everything.
func checkManifest(b *testing.B, fx *MaterializeFixture, tr *materialize.Tree) {
	b.StopTimer()
	defer b.StartTimer()
	files, size := tr.Manifest().Files()
	if len(tr.Skipped()) != 0 || files != fx.Files || size != fx.Bytes || tr.Strategy() != materialize.StrategyCopy {
		b.Fatalf("checkout: %d files, %d bytes (want %d, %d), strategy %s, skipped %v",
			files, size, fx.Files, fx.Bytes, tr.Strategy(), tr.Skipped())
	}
}

func closeTree(b *testing.B, tr *materialize.Tree) {
	b.StopTimer()
	defer b.StartTimer()
	if err := tr.Close(); err != nil {
		b.Fatal(err)
	}
}

// peerDir makes, untimed, a new empty directory under the fixture's base.
func peerDir(b *testing.B, fx *MaterializeFixture) string {
	b.StopTimer()
	defer b.StartTimer()
	dst, err := os.MkdirTemp(fx.Base, "capfs-bench-peer-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dst) }) // after a failed check
	return dst
}

func removeDir(b *testing.B, p string) {
	b.StopTimer()
	defer b.StartTimer()
	if err := os.RemoveAll(p); err != nil {
		b.Fatal(err)
	}
}

func runCmd(b *testing.B, name string, args ...string) []byte {
	cmd := exec.Command(name, args...)
	cmd.Env = GitEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

func checkoutPhysical(b *testing.B, fx *MaterializeFixture) {
	b.SetBytes(fx.Bytes)
	d, pb, err := physicalSource(fx.WorkTree)
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	for i := 0; i < b.N; i++ {
		tr, err := materialize.Checkout(context.Background(), d, materialize.Options{Base: fx.Base})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close() }) // after a failed check (Close is idempotent)
		checkManifest(b, fx, tr)
		if i == 0 {
			checkTree(b, fx, tr.Path())
		}
		closeTree(b, tr)
	}
}

func cpA(b *testing.B, fx *MaterializeFixture) {
	b.SetBytes(fx.Bytes)
	for i := 0; i < b.N; i++ {
		parent := peerDir(b, fx)
		dst := filepath.Join(parent, "src")
		runCmd(b, "cp", "-a", fx.WorkTree, dst)
		if i == 0 {
			checkTree(b, fx, dst)
		}
		removeDir(b, parent)
	}
}

func checkoutGit(b *testing.B, fx *MaterializeFixture) {
	b.SetBytes(fx.Bytes)
	for i := 0; i < b.N; i++ {
		// Cold, as the peer's new process is: a fresh Open, nothing cached.
		g, err := gitree.Open(fx.Repo, "HEAD")
		if err != nil {
			b.Fatal(err)
		}
		d, _ := dir.New(g)
		tr, err := materialize.Checkout(context.Background(), d, materialize.Options{Base: fx.Base})
		if err != nil {
			b.Fatal(err)
		}
		g.Close()
		b.Cleanup(func() { tr.Close() }) // after a failed check (Close is idempotent)
		checkManifest(b, fx, tr)
		if i == 0 {
			checkTree(b, fx, tr.Path())
		}
		closeTree(b, tr)
	}
}

func archiveTar(b *testing.B, fx *MaterializeFixture) {
	b.SetBytes(fx.Bytes)
	for i := 0; i < b.N; i++ {
		dst := peerDir(b, fx)
		runCmd(b, "sh", "-c", `git --git-dir="$1" archive HEAD | tar -x -C "$2"`, "sh", fx.Repo, dst)
		if i == 0 {
			checkTree(b, fx, dst)
		}
		removeDir(b, dst)
	}
}

// scanTree is an unchanged checkout of the work tree (a capfs copy, under the
// fixture's base) for the scan workloads, with a git index describing it kept
// outside it, refreshed once so that git's stat cache is as warm as capfs's.
type scanTree struct {
	tr    *materialize.Tree
	pb    *physical.FS
	repo  string // the fixture's bare repository
	index string // the index file, in a directory of its own
}

func newScanTree(b *testing.B, fx *MaterializeFixture) *scanTree {
	b.StopTimer()
	defer b.StartTimer()
	d, pb, err := physicalSource(fx.WorkTree)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := materialize.Checkout(context.Background(), d, materialize.Options{Base: fx.Base})
	if err != nil {
		pb.Close()
		b.Fatal(err)
	}
	idx, err := os.MkdirTemp(fx.Base, "capfs-bench-index-")
	if err != nil {
		tr.Close()
		pb.Close()
		b.Fatal(err)
	}
	st := &scanTree{tr: tr, pb: pb, repo: fx.Repo, index: filepath.Join(idx, "index")}
	b.Cleanup(func() {
		tr.Close()
		pb.Close()
		os.RemoveAll(idx)
	})
	st.git(b, "read-tree", "HEAD")
	st.git(b, "update-index", "-q", "--refresh")
	return st
}

// git runs git on the scan tree: the fixture's repository, the checkout as work
// tree, the private index.
func (st *scanTree) git(b *testing.B, args ...string) []byte {
	// GIT_DIR names the bare fixture; --work-tree overrides its core.bare.
	cmd := exec.Command("git", append([]string{"--work-tree=" + st.tr.Path()}, args...)...)
	cmd.Dir = st.tr.Path()
	cmd.Env = append(GitEnv(), "GIT_INDEX_FILE="+st.index, "GIT_DIR="+st.repo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

func diffUnchanged(b *testing.B, fx *MaterializeFixture) {
	st := newScanTree(b, fx)
	for i := 0; i < b.N; i++ {
		cs, err := st.tr.Diff(context.Background())
		if err != nil || len(cs) != 0 {
			b.Fatalf("Diff of an unchanged checkout: %d changes (%v), %v", len(cs), cs[:min(len(cs), 5)], err)
		}
	}
}

func gitStatus(b *testing.B, fx *MaterializeFixture) {
	st := newScanTree(b, fx)
	for i := 0; i < b.N; i++ {
		if out := st.git(b, "status", "--porcelain"); len(out) != 0 {
			b.Fatalf("git status of an unchanged checkout: %.500s", out)
		}
	}
}
