//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// GoRootTarget and GoModCacheTarget are where the wrapper binds a Go
// toolchain and module cache that are not under /usr (BubblewrapOptions
// GoRoot and GoModCache): fixed names, so that neither the sandbox's
// environment (PATH, GOMODCACHE) nor its mount targets name the host's
// directories (such as /home/alice/sdk/go or /home/alice/go/pkg/mod). A
// bind's source still shows in /proc/self/mountinfo, as its path within its
// file system, unless the source is a file system of its own (capfs run
// serves them through a FUSE mount of its own for that reason).
const (
	GoRootTarget     = "/opt/capfs/go"
	GoModCacheTarget = "/opt/capfs/gomodcache"
)

// goBinds is how a run shows the Go toolchain and module cache.
type goBinds struct {
	root, mod             string // host directories ("" for none)
	rootTarget, modTarget string // where the sandbox sees them
	bindRoot, bindMod     bool   // bound by this wrapper (not under /usr)
}

// goBinds returns the binds of o's GoRoot and GoModCache: at their own
// path under /usr (bound already), else at GoRootTarget and
// GoModCacheTarget. A toolchain GOTOOLCHAIN downloaded lives in the module
// cache; it is bound at GoRootTarget all the same (two binds of one tree).
func (o *BubblewrapOptions) goBinds() goBinds {
	g := goBinds{root: o.GoRoot, mod: o.GoModCache, rootTarget: o.GoRoot, modTarget: o.GoModCache}
	if g.root != "" && !within(g.root, "/usr") {
		g.bindRoot, g.rootTarget = true, GoRootTarget
	}
	if g.mod != "" && !within(g.mod, "/usr") {
		g.bindMod, g.modTarget = true, GoModCacheTarget
	}
	return g
}

// targets lists the targets the binds take in the sandbox.
func (g goBinds) targets() []string {
	var t []string
	if g.bindRoot {
		t = append(t, g.rootTarget)
	}
	if g.bindMod {
		t = append(t, g.modTarget)
	}
	return t
}

// args returns bwrap's arguments binding them read-only.
func (g goBinds) args() []string {
	var a []string
	if g.bindRoot {
		a = append(a, "--ro-bind", g.root, g.rootTarget)
	}
	if g.bindMod {
		a = append(a, "--ro-bind", g.mod, g.modTarget)
	}
	return a
}

// env returns base with the toolchain's bin first in PATH and
// GOTOOLCHAIN=local (go never tries to download another toolchain: there is
// no network), and GOMODCACHE at the module cache with GOPROXY=off. GOROOT
// is left unset: go finds it from its own executable's place.
func (g goBinds) env(base []string) []string {
	if g.root != "" {
		base = mergeEnv(base, []string{
			"PATH=" + g.rootTarget + "/bin:" + envValue(base, "PATH"),
			"GOTOOLCHAIN=local",
		})
	}
	if g.mod != "" {
		base = mergeEnv(base, []string{"GOMODCACHE=" + g.modTarget, "GOPROXY=off"})
	}
	return base
}

// privateBinary reports whether bin, the bwrap binary, is the user's own:
// under the user's home directory, or (for a user other than root) owned by
// the user outside /usr, /bin and /sbin, so that its path, in the sandbox's
// /proc/1/cmdline, /proc/1/exe and /proc/1/maps, would name a host
// directory of the user's. Such a binary is run from a sealed copy in memory
// instead (see bwrapImage). A setuid or setgid binary is not: a copy would
// lose the bit it needs.
func privateBinary(bin string) bool {
	var st unix.Stat_t
	if unix.Stat(bin, &st) != nil || st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		return false
	}
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) && filepath.Clean(h) != "/" {
		if within(bin, filepath.Clean(h)) {
			return true
		}
		if r, err := filepath.EvalSymlinks(h); err == nil && within(bin, r) {
			return true
		}
	}
	for _, d := range []string{"/usr", "/bin", "/sbin"} {
		if within(bin, d) {
			return false
		}
	}
	uid := os.Getuid()
	return uid != 0 && int(st.Uid) == uid
}

// bwrapImage returns a sealed, executable copy of bin in memory (its name,
// in /proc/1/exe and /proc/1/maps inside, is "/memfd:bwrap"), or nil when
// none can be made (no memory files, or the host forbids executing them):
// then bin runs from its own path.
func bwrapImage(bin string) *os.File {
	src, err := os.Open(bin)
	if err != nil {
		return nil
	}
	defer src.Close()
	f, err := SealedFile("bwrap", src, true)
	if err != nil {
		return nil
	}
	if f.Name() != "bwrap" || !memfdExecutable() {
		f.Close() // an unlinked temporary file: its path would show
		return nil
	}
	return f
}

// memfdExecutable reports whether memory files may be executed here
// (vm.memfd_noexec below 2).
func memfdExecutable() bool {
	b, err := os.ReadFile("/proc/sys/vm/memfd_noexec")
	return err != nil || strings.TrimSpace(string(b)) != "2"
}

// launchAs returns the program and argv[0] bwrap is started as: bin and
// "bwrap" itself, or, for a private binary (privateBinary) copied into
// memory, its descriptor as the process started will number it (3 plus its
// index in extra, to which it is appended) and argv[0] "bwrap". The
// descriptor's file, when there is one, is returned for the caller to close.
func launchAs(bin string, extra []*os.File) (prog, argv0 string, files []*os.File, image *os.File) {
	if !privateBinary(bin) {
		return bin, bin, extra, nil
	}
	image = bwrapImage(bin)
	if image == nil {
		return bin, "bwrap", extra, nil
	}
	extra = append(extra, image)
	return filepath.Join("/proc/self/fd", strconv.Itoa(2+len(extra))), "bwrap", extra, image
}
