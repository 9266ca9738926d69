package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// CASFixture is what issue 15's workloads run on: a copy of Go's src (the
// GoSrcRepo work tree, read only), a warm store holding its snapshot (stat cache
// and link cache filled), and a git repository whose index describes the same
// tree, all under one temporary directory on the work tree's file system (so that
// hard links from the link cache reach the checkouts).
type CASFixture struct {
	WorkTree string
	Base     string     // temporary directory holding everything below
	Store    *cas.Store // warm: the work tree snapshotted, stat cache and link cache filled
	Root     cas.Digest // the work tree's root digest
	GitDir   string     // a repository whose HEAD and index are the work tree (added, committed, refreshed)
	Files    int
	Bytes    int64
}

// NewCASFixture builds the fixture (GoSrcRepo first, if need be). Close removes it.
func NewCASFixture() (*CASFixture, error) {
	_, work, err := GoSrcRepo()
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp(filepath.Dir(work), "capfs-bench-cas-")
	if err != nil {
		return nil, err
	}
	fx := &CASFixture{WorkTree: work, Base: base, GitDir: filepath.Join(base, "index.git")}
	if fx.Files, _, _, fx.Bytes, err = census(work); err != nil {
		fx.Close()
		return nil, err
	}
	if fx.Store, err = cas.OpenStore(filepath.Join(base, "store")); err != nil {
		fx.Close()
		return nil, err
	}
	ctx := context.Background()
	for range 2 { // the second run fills the stat cache with records the first left racy
		if fx.Root, err = fx.Store.SnapshotHost(ctx, work, cas.SnapshotOptions{}); err != nil {
			fx.Close()
			return nil, err
		}
	}
	// The link cache.
	if _, err := fx.Store.Materialize(ctx, fx.Root, filepath.Join(base, "warm"), cas.MaterializeOptions{}); err != nil {
		fx.Close()
		return nil, err
	}
	os.RemoveAll(filepath.Join(base, "warm"))
	if err := gitAddAll(fx.GitDir, work); err != nil {
		fx.Close()
		return nil, err
	}
	// Commit, so that status compares an unchanged tree, and refresh the
	// index's stat data as git status would, once.
	if err := runGit(fx.GitDir, work, "commit", "-q", "-m", "src"); err != nil {
		fx.Close()
		return nil, err
	}
	if err := runGit(fx.GitDir, work, "status", "--porcelain"); err != nil {
		fx.Close()
		return nil, err
	}
	return fx, nil
}

// Close removes the fixture's directory.
func (fx *CASFixture) Close() error {
	if fx.Store != nil {
		fx.Store.Close()
	}
	return os.RemoveAll(fx.Base)
}

func runGit(gitDir, work string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "gc.auto=0", "-c", "core.autocrlf=false", "--git-dir=" + gitDir, "--work-tree=" + work}, args...)...)
	cmd.Dir = work
	cmd.Env = GitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v: %s", args[0], err, bytes.TrimSpace(out))
	}
	return nil
}

// gitAddAll makes a fresh repository at gitDir and adds every file of work to its
// index (objects written loose, as git add writes them).
func gitAddAll(gitDir, work string) error {
	init := exec.Command("git", "init", "-q", "--bare", gitDir)
	init.Env = GitEnv()
	if out, err := init.CombinedOutput(); err != nil {
		return fmt.Errorf("git init: %v: %s", err, bytes.TrimSpace(out))
	}
	return runGit(gitDir, work, "add", "-A", "-f", ".")
}

// CASImpl is one contender of a CAS workload.
type CASImpl struct {
	Name string
	Peer bool
	Run  func(b *testing.B, fx *CASFixture)
}

// CASWorkload is one row group of the CAS table: capfs beside its peer. Target
// is the largest capfs/peer time ratio the issue accepts.
type CASWorkload struct {
	Name   string
	Target float64
	Impls  []CASImpl
}

// CASWorkloads returns issue 15's workloads.
func CASWorkloads() []CASWorkload {
	return []CASWorkload{
		{Name: "cold snapshot into an empty store", Target: 0.5, Impls: []CASImpl{
			{Name: "Store.SnapshotHost", Run: casColdSnapshot},
			{Name: "git init && git add -A", Peer: true, Run: gitColdAdd},
		}},
		{Name: "re-snapshot of the unchanged tree", Target: 1, Impls: []CASImpl{
			{Name: "Store.SnapshotHost (stat cache)", Run: casReSnapshot},
			{Name: "Store.Snapshot of a Dir (stat cache)", Run: func(b *testing.B, fx *CASFixture) { casReSnapshotDir(b, fx) }},
			{Name: "Store.Snapshot of a Dir with the default policy (stat cache)", Run: func(b *testing.B, fx *CASFixture) {
				casReSnapshotDir(b, fx, dir.WithPolicy(policy.Defaults()))
			}},
			{Name: "git status --porcelain", Peer: true, Run: gitStatusIndex},
		}},
		{Name: "materialize the tree", Target: 1.0 / 3, Impls: []CASImpl{
			{Name: "Store.Materialize (hard links)", Run: casMaterialize},
			{Name: "cp -a", Peer: true, Run: casCpA},
		}},
	}
}

func tempIn(b *testing.B, fx *CASFixture, pattern string) string {
	b.StopTimer()
	defer b.StartTimer()
	d, err := os.MkdirTemp(fx.Base, pattern)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func removeUntimed(b *testing.B, p string) {
	b.StopTimer()
	defer b.StartTimer()
	if err := os.RemoveAll(p); err != nil {
		b.Fatal(err)
	}
}

func casColdSnapshot(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		d := tempIn(b, fx, "cold-")
		st, err := cas.OpenStore(d)
		if err != nil {
			b.Fatal(err)
		}
		root, err := st.SnapshotHost(context.Background(), fx.WorkTree, cas.SnapshotOptions{})
		if err != nil || root != fx.Root {
			b.Fatalf("cold snapshot = %s, %v; want %s", root, err, fx.Root)
		}
		st.Close()
		removeUntimed(b, d)
	}
}

func gitColdAdd(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		d := tempIn(b, fx, "git-")
		if err := gitAddAll(filepath.Join(d, "repo.git"), fx.WorkTree); err != nil {
			b.Fatal(err)
		}
		removeUntimed(b, d)
	}
}

func casReSnapshot(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		root, err := fx.Store.SnapshotHost(context.Background(), fx.WorkTree, cas.SnapshotOptions{})
		if err != nil || root != fx.Root {
			b.Fatalf("re-snapshot = %s, %v; want %s", root, err, fx.Root)
		}
	}
}

// casReSnapshotDir re-snapshots the work tree through a Dir with opts (capfs
// cas snapshot save takes its Dir with the project's policy).
func casReSnapshotDir(b *testing.B, fx *CASFixture, opts ...dir.Option) {
	pb, err := physical.New(fx.WorkTree)
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	d, _ := dir.New(pb, opts...)
	sopts := cas.SnapshotOptions{StatCache: fmt.Sprintf("bench-dir-%d", len(opts))}
	ctx := context.Background()
	// The tree's digest: the fixture's, or with a policy, without what it hides
	// (Go's test keys and certificates).
	want := fx.Root
	for range 2 { // warm this cache, untimed
		root, err := fx.Store.Snapshot(ctx, d.Backend(), sopts)
		if err != nil {
			b.Fatal(err)
		}
		if len(opts) > 0 {
			want = root
		}
	}
	b.ResetTimer()
	for b.Loop() {
		root, err := fx.Store.Snapshot(ctx, d.Backend(), sopts)
		if err != nil || root != want {
			b.Fatalf("re-snapshot = %s, %v; want %s", root, err, want)
		}
	}
}

func gitStatusIndex(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		cmd := exec.Command("git", "--git-dir="+fx.GitDir, "--work-tree="+fx.WorkTree, "status", "--porcelain")
		cmd.Dir = fx.WorkTree
		cmd.Env = GitEnv()
		out, err := cmd.Output()
		if err != nil || len(out) != 0 {
			b.Fatalf("git status: %v: %q", err, out)
		}
	}
}

func casMaterialize(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		d := tempIn(b, fx, "mat-")
		st, err := fx.Store.Materialize(context.Background(), fx.Root, filepath.Join(d, "t"), cas.MaterializeOptions{})
		if err != nil || st.Linked != fx.Files {
			b.Fatalf("materialize: %+v, %v (want %d files linked)", st, err, fx.Files)
		}
		removeUntimed(b, d)
	}
}

func casCpA(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		d := tempIn(b, fx, "cp-")
		if out, err := exec.Command("cp", "-a", fx.WorkTree, filepath.Join(d, "t")).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v: %s", err, out)
		}
		removeUntimed(b, d)
	}
}
