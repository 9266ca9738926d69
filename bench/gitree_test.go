package bench

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallGitRepo commits a few files, an executable and a symlink into a bare
// repository with the git CLI, as GoSrcRepo does for Go's tree.
func smallGitRepo(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	work, repo := filepath.Join(d, "src"), filepath.Join(d, "repo.git")
	files := map[string]string{
		"a.txt":         "alpha\n",
		"dir/b.go":      "package b\n",
		"dir/sub/c.txt": strings.Repeat("gamma ", 5000),
		"dir/same.txt":  "alpha\n",
		"run.sh":        "#!/bin/sh\n",
	}
	for name, data := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		perm := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			perm = 0o755
		}
		if err := os.WriteFile(p, []byte(data), perm); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub/c.txt", filepath.Join(work, "dir", "link")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "--bare", repo},
		{"--git-dir=" + repo, "--work-tree=" + work, "add", "-A", "."},
		{"--git-dir=" + repo, "--work-tree=" + work, "commit", "-q", "-m", "small"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = GitEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo, work
}

// TestGitreeWorkloads runs every implementation of every git revision workload
// once on a small repository: each checks its own counts (paths, bytes, files on
// disk) against git ls-tree's, so they all do the same work.
func TestGitreeWorkloads(t *testing.T) {
	repo, work := smallGitRepo(t)
	fx, err := gitreeFixtureAt(repo, work)
	if err != nil {
		t.Fatal(err)
	}
	if fx.Paths != 6 || len(fx.BlobIDs) != 6 || fx.Bytes != int64(6+10+30000+6+10+len("sub/c.txt")) {
		t.Fatalf("fixture: %d paths, %d blobs, %d bytes", fx.Paths, len(fx.BlobIDs), fx.Bytes)
	}
	// One iteration each: testing.Benchmark honours -test.benchtime.
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "1x"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("test.benchtime", old)
	for _, w := range GitreeWorkloads() {
		peers := 0
		for _, im := range w.Impls {
			if im.Peer {
				peers++
			}
			t.Run(benchName(w.Name)+"/"+benchName(im.Name), func(t *testing.T) {
				r := testing.Benchmark(func(b *testing.B) { im.Run(b, fx) })
				if r.N == 0 {
					t.Fatalf("%s on %s failed", w.Name, im.Name)
				}
				if cpu := r.Extra[GitreeCPUMetric]; cpu <= 0 && processCPU() > 0 {
					t.Fatalf("%s on %s: CPU time %v", w.Name, im.Name, cpu)
				}
			})
		}
		if peers != 1 || w.Impls[0].Peer {
			t.Fatalf("%s: %d peers; capfs first", w.Name, peers)
		}
	}
}

// BenchmarkGitree runs the git revision workloads on the Go source repository
// (CAPFS_BENCH_GOSRC=1 go test -run '^$' -bench Gitree ./bench); the table
// program runs the same code: go run ./bench/cmd/benchtable -only gitree.
func BenchmarkGitree(b *testing.B) {
	needGoSrc(b)
	fx, err := NewGitreeFixture()
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range GitreeWorkloads() {
		b.Run(benchName(w.Name), func(b *testing.B) {
			for _, im := range w.Impls {
				b.Run(benchName(im.Name), func(b *testing.B) { im.Run(b, fx) })
			}
		})
	}
}
