package main

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

	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/vfs"
)

// Build caches. Each project (a work mount's host directory, or the repository
// of a --rev run) has a cache directory of its own under the user's cache
// directory, bound read-write into its runs at cacheTarget (served through a
// FUSE mount of the run's own where it can, so that its host path does not
// show inside: run_cachemount.go), with the tools' environment pointing into
// it. A run sees its own project's cache only, never
// another's (a build cache holds what was compiled from a project's files);
// nothing in it is synced back into the project; the host's own caches (its
// Go build cache, ~/.npm, ...) are never shown to the sandbox, which could
// poison them.

// cacheTarget is where a project's cache directory appears inside the sandbox.
const cacheTarget = "/var/cache/capfs"

// cacheEnv points each tool's cache into cacheTarget. Go's module cache is not
// among them: the sandbox has no network, so it reads the host's module cache
// (read-only at sandbox.GoModCacheTarget, GOPROXY=off; see
// sandbox.BubblewrapOptions.GoModCache).
var cacheEnv = []string{
	"GOCACHE=" + cacheTarget + "/go-build",
	"npm_config_cache=" + cacheTarget + "/npm",
	"PIP_CACHE_DIR=" + cacheTarget + "/pip",
	"CARGO_HOME=" + cacheTarget + "/cargo",
	"CCACHE_DIR=" + cacheTarget + "/ccache",
	"XDG_CACHE_HOME=" + cacheTarget + "/xdg",
}

// defaultCacheMax bounds each project's cache (CAPFS_CACHE_MAX overrides it):
// past it, the least recently modified files are removed after a run, down to
// three quarters of it.
const defaultCacheMax = 4 << 30

// cacheTrimEvery is how often a project's cache is measured (a walk of it)
// after a run.
const cacheTrimEvery = time.Hour

// cacheMeta is a project cache's own record.
type cacheMeta struct {
	Project  string    `json:"project"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	LastTrim time.Time `json:"last_trim"`
}

// cacheRoot is [environ.cacheRoot] in the process's environment, for run's
// side (the cache binds, the trim, the history scan cache), which runs as
// the process itself only.
func cacheRoot() (string, error) { return processEnviron().cacheRoot() }

// cacheRoot returns the user's capfs cache directory ($CAPFS_CACHE_DIR, else
// $XDG_CACHE_HOME/capfs, else ~/.cache/capfs, as e has them), created 0700
// and checked to be this user's own.
func (e environ) cacheRoot() (string, error) {
	d := e.env("CAPFS_CACHE_DIR")
	if d == "" {
		x := e.env("XDG_CACHE_HOME")
		if x == "" || !filepath.IsAbs(x) {
			h, err := e.homeDir()
			if err != nil {
				return "", err
			}
			x = filepath.Join(h, ".cache")
		}
		d = filepath.Join(x, "capfs")
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := checkPrivateDir(d); err != nil {
		return "", err
	}
	return d, nil
}

// projectCacheKey names the cache of the work path at rel in mount m ("" when
// it has no host identity: a memory or other mount).
func projectCacheKey(m *mounted, rel vfs.Path, rev string) string {
	var id string
	switch {
	case m.WorkTree():
		id = "physical:" + filepath.Join(m.Host, filepath.FromSlash(rel.String()))
		if rev != "" {
			if top, _, ok := gitTop(id[len("physical:"):]); ok {
				id = "git:" + top
			}
		}
	case m.Revision():
		id = "git:" + m.Host
	default:
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8]) + "|" + id
}

// isCacheName reports whether name is a project cache's directory name (the
// first 8 bytes of a hash, in hex: see projectCacheKey). The cache directory
// holds other things (the CAS store's default home, "cas"), which cache ls
// does not list and cache clean does not remove.
func isCacheName(name string) bool {
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

// projectCaches lists the names of the project caches under root.
func projectCaches(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && isCacheName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// splitKey splits a key into its directory name and the project it names.
func splitKey(key string) (name, project string) {
	name, project, _ = strings.Cut(key, "|")
	return name, project
}

// cacheMounts returns the cache binds of the project key, creating its
// directory (0700) and noting its use.
func cacheMounts(key string) ([]sandbox.CacheDir, error) {
	root, err := cacheRoot()
	if err != nil {
		return nil, err
	}
	name, project := splitKey(key)
	d := filepath.Join(root, name)
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := checkPrivateDir(d); err != nil {
		return nil, err
	}
	meta := readCacheMeta(d)
	if meta.Project == "" {
		meta.Project, meta.Created = project, time.Now()
	}
	meta.LastUsed = time.Now()
	writeCacheMeta(d, meta)
	data := filepath.Join(d, "data")
	if err := ensureDir(data); err != nil {
		return nil, err
	}
	for _, e := range cacheEnv {
		_, v, _ := strings.Cut(e, "=")
		if err := os.MkdirAll(filepath.Join(data, strings.TrimPrefix(v, cacheTarget+"/")), 0o700); err != nil {
			return nil, err
		}
	}
	return []sandbox.CacheDir{{Source: data, Target: cacheTarget, Env: cacheEnv}}, nil
}

func ensureDir(d string) error {
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkPrivateDir(d)
}

func readCacheMeta(d string) cacheMeta {
	var m cacheMeta
	if b, err := os.ReadFile(filepath.Join(d, "meta.json")); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func writeCacheMeta(d string, m cacheMeta) {
	b, _ := json.Marshal(&m)
	tmp := filepath.Join(d, ".meta.tmp")
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, filepath.Join(d, "meta.json"))
	}
}

// cacheMax is the per-project bound: $CAPFS_CACHE_MAX in e, else
// defaultCacheMax.
func (e environ) cacheMax() int64 {
	if v := e.env("CAPFS_CACHE_MAX"); v != "" {
		if n, err := sandbox.ParseSize(v); err == nil && n > 0 {
			return n
		}
	}
	return defaultCacheMax
}

// trimCache bounds the project's cache, at most once per cacheTrimEvery.
func trimCache(key string) {
	root, err := cacheRoot()
	if err != nil {
		return
	}
	name, _ := splitKey(key)
	d := filepath.Join(root, name)
	meta := readCacheMeta(d)
	if time.Since(meta.LastTrim) < cacheTrimEvery {
		return
	}
	trimDir(filepath.Join(d, "data"), processEnviron().cacheMax())
	meta.LastTrim = time.Now()
	writeCacheMeta(d, meta)
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
