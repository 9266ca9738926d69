//go:build linux

// Package buildcache keeps the per-project build caches capfs run binds into
// its sandboxes.
//
// Each project (a work mount's host directory, or the repository of a --rev
// run) has a cache directory of its own under the user's capfs cache
// directory ([Root]), bound read-write into its runs at [Target] ([Mounts]),
// with the tools' environment pointing into it. A run sees its own project's
// cache only, never another's (a build cache holds what was compiled from a
// project's files); nothing in it is synced back into the project; the
// host's own caches (its Go build cache, ~/.npm, ...) are never shown to the
// sandbox, which could poison them.
//
// The package reads the environment only through the getenv function its
// callers pass, so that a command reads the environment it was given.
package buildcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/capfs/capfs/internal/hostfile"
	"github.com/capfs/capfs/materialize/sandbox"
)

// Target is where a project's cache directory appears inside the sandbox.
const Target = "/var/cache/capfs"

// cacheEnv points each tool's cache into Target. Go's module cache is not
// among them: the sandbox has no network, so it reads the host's module cache
// (read-only at sandbox.GoModCacheTarget, GOPROXY=off; see
// sandbox.BubblewrapOptions.GoModCache).
var cacheEnv = []string{
	"GOCACHE=" + Target + "/go-build",
	"npm_config_cache=" + Target + "/npm",
	"PIP_CACHE_DIR=" + Target + "/pip",
	"CARGO_HOME=" + Target + "/cargo",
	"CCACHE_DIR=" + Target + "/ccache",
	"XDG_CACHE_HOME=" + Target + "/xdg",
}

// DefaultMax bounds each project's cache (CAPFS_CACHE_MAX overrides it: see
// [Max]): past it, [Trim] removes the least recently modified files, down to
// three quarters of it.
const DefaultMax = 4 << 30

// trimEvery is how often a project's cache is measured (a walk of it) by
// [Trim].
const trimEvery = time.Hour

// meta is a project cache's own record (meta.json in its directory).
type meta struct {
	Project  string    `json:"project"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	LastTrim time.Time `json:"last_trim"`
}

// Root returns the user's capfs cache directory, created 0700 and checked to
// be this user's own.
//
// It is $CAPFS_CACHE_DIR, else $XDG_CACHE_HOME/capfs (an absolute one), else
// $HOME/.cache/capfs, as getenv has them.
func Root(getenv func(string) string) (string, error) {
	d := getenv("CAPFS_CACHE_DIR")
	if d == "" {
		x := getenv("XDG_CACHE_HOME")
		if x == "" || !filepath.IsAbs(x) {
			h := getenv("HOME")
			if h == "" {
				return "", errors.New("$HOME is not defined")
			}
			x = filepath.Join(h, ".cache")
		}
		d = filepath.Join(x, "capfs")
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := hostfile.CheckPrivateDir(d); err != nil {
		return "", err
	}
	return d, nil
}

// Max returns the per-project bound: $CAPFS_CACHE_MAX as getenv has it (a
// size such as 4G), else [DefaultMax].
func Max(getenv func(string) string) int64 {
	if v := getenv("CAPFS_CACHE_MAX"); v != "" {
		if n, err := sandbox.ParseSize(v); err == nil && n > 0 {
			return n
		}
	}
	return DefaultMax
}

// Key returns the cache key of the project whose identity is id
// ("physical:" and a host directory, or "git:" and a repository's): its
// directory name ([Name]), "|", and id.
func Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8]) + "|" + id
}

// Name returns the directory name of the cache of key (see [Key]).
func Name(key string) string {
	name, _ := splitKey(key)
	return name
}

// splitKey splits a key into its directory name and the project it names.
func splitKey(key string) (name, project string) {
	name, project, _ = strings.Cut(key, "|")
	return name, project
}

// IsName reports whether name is a project cache's directory name (the first
// 8 bytes of a hash, in hex: see [Key]). The cache directory holds other
// things (the CAS store's default home, "cas"), which [Names] does not list.
func IsName(name string) bool {
	if len(name) != 16 {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Names lists the names of the project caches under root.
func Names(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && IsName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Cache is what [List] says of a project cache.
type Cache struct {
	Name     string    // its directory name under the root
	Size     int64     // the size of its files
	LastUsed time.Time // zero when unknown
	Project  string    // the project it is for ("" when unknown)
}

// List describes the project caches under root, in name order.
func List(root string) ([]Cache, error) {
	names, err := Names(root)
	if err != nil {
		return nil, err
	}
	out := make([]Cache, 0, len(names))
	for _, name := range names {
		d := filepath.Join(root, name)
		m := readMeta(d)
		out = append(out, Cache{Name: name, Size: dirSize(filepath.Join(d, "data")), LastUsed: m.LastUsed, Project: m.Project})
	}
	return out, nil
}

// Remove removes the project cache name under root and returns the size of
// the files it held. Directories made read-only there (Go's module and build
// caches make them) are made writable first.
func Remove(root, name string) (freed int64, err error) {
	d := filepath.Join(root, name)
	freed = dirSize(d)
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return freed, os.RemoveAll(d)
}

// Mounts returns the cache binds of the project key under root, creating its
// directory (0700) and noting its use.
func Mounts(root, key string) ([]sandbox.CacheDir, error) {
	name, project := splitKey(key)
	d := filepath.Join(root, name)
	if err := MkdirPrivate(d); err != nil {
		return nil, err
	}
	m := readMeta(d)
	if m.Project == "" {
		m.Project, m.Created = project, time.Now()
	}
	m.LastUsed = time.Now()
	writeMeta(d, m)
	data := filepath.Join(d, "data")
	if err := MkdirPrivate(data); err != nil {
		return nil, err
	}
	for _, e := range cacheEnv {
		_, v, _ := strings.Cut(e, "=")
		if err := os.MkdirAll(filepath.Join(data, strings.TrimPrefix(v, Target+"/")), 0o700); err != nil {
			return nil, err
		}
	}
	return []sandbox.CacheDir{{Source: data, Target: Target, Env: cacheEnv}}, nil
}

// MkdirPrivate makes directory d (0700) unless it exists, and checks that it
// is this user's own and not writable by others.
func MkdirPrivate(d string) error {
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return hostfile.CheckPrivateDir(d)
}

func readMeta(d string) meta {
	var m meta
	if b, err := os.ReadFile(filepath.Join(d, "meta.json")); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func writeMeta(d string, m meta) {
	b, _ := json.Marshal(&m)
	tmp := filepath.Join(d, ".meta.tmp")
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, filepath.Join(d, "meta.json"))
	}
}

// Trim bounds the cache of the project key under root to max bytes, at most
// once an hour: see [DefaultMax].
func Trim(root, key string, max int64) {
	d := filepath.Join(root, Name(key))
	m := readMeta(d)
	if time.Since(m.LastTrim) < trimEvery {
		return
	}
	trimDir(filepath.Join(d, "data"), max)
	m.LastTrim = time.Now()
	writeMeta(d, m)
}

// trimDir removes the least recently modified files of d until it holds at
// most three quarters of max, when it holds more than max. On the way it
// strips setuid and setgid bits the sandbox may have set (the cache is the
// user's own: a setuid file there would be the user's, root's for root).
func trimDir(d string, max int64) (total int64, removed int) {
	type file struct {
		p    string
		size int64
		t    time.Time
	}
	var files []file
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		if info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 && !e.IsDir() {
			_ = os.Chmod(p, info.Mode().Perm())
		}
		if info.Mode().IsRegular() {
			files = append(files, file{p, info.Size(), info.ModTime()})
			total += info.Size()
		}
		return nil
	})
	if total <= max {
		return total, 0
	}
	sort.Slice(files, func(i, j int) bool { return files[i].t.Before(files[j].t) })
	goal := max / 4 * 3
	for _, f := range files {
		if total <= goal {
			break
		}
		if os.Remove(f.p) == nil {
			total -= f.size
			removed++
		}
	}
	return total, removed
}

// dirSize is the size of the regular files under d.
func dirSize(d string) int64 {
	var n int64
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
