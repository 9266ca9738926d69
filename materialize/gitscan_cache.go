//go:build linux

package materialize

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GitHistory is what a history scan of a git directory found: the paths its
// object store, indexes and modules can show (see ScanGitHistory).
type GitHistory struct {
	// Paths are the distinct paths, sorted, relative to the work tree (those
	// of a module under the module's name); partial when Complete is false.
	Paths []string
	// Trees is the number of tree objects the scan read.
	Trees int
	// Complete is false when the scan stopped at its budget.
	Complete bool
	// Cached is true when the paths came from the cache, not a scan.
	Cached bool
	// Unnamed lists the loose objects (paths relative to the git directory)
	// that no commit, tag, tree or index of their store names, such as a blob
	// added to the index and dropped from it: no path says what they hold, so
	// they must be left out. Only of a complete scan.
	Unnamed []string
	// UnnamedPacked counts such objects in packs, which cannot be left out
	// alone (with alternates, any unnamed object counts here).
	UnnamedPacked int
	// Objects holds, when the git directory could be fingerprinted, every
	// entry beneath its objects/ and modules/ (slash paths relative to the git
	// directory) as it was before the scan, less Unnamed: a caller that shows
	// the directory live shows only these, so that no object added later goes
	// unscanned.
	Objects map[string]bool
}

// errNoFingerprint marks a git directory whose scan cannot be cached: one that
// borrows objects from elsewhere (objects/info/alternates, commondir), whose
// object store holds a symlink, or that cannot be listed.
var errNoFingerprint = errors.New("the git directory cannot be fingerprinted")

// ScanGitHistory lists the paths the git directory gitdir (a host path) can
// show, as the checkout's GitAuto scan reads them: every tree of every commit
// and tag in its object store, its index and its linked worktrees' indexes,
// and the same for its modules. At most budget tree objects are read.
//
// When cacheDir is not "", the result is kept there under a fingerprint of what
// the scan reads (the index files and every entry beneath objects/ and
// modules/: name, type, size, modification time), and a later call with the
// same fingerprint reads it back instead of scanning (Cached). A cache file is
// parsed strictly: any doubt (version, checksum, order, size) means a rescan.
// The result is cached only when the fingerprint taken after the scan matches
// the one taken before.
func ScanGitHistory(ctx context.Context, gitdir string, budget int, cacheDir string) (*GitHistory, error) {
	if budget <= 0 {
		budget = DefaultGitScanBudget
	}
	fp, objs, fperr := gitFingerprint(gitdir)
	if fperr == nil && cacheDir != "" {
		if h, ok := readGitCache(cacheDir, fp, budget); ok {
			h.Cached, h.Objects = true, withoutUnnamed(objs, h.Unnamed)
			return h, nil
		}
	}
	h, err := scanGitPaths(ctx, gitdir, budget, objs) // objs: the walk's loose objects, not listed again
	if err != nil {
		return nil, err
	}
	if fperr != nil {
		return h, nil
	}
	h.Objects = withoutUnnamed(objs, h.Unnamed)
	if cacheDir != "" {
		if fp2, _, err := gitFingerprint(gitdir); err == nil && fp2 == fp {
			_ = writeGitCache(cacheDir, fp, budget, h) // a cache that cannot be written is a rescan next time
		}
	}
	return h, nil
}

// withoutUnnamed removes the unnamed objects from objs.
func withoutUnnamed(objs map[string]bool, unnamed []string) map[string]bool {
	for _, u := range unnamed {
		delete(objs, u)
	}
	return objs
}

// scanGitPaths runs gitScan over gitdir, collecting every path it shows;
// walked, when not nil, is what gitFingerprint saw (see gitScan.walked).
func scanGitPaths(ctx context.Context, gitdir string, budget int, walked map[string]bool) (*GitHistory, error) {
	s := &gitScan{ctx: ctx, budget: budget, paths: map[string]struct{}{}, seen: map[string]struct{}{}, walked: walked}
	err := s.scan(gitdir, "")
	h := &GitHistory{Trees: budget - max(s.budget, 0), Complete: err == nil}
	switch {
	case err == nil:
	case errors.Is(err, errGitBudget):
		h.Trees = budget
	default:
		return nil, err
	}
	h.Paths = make([]string, 0, len(s.paths))
	for p := range s.paths {
		h.Paths = append(h.Paths, p)
	}
	sort.Strings(h.Paths)
	if h.Complete {
		h.Unnamed, h.UnnamedPacked = s.unnamed, s.unnamedPacked
		sort.Strings(h.Unnamed)
	}
	return h, nil
}

// gitFingerprint hashes what a scan of gitdir reads (see ScanGitHistory) and
// returns the entries beneath objects/ and modules/ it saw. The walk follows
// no symlink; a symlink there, alternates or a commondir fail it.
func gitFingerprint(gitdir string) ([32]byte, map[string]bool, error) {
	var sum [32]byte
	for _, n := range []string{"commondir", "objects/info/alternates"} {
		if _, err := os.Lstat(filepath.Join(gitdir, filepath.FromSlash(n))); err == nil {
			return sum, nil, errNoFingerprint
		}
	}
	h := sha256.New()
	objs := map[string]bool{}
	add := func(rel string, fi fs.FileInfo) {
		var b [8]byte
		io.WriteString(h, rel)
		h.Write([]byte{0, byte(fi.Mode().Type() >> 24)})
		binary.LittleEndian.PutUint64(b[:], uint64(fi.Size()))
		h.Write(b[:])
		binary.LittleEndian.PutUint64(b[:], uint64(fi.ModTime().UnixNano()))
		h.Write(b[:])
	}
	idxs, _ := filepath.Glob(filepath.Join(gitdir, "worktrees", "*", "index"))
	for _, p := range append([]string{filepath.Join(gitdir, "index")}, idxs...) {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || !fi.Mode().IsRegular() {
			return sum, nil, errNoFingerprint
		}
		rel, _ := filepath.Rel(gitdir, p)
		add(filepath.ToSlash(rel), fi)
	}
	for _, top := range []string{"objects", "modules"} {
		root := filepath.Join(gitdir, top)
		if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return errNoFingerprint
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(gitdir, p)
			rel = filepath.ToSlash(rel)
			if strings.HasSuffix(rel, "/objects/info/alternates") || strings.HasSuffix(rel, "/commondir") {
				return errNoFingerprint // a module's store borrows objects the fingerprint does not cover
			}
			objs[rel] = true
			add(rel, fi)
			return nil
		})
		if err != nil {
			return sum, nil, errNoFingerprint
		}
	}
	copy(sum[:], h.Sum(nil))
	return sum, objs, nil
}

// gitCacheMagic begins every cache file; the number is the format's version.
const gitCacheMagic = "capfs-gitscan 1\n"

// maxGitCache bounds a cache file (larger histories are rescanned each time).
const maxGitCache = 64 << 20

// maxGitCacheFiles bounds the cache directory: past it, the least recently
// used files are removed.
const maxGitCacheFiles = 64

func gitCacheName(dir string, fp [32]byte) string {
	return filepath.Join(dir, hex.EncodeToString(fp[:])+".scan")
}

// writeGitCache stores h under fp, written to a temporary file and renamed.
//
//	capfs-gitscan 1
//	key <fingerprint hex>
//	trees <n> complete <0|1> budget <n>
//	paths <count> unnamed <count> packed <count> <sha256 hex of the body>
//	<body: each path followed by a NUL, then each unnamed object the same>
func writeGitCache(dir string, fp [32]byte, budget int, h *GitHistory) error {
	data := encodeGitCache(fp, budget, h)
	if len(data) > maxGitCache {
		return errors.New("too large to cache")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".scan-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), gitCacheName(dir, fp))
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	trimGitCache(dir)
	return nil
}

// encodeGitCache is the cache file of h, scanned with budget, under fp.
func encodeGitCache(fp [32]byte, budget int, h *GitHistory) []byte {
	var body bytes.Buffer
	for _, p := range append(slices.Clip(h.Paths), h.Unnamed...) {
		body.WriteString(p)
		body.WriteByte(0)
	}
	bsum := sha256.Sum256(body.Bytes())
	complete := 0
	if h.Complete {
		complete = 1
	}
	out := fmt.Appendf(nil, "%skey %x\ntrees %d complete %d budget %d\npaths %d unnamed %d packed %d %x\n", gitCacheMagic, fp, h.Trees, complete, budget,
		len(h.Paths), len(h.Unnamed), h.UnnamedPacked, bsum)
	return append(out, body.Bytes()...)
}

// readGitCache returns the history cached under fp when its file parses
// strictly and answers for budget: a complete scan that read no more trees
// than budget, or an incomplete one made with a budget no smaller.
func readGitCache(dir string, fp [32]byte, budget int) (*GitHistory, bool) {
	name := gitCacheName(dir, fp)
	f, err := os.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxGitCache+4096 {
		return nil, false
	}
	h, cbudget, ok := parseGitCache(bufio.NewReader(io.LimitReader(f, maxGitCache+4096)), fp)
	if !ok || (h.Complete && h.Trees > budget) || (!h.Complete && cbudget < budget) {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(name, now, now) // most recently used
	return h, true
}

// parseGitCache parses a cache file (see writeGitCache) that must be fp's.
func parseGitCache(br *bufio.Reader, fp [32]byte) (*GitHistory, int, bool) {
	hdr, ok := parseGitCacheHeader(br, fp)
	if !ok {
		return nil, 0, false
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return nil, 0, false
	}
	if s := sha256.Sum256(body); hex.EncodeToString(s[:]) != hdr.sum {
		return nil, 0, false
	}
	paths, body, ok := parseNulList(body, hdr.paths)
	if !ok {
		return nil, 0, false
	}
	unnamed, body, ok := parseNulList(body, hdr.unnamed)
	if !ok || len(body) != 0 {
		return nil, 0, false
	}
	h := &GitHistory{Paths: paths, Trees: hdr.trees, Complete: hdr.complete == 1, Unnamed: unnamed, UnnamedPacked: hdr.packed}
	return h, hdr.budget, true
}

// gitCacheHeader is a cache file's header (see writeGitCache).
type gitCacheHeader struct {
	trees, complete, budget, paths, unnamed, packed int
	sum                                             string
}

// parseGitCacheHeader parses the header of a cache file that must be fp's:
// the numbers are canonical decimals, complete is 0 or 1, and an incomplete
// scan has no unnamed objects.
func parseGitCacheHeader(br *bufio.Reader, fp [32]byte) (gitCacheHeader, bool) {
	var h gitCacheHeader
	line := func() string {
		s, err := br.ReadString('\n')
		if err != nil {
			return ""
		}
		return s
	}
	if line() != gitCacheMagic || line() != fmt.Sprintf("key %x\n", fp) {
		return h, false
	}
	fl, gl := line(), line()
	f, g := strings.Fields(fl), strings.Fields(gl)
	if !labelled(f, 6, "trees", "complete", "budget") || !labelled(g, 7, "paths", "unnamed", "packed") {
		return h, false
	}
	nums := []*int{&h.trees, &h.complete, &h.budget, &h.paths, &h.unnamed, &h.packed}
	for i, s := range []string{f[1], f[3], f[5], g[1], g[3], g[5]} {
		n, ok := canonicalCount(s)
		if !ok {
			return h, false
		}
		*nums[i] = n
	}
	h.sum = g[6]
	return h, h.canonical(fl, gl)
}

// labelled reports whether fields are n words with labels at the even
// positions, in order.
func labelled(fields []string, n int, labels ...string) bool {
	if len(fields) != n {
		return false
	}
	for i, l := range labels {
		if fields[2*i] != l {
			return false
		}
	}
	return true
}

// canonicalCount parses s as a non-negative decimal written as Itoa writes it.
func canonicalCount(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// canonical reports whether h is consistent (complete is 0 or 1, an
// incomplete scan has no unnamed objects) and its lines fl and gl are
// exactly as writeGitCache writes them.
func (h *gitCacheHeader) canonical(fl, gl string) bool {
	return h.complete <= 1 && (h.complete == 1 || h.unnamed+h.packed == 0) &&
		fl == fmt.Sprintf("trees %d complete %d budget %d\n", h.trees, h.complete, h.budget) &&
		gl == fmt.Sprintf("paths %d unnamed %d packed %d %s\n", h.paths, h.unnamed, h.packed, h.sum)
}

// parseNulList parses n strings, each non-empty, followed by a NUL and
// greater than the one before, from the start of body.
func parseNulList(body []byte, n int) ([]string, []byte, bool) {
	out := make([]string, 0, min(n, 1<<16))
	for range n {
		i := bytes.IndexByte(body, 0)
		if i <= 0 {
			return nil, nil, false
		}
		p := string(body[:i])
		if k := len(out); k > 0 && out[k-1] >= p {
			return nil, nil, false
		}
		out = append(out, p)
		body = body[i+1:]
	}
	return out, body, true
}

// trimGitCache removes the least recently used cache files past
// maxGitCacheFiles, and temporary files an interrupted write left.
func trimGitCache(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		used time.Time
	}
	var files []file
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), ".scan") && !strings.HasPrefix(e.Name(), "."):
			files = append(files, file{e.Name(), fi.ModTime()})
		case strings.HasPrefix(e.Name(), ".scan-") && time.Since(fi.ModTime()) > time.Hour:
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if len(files) <= maxGitCacheFiles {
		return
	}
	sort.Slice(files, func(i, j int) bool { return files[i].used.After(files[j].used) })
	for _, f := range files[maxGitCacheFiles:] {
		os.Remove(filepath.Join(dir, f.name))
	}
}

// GitVerdict is what CheckGitHistory found in a history.
type GitVerdict struct {
	First    string // the first hidden path (sorted order), "" when none
	Hidden   int    // how many of the history's paths are hidden
	TooLarge bool   // the scan or the checks stopped at their budget: not all was checked
	Unnamed  int    // packed objects no history names (UnnamedPacked)
}

// Why says why a git directory with this verdict is left out ("" when it
// need not be).
func (v GitVerdict) Why() string {
	switch {
	case v.Hidden == 1:
		return "its history names " + v.First + ", which the policy hides"
	case v.Hidden > 1:
		return fmt.Sprintf("its history names %s and %d more paths the policy hides", v.First, v.Hidden-1)
	case v.TooLarge:
		return "its history is too large to check (see Options.GitScanBudget)"
	case v.Unnamed > 0:
		return fmt.Sprintf("its object store packs %d objects no commit, tag or index names (such as a blob added and then dropped), which no path lets the policy decide", v.Unnamed)
	}
	return ""
}

// CheckGitHistory decides each path of h, joined to prefix (the git
// directory's work tree, "" for the root), with hidden, which the caller's
// view of the tree answers: true when that view hides the path. An error from
// hidden stops the check; errGitBudget from it marks the verdict TooLarge.
func CheckGitHistory(h *GitHistory, prefix string, hidden func(p string) (bool, error)) (GitVerdict, error) {
	v := GitVerdict{TooLarge: !h.Complete, Unnamed: h.UnnamedPacked}
	for _, hp := range h.Paths {
		p := join(prefix, hp)
		hid, err := hidden(p)
		if errors.Is(err, errGitBudget) {
			v.TooLarge = true
			return v, nil
		}
		if err != nil {
			return v, err
		}
		if hid {
			if v.Hidden == 0 {
				v.First = p
			}
			v.Hidden++
		}
	}
	return v, nil
}
