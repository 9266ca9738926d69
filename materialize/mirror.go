//go:build linux

package materialize

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// GitPolicy says what a checkout does with the git directories it holds: those
// named .git and those laid out as one (HEAD, objects/, refs/: a bare
// repository in the tree).
type GitPolicy int

const (
	// GitAuto (the default) keeps a .git directory unless the paths its object
	// store and index can show include one the source Dir's policy hides (or
	// that the scan cannot check within Options.GitScanBudget): git's object
	// database would otherwise show, through `git show HEAD:.env` or `git
	// cat-file`, what the checkout leaves out. Such a .git is emptied (see
	// GitOmit).
	GitAuto GitPolicy = iota
	// GitOmit leaves every git directory's contents out: the checkout holds it
	// empty, so git inside finds no repository, and (bound read-only with the
	// rest of ReadOnlyPaths) cannot create one there.
	GitOmit
	// GitKeep keeps every git directory unless the scan GitAuto makes finds a
	// path of its history the policy hides (then it is emptied, as GitAuto
	// does): the host vouches for what the scan cannot check (a history past
	// Options.GitScanBudget, or one it cannot read), which stays.
	GitKeep
)

// DefaultGitScanBudget is the default of Options.GitScanBudget: the tree
// objects a GitAuto scan may read per checkout (each tree once per path it
// appears at) before it gives up and leaves .git out.
const DefaultGitScanBudget = 100000

// gitCheckBudget bounds the Dir.Check calls a GitAuto scan makes (one per path
// of the history the checkout neither holds nor skipped).
const gitCheckBudget = 20000

// MaxReadOnlyPaths caps ReadOnlyPaths (each is a mount in the sandbox, and
// bubblewrap's setup grows faster than linearly with them: about 0.25 s for 256,
// 2.6 s for 1024 on a 2-core VM): past it, the .git entries are kept and the
// other refused paths are left to sync-back, which refuses a change to them.
const MaxReadOnlyPaths = 256

// ReadOnlyPaths returns the paths of a writable checkout (relative to it,
// sorted, parents before children) that the sandbox must bind read-only over
// themselves (sandbox.Mount.ReadOnly): every .git directory or file, at any
// depth, every git directory the checkout emptied (see GitPolicy), and every directory or file the source Dir refuses to write
// (Dir.Check(OpWrite)), such as the persistence files of policy.Defaults(). A
// directory is listed as a whole when it is refused, a new entry in it would be
// refused, and so is everything beneath it; otherwise its refused entries are
// listed one by one. A process inside then gets EROFS at once rather than a
// refusal at sync-back. Symlinks are not listed on their own (a bind cannot
// cover a link; sync-back still refuses a change to one; a directory bound as a
// whole covers those it holds), nor are paths that do not exist yet:
// creating a refused file is refused at sync-back only. At most
// MaxReadOnlyPaths are listed. Nil for a read-only checkout (it is all bound
// read-only).
//
// Each entry costs a Dir.Check at checkout (two for a refused directory),
// audited as a "check.write" event; an Ask decision goes to the Dir's Asker, so
// a Dir whose policy asks about writes is asked about each such path.
func (t *Tree) ReadOnlyPaths() []string {
	return append([]string(nil), t.readOnly...)
}

// isGit reports whether rel names a git directory or gitdir file.
func isGit(rel string) bool { return path.Base(rel) == ".git" }

// hasGit reports whether the walk found a .git entry.
func hasGit(entries []*srcEntry) bool {
	for _, e := range entries {
		if isGit(e.rel) {
			return true
		}
	}
	return false
}

// mirror applies the policy's decisions to a populated (copied or hard-linked)
// checkout: it empties the .git directories the GitPolicy leaves out, then, for
// a writable checkout, computes ReadOnlyPaths.
func (t *Tree) mirror(ctx context.Context) error {
	if err := t.decideGit(ctx); err != nil {
		return err
	}
	if t.opts.ReadOnly {
		return nil
	}
	return t.protect(ctx)
}

// decideGit empties each git directory of the checkout (named .git, or laid
// out as one: see gitLayout) that the GitPolicy leaves out, recording it in
// Skipped and, with every git directory scanned, in GitReports.
func (t *Tree) decideGit(ctx context.Context) error {
	var gits []string
	for rel, e := range t.manifest.Entries {
		if e.Type.IsDir() && (isGit(rel) || t.gitLayout(rel)) {
			gits = append(gits, rel)
		}
	}
	sort.Strings(gits)
	budget := t.opts.GitScanBudget
	if budget <= 0 {
		budget = DefaultGitScanBudget
	}
	var handled []string
	for _, rel := range gits {
		if underAny(rel, handled) {
			continue // scanned (as a module) or emptied with an outer one
		}
		handled = append(handled, rel)
		rep := GitReport{Path: rel, Why: "left out (GitOmit)"}
		if t.opts.Git != GitOmit {
			var err error
			if rep, err = t.gitHides(ctx, rel, &budget); err != nil {
				return err
			}
			t.gitReports = append(t.gitReports, rep)
			if rep.Kept {
				continue
			}
		}
		if err := t.emptyGit(rel); err != nil {
			return vfs.Errno("checkout", vfs.MustParse(rel), err)
		}
		t.emptied = append(t.emptied, rel)
		t.mu.Lock()
		t.skipped = append(t.skipped, Skip{Path: rel, Code: vfs.CodePermission, Reason: "git directory emptied: " + rep.Why})
		t.mu.Unlock()
	}
	sort.Slice(t.skipped, func(i, j int) bool { return t.skipped[i].Path < t.skipped[j].Path })
	return nil
}

// gitLayout reports whether the checkout's directory rel is laid out as a git
// directory (a bare repository, or one not named .git): HEAD, objects/ and
// refs/, as git itself checks. Its history is scanned like a .git's, its paths
// taken as relative to rel's parent.
func (t *Tree) gitLayout(rel string) bool {
	m := t.manifest.Entries
	head, okH := m[rel+"/HEAD"]
	obj, okO := m[rel+"/objects"]
	refs, okR := m[rel+"/refs"]
	return okH && okO && okR && head.Type.IsRegular() && obj.Type.IsDir() && refs.Type.IsDir()
}

// underAny reports whether rel lies strictly beneath one of dirs.
func underAny(rel string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// GitReport is what a checkout decided about one of its git directories.
type GitReport struct {
	Path   string // the git directory, relative to the checkout
	Kept   bool   // its contents are in the checkout
	Why    string // why it was emptied or, kept under GitKeep, what was not checked
	Paths  int    // distinct paths its history shows (as far as scanned)
	Cached bool   // the history's paths came from the scan cache (Options.GitScanCache)
	// Unnamed counts the loose objects no commit, tag, tree or index names
	// (see GitHistory.Unnamed), removed from a kept git directory.
	Unnamed int
}

// GitReports returns what the checkout decided about each git directory it
// scanned (none under GitOmit), in path order.
func (t *Tree) GitReports() []GitReport {
	return append([]GitReport(nil), t.gitReports...)
}

// gitHides scans the checkout's copy of the git directory rel (through the
// scan cache) and decides whether it stays: under GitAuto, not when its
// history names a path the source Dir hides, is too large for the budget, or
// cannot be read; under GitKeep, only not in the first case.
func (t *Tree) gitHides(ctx context.Context, rel string, budget *int) (GitReport, error) {
	rep, err := t.gitVerdict(ctx, rel, budget)
	if err == nil && rep.Kept {
		// Every kept .git, scanned or kept unread under GitKeep, holds only
		// what git's read commands use.
		if err := t.removeUnshown(rel); err != nil {
			return rep, vfs.Errno("checkout", vfs.MustParse(rel), err)
		}
	}
	return rep, err
}

// gitVerdict scans the git directory rel and decides gitHides's report,
// removing from a kept one the loose objects no history names.
func (t *Tree) gitVerdict(ctx context.Context, rel string, budget *int) (GitReport, error) {
	rep := GitReport{Path: rel}
	prefix := path.Dir(path.Dir(rel + "/x")) // the work tree: rel's parent
	if prefix == "." {
		prefix = ""
	}
	keep := t.opts.Git == GitKeep
	h, err := ScanGitHistory(ctx, filepath.Join(t.path, filepath.FromSlash(rel)), max(*budget, 1), t.opts.GitScanCache)
	if err != nil {
		if ctx.Err() != nil {
			return rep, canceled("checkout", vfs.Root, ctx.Err())
		}
		rep.Kept, rep.Why = keep, "its history cannot be read to check it"
		return rep, nil
	}
	*budget = max(*budget-h.Trees, 0)
	rep.Paths, rep.Cached = len(h.Paths), h.Cached
	v, err := CheckGitHistory(h, prefix, t.hiddenInHistory(ctx))
	if err != nil {
		rep.Kept, rep.Why = keep, "its history cannot be read to check it"
		return rep, nil
	}
	rep.Why = v.Why()
	rep.Kept = rep.Why == "" || (keep && v.Hidden == 0)
	if rep.Kept {
		rep.Unnamed = len(h.Unnamed)
		if err := t.removeUnnamed(rel, h.Unnamed); err != nil {
			return rep, vfs.Errno("checkout", vfs.MustParse(rel), err)
		}
	}
	return rep, nil
}

// removeUnnamed removes from the checkout's git directory rel its loose
// objects no history names (paths relative to rel), and their manifest
// entries. The checkout is private and nothing has run in it yet.
func (t *Tree) removeUnnamed(rel string, unnamed []string) error {
	for _, u := range unnamed {
		p := rel + "/" + u
		if err := os.Remove(filepath.Join(t.path, filepath.FromSlash(p))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		delete(t.manifest.Entries, p)
		delete(t.manifest.stat, p)
	}
	return nil
}

// hiddenInHistory is the checkout's decision on a path of a git history: not
// hidden when the checkout holds it, hidden when the walk skipped it as
// refused, else as Dir.Check decides a read of it (at most gitCheckBudget
// checks: past them, errGitBudget).
func (t *Tree) hiddenInHistory(ctx context.Context) func(p string) (bool, error) {
	skipped := map[string]vfs.Code{}
	for _, s := range t.Skipped() {
		skipped[s.Path] = s.Code
	}
	checks := 0
	return func(p string) (bool, error) {
		if _, ok := t.manifest.Entries[p]; ok {
			return false, nil // the checkout shows it
		}
		if code, ok := skipped[p]; ok {
			// Refused, or a name no path can hold: the checkout does not show it.
			return code == vfs.CodePermission || code == vfs.CodeInvalidPath, nil
		}
		if checks++; checks > gitCheckBudget {
			return false, errGitBudget
		}
		err := t.src.Check(ctx, policy.OpRead, p, "", -1)
		switch vfs.CodeOf(err) {
		case "":
			return false, nil
		case vfs.CodePermission, vfs.CodeInvalidPath, vfs.CodeOutside:
			return true, nil
		}
		return false, err
	}
}

// emptyGit removes the contents of the checkout's directory rel (a .git) and
// their manifest entries; the directory itself stays, as it was recorded.
func (t *Tree) emptyGit(rel string) error {
	fd, err := hostfs.OpenBeneath(t.rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), rel)
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	// The checkout is private and nothing has run in it yet: the path is the
	// one Checkout made, and RemoveAll does not follow symlinks.
	for _, n := range names {
		if err := hostfs.RemoveTree(filepath.Join(t.path, filepath.FromSlash(rel), n)); err != nil {
			return err
		}
	}
	for p := range t.manifest.Entries {
		if strings.HasPrefix(p, rel+"/") {
			delete(t.manifest.Entries, p)
			delete(t.manifest.stat, p)
		}
	}
	return nil
}

// protect computes ReadOnlyPaths from the manifest, deciding each entry with
// Dir.Check on Options.Workers goroutines.
func (t *Tree) protect(ctx context.Context) error {
	m := t.manifest.Entries
	paths := make([]string, 0, len(m))
	for p, e := range m {
		if e.Type != os.ModeSymlink {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	verdicts, err := t.decideWrites(ctx, paths)
	if err != nil {
		return err
	}
	t.readOnly = t.readOnlyPaths(paths, wholePaths(m, paths, verdicts))
	return nil
}

// writeVerdict is the policy's answer for one checkout path: whether a write
// to it is refused and, for a directory, whether a new entry in it is.
type writeVerdict struct{ self, create bool }

// decideWrites decides every path of sorted paths (and, for directories, a
// new entry in it) in parallel, on Options.Workers goroutines.
func (t *Tree) decideWrites(ctx context.Context, paths []string) ([]writeVerdict, error) {
	m := t.manifest.Entries
	verdicts := make([]writeVerdict, len(paths))
	n := t.opts.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	next := make(chan int)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				v, err := t.decideWrite(ctx, paths[i], m[paths[i]].Type.IsDir())
				if err != nil {
					once.Do(func() { first = err })
					continue
				}
				verdicts[i] = v
			}
		}()
	}
	for i := range paths {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, canceled("checkout", vfs.Root, err)
	}
	return verdicts, nil
}

// decideWrite decides a write to path p and, when p is a directory whose
// writes are refused, a new entry in it. A .git, anything in one and an
// emptied directory are refused whatever the policy says.
func (t *Tree) decideWrite(ctx context.Context, p string, isDir bool) (writeVerdict, error) {
	if isGit(p) || strings.Contains(p, "/.git/") || strings.HasPrefix(p, ".git/") || slices.Contains(t.emptied, p) {
		return writeVerdict{true, true}, nil
	}
	self, err := t.writeDenied(ctx, policy.OpWrite, p)
	if err != nil || !self || !isDir {
		return writeVerdict{self: self}, err
	}
	create, err := t.writeDenied(ctx, policy.OpCreate, p+"/.capfs-new-entry")
	return writeVerdict{self, create}, err
}

// writeDenied reports whether Dir.Check refuses op on p (a permission or
// read-only error); any other error is returned.
func (t *Tree) writeDenied(ctx context.Context, op policy.Op, p string) (bool, error) {
	err := t.src.Check(ctx, op, p, "", -1)
	switch vfs.CodeOf(err) {
	case "":
		return false, nil
	case vfs.CodePermission, vfs.CodeReadOnly:
		return true, nil
	}
	return false, err
}

// wholePaths marks each of sorted paths whole when its write is refused and,
// for a directory, new entries are and every entry beneath it is whole.
// A directory's entries follow it, so walking backwards sees them first.
func wholePaths(m map[string]Entry, paths []string, verdicts []writeVerdict) map[string]bool {
	whole := make(map[string]bool, len(paths))
	partial := map[string]bool{} // directories with an entry that is not whole
	for i := len(paths) - 1; i >= 0; i-- {
		p := paths[i]
		v := verdicts[i]
		w := v.self
		if m[p].Type.IsDir() {
			w = v.self && v.create && !partial[p]
		}
		whole[p] = w
		if w {
			continue
		}
		for d := relParent(p); d != "" && !partial[d]; d = relParent(d) {
			partial[d] = true
		}
	}
	return whole
}

// readOnlyPaths is the sorted list of whole paths not beneath another one:
// every .git and emptied directory, then the rest up to MaxReadOnlyPaths.
func (t *Tree) readOnlyPaths(paths []string, whole map[string]bool) []string {
	m := t.manifest.Entries
	var out, rest []string
	var covered []string
	for _, p := range paths {
		if !whole[p] || underAny(p, covered) {
			continue
		}
		if m[p].Type.IsDir() {
			covered = append(covered, p)
		}
		// .git first: it must be read-only whatever the cap leaves out.
		if isGit(p) || slices.Contains(t.emptied, p) {
			out = append(out, p)
		} else {
			rest = append(rest, p)
		}
	}
	out = append(out, rest[:min(len(rest), max(0, MaxReadOnlyPaths-len(out)))]...)
	sort.Strings(out)
	return out
}

// relParent returns the parent of the relative path p, "" for a top-level one.
func relParent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}
