//go:build linux

package bench

import (
	"flag"
	"os"
	"testing"

	"github.com/capfs/capfs/materialize"
)

// TestMaterializeWorkloads runs every implementation of every materialize
// workload once on a small repository (not the Go source fixture): each checks
// its own result (file, link and directory counts and bytes against the work
// tree's; an empty Diff and an empty git status), so they all do the same work.
func TestMaterializeWorkloads(t *testing.T) {
	repo, work := smallGitRepo(t)
	base := t.TempDir()
	t.Setenv(materialize.EnvTmpDir, base) // the default base, here private
	fx, err := materializeFixtureAt(repo, work)
	if err != nil {
		t.Fatal(err)
	}
	if fx.Files != 5 || fx.Links != 1 || fx.Dirs != 2 || fx.Bytes != int64(6+10+30000+6+10) || fx.Base != base {
		t.Fatalf("fixture %+v", fx)
	}
	defer func() {
		// Every checkout, peer directory and index is removed again.
		if left, _ := os.ReadDir(base); len(left) != 0 {
			t.Errorf("left in the base: %v", left)
		}
	}()
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "1x"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("test.benchtime", old)
	for _, w := range MaterializeWorkloads() {
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
			})
		}
		if peers != 1 || w.Impls[0].Peer || w.Target <= 0 {
			t.Fatalf("%s: %d peers, target %v; capfs first", w.Name, peers, w.Target)
		}
	}
}

// BenchmarkMaterialize runs the materialize workloads on the Go source repository
// (CAPFS_BENCH_GOSRC=1 go test -run '^$' -bench Materialize ./bench); the table
// program runs the same code: go run ./bench/cmd/benchtable -only materialize.
func BenchmarkMaterialize(b *testing.B) {
	needGoSrc(b)
	fx, err := NewMaterializeFixture()
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range MaterializeWorkloads() {
		b.Run(benchName(w.Name), func(b *testing.B) {
			for _, im := range w.Impls {
				b.Run(benchName(im.Name), func(b *testing.B) { im.Run(b, fx) })
			}
		})
	}
}
