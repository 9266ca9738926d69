//go:build linux

package sandbox

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoEnvGuessMatchesGoEnv: the GOROOT and GOMODCACHE derived without running
// go are those `go env` reports.
func TestGoEnvGuessMatchesGoEnv(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH")
	}
	root, mod, ok := goEnvGuess(goBin)
	if !ok {
		t.Skip("a go env file or a toolchain wrapper: capfs asks go env itself")
	}
	out, err := exec.Command(goBin, "env", "GOROOT", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("go env: %q", out)
	}
	clean := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	if clean(root) != clean(lines[0]) || clean(mod) != clean(lines[1]) {
		t.Errorf("guessed GOROOT %q GOMODCACHE %q; go env says %q %q", root, mod, lines[0], lines[1])
	}
	if r, m := goEnvDirs(); r == "" || (m == "" && lines[1] != "") && dirExists(lines[1]) {
		t.Errorf("goEnvDirs() = %q, %q", r, m)
	}
}

func dirExists(p string) bool {
	out, err := exec.Command("test", "-d", filepath.Join(p, "cache")).CombinedOutput()
	return err == nil && len(out) == 0
}
