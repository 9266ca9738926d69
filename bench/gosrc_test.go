package bench

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gosrcEnv gates the tests that build (or reuse) the Go source fixture, which
// takes tens of seconds the first time: CAPFS_BENCH_GOSRC=1 go test ./bench.
const gosrcEnv = "CAPFS_BENCH_GOSRC"

func needGoSrc(t testing.TB) (string, string) {
	t.Helper()
	if os.Getenv(gosrcEnv) == "" {
		t.Skip("set " + gosrcEnv + "=1 to build the Go source fixture")
	}
	repo, work, err := GoSrcRepo()
	if err != nil {
		t.Fatal(err)
	}
	return repo, work
}

// TestGoSrcRepo checks that the fixture's commit holds exactly the work tree's
// files, packed, with no loose objects left.
func TestGoSrcRepo(t *testing.T) {
	repo, work := needGoSrc(t)
	out, err := exec.Command("git", "--git-dir="+repo, "ls-tree", "-r", "--name-only", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	listed := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	var files []string
	err = filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(work, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5000 || len(files) != len(listed) {
		t.Fatalf("work tree has %d files, HEAD lists %d", len(files), len(listed))
	}
	if _, err := os.Stat(filepath.Join(work, ".git")); !os.IsNotExist(err) {
		t.Fatalf("work tree has a .git: %v", err)
	}
	count, err := exec.Command("git", "--git-dir="+repo, "count-objects", "-v").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(count), "count: 0\n") || !strings.Contains(string(count), "packs: 1\n") {
		t.Fatalf("fixture not packed into one pack:\n%s", count)
	}
	repo2, work2, err := GoSrcRepo()
	if err != nil || repo2 != repo || work2 != work {
		t.Fatalf("second call: %q %q %v", repo2, work2, err)
	}
}
