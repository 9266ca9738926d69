// Package gittest builds git repositories for gitree's tests with the git
// CLI, and reads them back with it as the reference.
package gittest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// RunGit runs git in dir with a fixed identity, dates and no user
// configuration, and returns its trimmed output; a failure fails t.
func RunGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_DATE=2020-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2020-01-02T03:04:05Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Write writes data to path with perm, making its parents.
func Write(t testing.TB, path, data string, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// Symlink makes path a symlink to target.
func Symlink(t testing.TB, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// Object is one object as the git CLI reads it.
type Object struct {
	Type string // "blob", "tree", "commit" or "tag"
	Data []byte
}

// DeltaRepo builds a repository whose history makes git store most blobs as
// deltas: 12 text files edited over 4 commits, a binary file, an empty file and a
// symlink, then repacked into one pack, with OFS_DELTA entries or, when refDelta,
// REF_DELTA ones.
func DeltaRepo(t testing.TB, refDelta bool) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	RunGit(t, d, "init", "-q")
	rng := rand.New(rand.NewSource(1))
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
	lines := make([][]string, 12)
	for i := range lines {
		for j := 0; j < 300; j++ {
			lines[i] = append(lines[i], fmt.Sprintf("%d %s %s", j, words[rng.Intn(8)], words[rng.Intn(8)]))
		}
	}
	bin := make([]byte, 50000)
	rng.Read(bin)
	for c := 0; c < 4; c++ {
		for i := range lines {
			for k := 0; k < 3; k++ {
				lines[i][rng.Intn(len(lines[i]))] = fmt.Sprintf("edit %d %d", c, rng.Int())
			}
			Write(t, filepath.Join(d, fmt.Sprintf("dir%d/f%d.txt", i%3, i)), strings.Join(lines[i], "\n"), 0o644)
		}
		bin[rng.Intn(len(bin))]++
		Write(t, filepath.Join(d, "bin.dat"), string(bin), 0o755)
		RunGit(t, d, "add", "-A")
		RunGit(t, d, "commit", "-q", "-m", fmt.Sprint("c", c))
	}
	Write(t, filepath.Join(d, "empty"), "", 0o644)
	Symlink(t, "dir0/f0.txt", filepath.Join(d, "link"))
	RunGit(t, d, "add", "-A")
	RunGit(t, d, "commit", "-q", "-m", "last")
	RunGit(t, d, "-c", "repack.useDeltaBaseOffset="+strconv.FormatBool(!refDelta), "repack", "-adfq")
	return d
}

// Objects returns every object of the repository at d with its type, as the
// git CLI reads it.
func Objects(t testing.TB, d string) map[plumbing.Hash]Object {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch")
	cmd.Dir = d
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[plumbing.Hash]Object{}
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		f := strings.Fields(line)
		if err != nil || len(f) != 3 {
			t.Fatalf("cat-file: %q %v", line, err)
		}
		size, _ := strconv.Atoi(f[2])
		data := make([]byte, size+1)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		objs[plumbing.NewHash(f[0])] = Object{f[1], data[:size]}
	}
	return objs
}

// BigBlobRepo commits a 2 MiB text blob, then a slightly edited copy in a second
// commit, and repacks, so HEAD's big.txt is stored one way (whole or as a delta)
// and HEAD~1's the other. It returns the repository and both versions.
func BigBlobRepo(t testing.TB) (string, []byte, []byte) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH")
	}
	d := t.TempDir()
	RunGit(t, d, "init", "-q")
	rng := rand.New(rand.NewSource(3))
	var b bytes.Buffer
	for i := 0; b.Len() < 2<<20; i++ {
		fmt.Fprintf(&b, "%08d %x %s\n", i, rng.Int63(), strings.Repeat("ab", rng.Intn(20)))
	}
	v1 := b.Bytes()
	Write(t, filepath.Join(d, "big.txt"), string(v1), 0o644)
	RunGit(t, d, "add", "-A")
	RunGit(t, d, "commit", "-q", "-m", "v1")
	v2 := bytes.Clone(v1)
	copy(v2[len(v2)/2:], "EDITED")
	Write(t, filepath.Join(d, "big.txt"), string(v2), 0o644)
	RunGit(t, d, "add", "-A")
	RunGit(t, d, "commit", "-q", "-m", "v2")
	RunGit(t, d, "repack", "-adfq")
	// The git CLI's reading is the reference.
	for rev, want := range map[string][]byte{"HEAD": v2, "HEAD~1": v1} {
		cmd := exec.Command("git", "cat-file", "blob", rev+":big.txt")
		cmd.Dir = d
		out, err := cmd.Output()
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("git cat-file %s: %d bytes, %v", rev, len(out), err)
		}
	}
	return d, v1, v2
}
