//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DetectGoModCache returns the module cache (GOMODCACHE) of the `go` command in
// the caller's PATH when it exists, or "".
func DetectGoModCache() string {
	_, mod := goEnvDirs()
	return mod
}

// DetectGoRoot returns the GOROOT of the `go` command in the caller's PATH, or ""
// when there is none (or it does not answer within a few seconds).
func DetectGoRoot() string {
	root, _ := goEnvDirs()
	return root
}

// goEnvDirs returns the GOROOT (holding bin/go) and GOMODCACHE (holding
// cache) of the `go` command in the caller's PATH, each "" when absent. It is
// computed once per process: from the go command's own location and the
// environment when no go env file (go env -w) could change the answer, else
// by one `go env` call.
var goEnvDirs = sync.OnceValues(func() (goroot, modcache string) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", ""
	}
	dirWith := func(d, probe string) string {
		if d == "" || !filepath.IsAbs(d) {
			return ""
		}
		if fi, err := os.Stat(filepath.Join(d, probe)); err != nil || !fi.IsDir() {
			return ""
		}
		return filepath.Clean(d)
	}
	if root, mod, ok := goEnvGuess(goBin); ok {
		goroot, modcache = dirWith(root, "bin"), dirWith(mod, "cache")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, goBin, "env", "GOROOT", "GOMODCACHE").Output()
		if err != nil {
			return "", ""
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 {
			return "", ""
		}
		goroot, modcache = dirWith(strings.TrimSpace(lines[0]), "bin"), dirWith(strings.TrimSpace(lines[1]), "cache")
	}
	if goroot != "" {
		if fi, err := os.Stat(filepath.Join(goroot, "bin", "go")); err != nil || !fi.Mode().IsRegular() {
			goroot = ""
		}
	}
	return goroot, modcache
})

// goEnvGuess derives GOROOT and GOMODCACHE as the go command does when
// nothing but the environment sets them: GOROOT from $GOROOT, else the
// directory above the (symlink-resolved) binary's bin; GOMODCACHE from
// $GOMODCACHE, else $GOPATH's first entry, else $HOME/go, plus pkg/mod. It
// reports false when a go env file sets GOROOT, GOPATH or GOMODCACHE (go env
// -w) or cannot be read, or the
// binary is not laid out as a GOROOT's bin/go (a toolchain wrapper), where
// only `go env` knows.
func goEnvGuess(goBin string) (goroot, modcache string, ok bool) {
	if !goEnvFileClear() {
		return "", "", false
	}
	if goroot, ok = guessGoroot(goBin); !ok {
		return "", "", false
	}
	if modcache, ok = guessModcache(); !ok {
		return "", "", false
	}
	return goroot, modcache, true
}

// goEnvFileClear reports whether the go env file (GOENV, else the user's
// config directory's go/env) sets none of GOROOT, GOPATH and GOMODCACHE (go
// env -w): true when there is none, false when it cannot be read.
func goEnvFileClear() bool {
	envFile := os.Getenv("GOENV")
	if envFile == "off" {
		return true
	}
	if envFile == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return true
		}
		envFile = filepath.Join(d, "go", "env")
	}
	data, err := os.ReadFile(envFile)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "GOROOT", "GOPATH", "GOMODCACHE":
			return false // set by go env -w
		}
	}
	return true
}

// guessGoroot is $GOROOT, else the directory above the bin directory holding
// goBin (symlinks resolved), when it has src/runtime.
func guessGoroot(goBin string) (string, bool) {
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		return goroot, true
	}
	real, err := filepath.EvalSymlinks(goBin)
	if err != nil || filepath.Base(filepath.Dir(real)) != "bin" {
		return "", false
	}
	goroot := filepath.Dir(filepath.Dir(real))
	if _, err := os.Stat(filepath.Join(goroot, "src", "runtime")); err != nil {
		return "", false
	}
	return goroot, true
}

// guessModcache is $GOMODCACHE, else pkg/mod in the first $GOPATH entry,
// else in ~/go.
func guessModcache() (string, bool) {
	if modcache := os.Getenv("GOMODCACHE"); modcache != "" {
		return modcache, true
	}
	gp := os.Getenv("GOPATH")
	if gp != "" {
		gp = filepath.SplitList(gp)[0]
	} else {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		gp = filepath.Join(h, "go")
	}
	return filepath.Join(gp, "pkg", "mod"), true
}
