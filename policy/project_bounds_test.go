//go:build unix

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLocalConfigBounded: the project's .git file and .git/config are outside
// input. A gitdir file or config that is a device, a FIFO or too long gives no
// entries and returns at once; on the code before readBounded, a .git linked to
// /dev/zero was read until memory ran out, and a FIFO blocked forever.
func TestLocalConfigBounded(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string){
		"gitdir file is /dev/zero": func(t *testing.T, dir string) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, ".git")); err != nil {
				t.Fatal(err)
			}
		},
		"gitdir file is a FIFO": func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, ".git"), 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		},
		"config is /dev/zero": func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, ".git"), 0o755)
			if err := os.Symlink("/dev/zero", filepath.Join(dir, ".git", "config")); err != nil {
				t.Fatal(err)
			}
		},
		"config is a FIFO": func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, ".git"), 0o755)
			if err := syscall.Mkfifo(filepath.Join(dir, ".git", "config"), 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		},
		"config too long": func(t *testing.T, dir string) {
			writeHost(t, filepath.Join(dir, ".git", "config"), "[core]\n\thooksPath = x\n"+strings.Repeat("# pad\n", maxGitConfig/6+1))
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			setup(t, dir)
			if got := localConfig(dir); len(got) != 0 {
				t.Errorf("localConfig: %v, want nothing", got)
			}
		})
	}
	// A config within the bound is still read.
	dir := t.TempDir()
	writeHost(t, filepath.Join(dir, ".git", "config"), "[core]\n\thooksPath = .husky\n")
	if got := localConfig(dir); len(got) != 1 || got[0].value != ".husky" {
		t.Errorf("localConfig of a small config: %v", got)
	}
}
