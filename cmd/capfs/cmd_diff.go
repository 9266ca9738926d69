package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/gitindex"
	"github.com/capfs/capfs/internal/treediff"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

const diffLong = `Print a git-style unified diff from A to B, two namespace paths that are both
directories or both files. For directories, paths in the diff are relative to A
and B ("diff --git a/main.go b/main.go"); every changed file, symlink and mode is
shown, and binary files are reported as differing. For two files, the diff is
headed with B's path. With the default mounts, "capfs diff ref/head project"
shows the uncommitted changes of the current directory.

As "git diff" does for a work tree: ".git" directories are left out (--dot-git
includes them), entries a ".gitignore" file of A or B excludes are left out on
both sides (--no-ignore includes them), and a file deleted from A and added to
B with the same or similar content (50% or more of its lines) is shown as a
rename ("similarity index", "rename from", "rename to"; --no-renames turns this
off). --stat prints git's diffstat instead, --name-status one "M", "A", "D",
"T" or "R<score>" line per change, --name-only the paths. Files the policy
keeps out of reach (secrets) are left out and counted once on standard error.

Exits 0 whether or not the inputs differ (1 with --exit-code when they do), 1
when the diff cannot be made, 2 on bad arguments.`

type diffOptions struct {
	excludes   []string
	stat       bool
	nameStatus bool
	nameOnly   bool
	noRenames  bool
	noIgnore   bool
	dotGit     bool
	exitCode   bool
	noIndex    bool
	color      string
}

func newDiffCmd(o *globalOptions) *cobra.Command {
	do := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff [OPTION]... A B",
		Short: "Show the differences between two directories or two files (git diff's format)",
		Long:  diffLong,
		Example: `  capfs diff ref/head project
  capfs diff --stat ref/head project
  capfs diff --name-status -x 'vendor/**' ref/head project`,
		Args: cobra.ExactArgs(2),
	}
	f := cmd.Flags()
	f.StringArrayVarP(&do.excludes, "exclude", "x", nil, "leave out changed paths (relative to A and B) matching this doublestar pattern (repeatable)")
	f.BoolVar(&do.stat, "stat", false, "print a diffstat: each path, its changed lines and a +/- graph, and a total")
	f.BoolVar(&do.nameStatus, "name-status", false, "print one line per change: its status (A, D, M, T, R<score>) and path(s)")
	f.BoolVar(&do.nameOnly, "name-only", false, "print only the changed paths")
	f.BoolVar(&do.noRenames, "no-renames", false, "show renamed files as a deletion and an addition")
	f.BoolVar(&do.noIgnore, "no-ignore", false, "also compare what .gitignore files exclude")
	f.BoolVar(&do.dotGit, "dot-git", false, "also compare .git directories")
	f.BoolVar(&do.noIndex, "no-index-cache", false, "read every file, even those the work tree's git index shows unchanged")
	f.BoolVar(&do.exitCode, "exit-code", false, "exit 1 when there are differences, 0 when there are none")
	f.StringVar(&do.color, "color", "auto", "colour the diff: auto (on a terminal, unless NO_COLOR is set), always or never")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		return runDiff(ctx, cmd, s, do, args[0], args[1])
	})
	return cmd
}

func runDiff(ctx context.Context, cmd *cobra.Command, s *session, do *diffOptions, a, b string) error {
	if err := do.check(); err != nil {
		return err
	}
	useColor, err := colorWanted(s.env, do.color, cmd.OutOrStdout())
	if err != nil {
		return usageErrorf("diff: --color %s: %v", do.color, err)
	}
	ba, bb, flt, err := diffSides(ctx, s, do, a, b)
	if err != nil {
		return err
	}
	if flt != nil {
		defer flt.close()
	}
	changes, err := treediff.Backends(ctx, ba, bb)
	if err != nil {
		return err
	}
	changes = excludeChanges(changes, do.excludes)
	if !do.noRenames {
		if changes, err = treediff.Renames(ctx, ba, bb, changes); err != nil {
			return err
		}
	}
	w := bufio.NewWriter(cmd.OutOrStdout())
	if err := writeDiff(ctx, w, do, useColor, ba, bb, changes); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if flt != nil {
		flt.reportHidden(cmd.ErrOrStderr())
	}
	if do.exitCode && len(changes) > 0 {
		return exitStatus(exitFailed)
	}
	return nil
}

// check refuses malformed --exclude patterns and more than one output format.
func (do *diffOptions) check() error {
	for _, x := range do.excludes {
		if !doublestar.ValidatePattern(x) {
			return usageErrorf("diff: --exclude %s: malformed pattern", x)
		}
	}
	n := 0
	for _, on := range []bool{do.stat, do.nameStatus, do.nameOnly} {
		if on {
			n++
		}
	}
	if n > 1 {
		return usageErrorf("diff: --stat, --name-status and --name-only exclude one another")
	}
	return nil
}

// diffSides returns the two trees to compare: for two directories, their
// backends seen through a diffFilter (which the caller closes); for two
// files, a memory tree of each.
func diffSides(ctx context.Context, s *session, do *diffOptions, a, b string) (ba, bb vfs.Backend, flt *diffFilter, err error) {
	sa, err := s.Root.Stat(ctx, a)
	if err != nil {
		return nil, nil, nil, err
	}
	sb, err := s.Root.Stat(ctx, b)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case sa.IsDir() && sb.IsDir():
		flt, err = newDiffFilter(ctx, s, do, a, b)
		if err != nil {
			return nil, nil, nil, err
		}
		return &filteredBackend{Backend: flt.a, f: flt, side: 0}, &filteredBackend{Backend: flt.b, f: flt, side: 1}, flt, nil
	case sa.IsDir():
		pa, _ := vfs.ParseGuest(a)
		return nil, nil, nil, vfs.NewError(vfs.CodeIsDir, "diff", pa, "a directory, and "+b+" is not; give two directories or two files")
	case sb.IsDir():
		pb, _ := vfs.ParseGuest(b)
		return nil, nil, nil, vfs.NewError(vfs.CodeIsDir, "diff", pb, "a directory, and "+a+" is not; give two directories or two files")
	}
	vb, err := vfs.ParseGuest(b)
	if err != nil {
		return nil, nil, nil, err
	}
	name := vb.String()
	if va, err := vfs.ParseGuest(a); err == nil && va.Base() == vb.Base() {
		name = vb.Base()
	}
	if ba, err = fileTree(ctx, s.Root, a, name, sa.Mode()); err != nil {
		return nil, nil, nil, err
	}
	if bb, err = fileTree(ctx, s.Root, b, name, sb.Mode()); err != nil {
		return nil, nil, nil, err
	}
	return ba, bb, nil, nil
}

// newDiffFilter makes the filter of a diff of directories a and b.
func newDiffFilter(ctx context.Context, s *session, do *diffOptions, a, b string) (*diffFilter, error) {
	da, err := s.Root.Sub(ctx, a)
	if err != nil {
		return nil, err
	}
	db, err := s.Root.Sub(ctx, b)
	if err != nil {
		return nil, err
	}
	pa, _ := vfs.ParseGuest(a)
	pb, _ := vfs.ParseGuest(b)
	flt := &diffFilter{s: s, ctx: ctx, a: da.Backend(), b: db.Backend(), pa: pa, pb: pb,
		dotGit: do.dotGit, noIgnore: do.noIgnore, cache: map[string][]gitignore.Pattern{}}
	// A work tree against a git revision: git's stat cache spares reading
	// the files it shows unchanged (internal/gitindex).
	if mb, rest, ok := s.mountAt(pb); ok && mb.WorkTree() && !do.noIndex {
		if ma, _, ok := s.mountAt(pa); ok && ma.Revision() {
			if top, rel, ok := gitTop(filepath.Join(mb.Host, filepath.FromSlash(rest.String()))); ok {
				flt.hints = gitindex.Load(top, rel)
			}
		}
	}
	return flt, nil
}

// excludeChanges drops the changes whose path matches one of the patterns.
func excludeChanges(changes []treediff.Change, excludes []string) []treediff.Change {
	kept := changes[:0]
next:
	for _, c := range changes {
		for _, x := range excludes {
			if ok, _ := doublestar.Match(x, c.Path); ok {
				continue next
			}
		}
		kept = append(kept, c)
	}
	return kept
}

// writeDiff writes changes to w in the format do asks for.
func writeDiff(ctx context.Context, w io.Writer, do *diffOptions, useColor bool, ba, bb vfs.Backend, changes []treediff.Change) error {
	switch {
	case do.nameOnly:
		for _, c := range changes {
			fmt.Fprintln(w, show(c.Path))
		}
	case do.nameStatus:
		for _, c := range changes {
			if c.Kind == treediff.Renamed {
				fmt.Fprintf(w, "R%03d\t%s\t%s\n", c.Score, show(c.OldPath), show(c.Path))
				continue
			}
			fmt.Fprintf(w, "%s\t%s\n", statusLetter(c.Kind), show(c.Path))
		}
	case do.stat:
		return writeStat(ctx, ba, bb, changes, w)
	case useColor:
		cw := &colorDiffWriter{w: w}
		if err := treediff.Unified(ctx, ba, bb, changes, cw); err != nil {
			return err
		}
		cw.flush()
	default:
		return treediff.Unified(ctx, ba, bb, changes, w)
	}
	return nil
}

// reportHidden writes to w, once, how many paths the policy kept out of the
// comparison, naming the first three.
func (f *diffFilter) reportHidden(w io.Writer) {
	if len(f.hidden) == 0 {
		return
	}
	sort.Strings(f.hidden)
	shown := f.hidden
	more := ""
	if len(shown) > 3 {
		more = fmt.Sprintf(" and %d more", len(shown)-3)
		shown = shown[:3]
	}
	for i := range shown {
		shown[i] = showPath(shown[i])
	}
	fmt.Fprintf(w, "capfs: diff: %d %s not compared, refused by the policy: %s%s; pass --allow-secret GLOB to compare one\n",
		len(f.hidden), plural(len(f.hidden), "path", "paths"), strings.Join(shown, ", "), more)
}

func statusLetter(k treediff.Kind) string {
	switch k {
	case treediff.Added:
		return "A"
	case treediff.Deleted:
		return "D"
	case treediff.TypeChanged:
		return "T"
	}
	return "M"
}

// statRow is one line of --stat: a change's name and its counted lines.
type statRow struct {
	name     string
	add, del int
	binary   string
}

// newStatRow counts the lines c adds and deletes in its unified diff.
func newStatRow(ctx context.Context, ba, bb vfs.Backend, c treediff.Change) (statRow, error) {
	var buf bytes.Buffer
	if err := treediff.Unified(ctx, ba, bb, []treediff.Change{c}, &buf); err != nil {
		return statRow{}, err
	}
	r := statRow{name: c.Path}
	if c.Kind == treediff.Renamed {
		r.name = c.OldPath + " => " + c.Path
	}
	r.name = show(r.name)
	for _, l := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			r.add++
		case strings.HasPrefix(l, "-"):
			r.del++
		case strings.HasPrefix(l, "Binary files "):
			r.binary = "Bin"
		}
	}
	return r, nil
}

// writeStat writes git's --stat: " path | N +++--" per change and a summary.
func writeStat(ctx context.Context, ba, bb vfs.Backend, changes []treediff.Change, w io.Writer) error {
	rows := make([]statRow, 0, len(changes))
	var totalAdd, totalDel, nameW, maxChange int
	for _, c := range changes {
		r, err := newStatRow(ctx, ba, bb, c)
		if err != nil {
			return err
		}
		totalAdd += r.add
		totalDel += r.del
		nameW = max(nameW, len(r.name))
		maxChange = max(maxChange, r.add+r.del)
		rows = append(rows, r)
	}
	numW := len(strconv.Itoa(maxChange))
	// git fits the line in 80 columns: the graph gets what the name leaves.
	graphW := max(80-nameW-numW-6, 10)
	for _, r := range rows {
		if r.binary != "" {
			fmt.Fprintf(w, " %-*s | %s\n", nameW, r.name, r.binary)
			continue
		}
		fmt.Fprintf(w, " %-*s | %*d%s\n", nameW, r.name, numW, r.add+r.del, statGraph(r, graphW, maxChange))
	}
	if len(rows) > 0 {
		line := fmt.Sprintf(" %d %s changed", len(rows), plural(len(rows), "file", "files"))
		if totalAdd > 0 {
			line += fmt.Sprintf(", %d %s(+)", totalAdd, plural(totalAdd, "insertion", "insertions"))
		}
		if totalDel > 0 {
			line += fmt.Sprintf(", %d %s(-)", totalDel, plural(totalDel, "deletion", "deletions"))
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// statGraph is r's " +++--" graph, scaled to graphW columns when the largest
// change, maxChange, is wider.
func statGraph(r statRow, graphW, maxChange int) string {
	plus, minus := r.add, r.del
	if maxChange > graphW {
		scale := func(n int) int {
			if n == 0 {
				return 0
			}
			return max(1, n*graphW/maxChange)
		}
		plus, minus = scale(r.add), scale(r.del)
	}
	graph := strings.Repeat("+", plus) + strings.Repeat("-", minus)
	if graph != "" {
		graph = " " + graph
	}
	return graph
}

// diffFilter decides which entries the directory diff sees: not .git (unless
// dotGit), not what the .gitignore files of either side exclude (unless
// noIgnore), and not what the policy keeps out of reach (those are counted).
type diffFilter struct {
	s        *session
	ctx      context.Context
	a, b     vfs.Backend
	pa, pb   vfs.Path // the two roots in the namespace
	dotGit   bool
	noIgnore bool
	hints    *gitindex.Hints // nil: compare every file's content

	mu     sync.Mutex
	cache  map[string][]gitignore.Pattern // directory -> patterns in effect there
	hidden []string
	seen   map[string]bool

	dirs      [2]*dir.Dir // a and b as Dirs, for reading .gitignore files
	startPool sync.Once
	jobs      chan func()
}

// work runs fn on one of the filter's workers (2×GOMAXPROCS goroutines,
// started on first use and kept for the whole diff, so that their stacks,
// grown once through the Dir's call chain, are not grown again per file).
func (f *diffFilter) work(fn func()) {
	f.startPool.Do(func() {
		f.jobs = make(chan func())
		for i := 0; i < 2*runtime.GOMAXPROCS(0); i++ {
			go func() {
				for j := range f.jobs {
					j()
				}
			}()
		}
	})
	f.jobs <- fn
}

// close stops the workers.
func (f *diffFilter) close() {
	if f.jobs != nil {
		close(f.jobs)
	}
}

// patterns returns the .gitignore patterns in effect in directory p (relative
// to the roots): those of its parents and its own, from both sides.
func (f *diffFilter) patterns(p vfs.Path) []gitignore.Pattern {
	key := p.String()
	f.mu.Lock()
	ps, ok := f.cache[key]
	f.mu.Unlock()
	if ok {
		return ps
	}
	var parent []gitignore.Pattern
	if !p.IsRoot() {
		parent = f.patterns(p.Dir())
	}
	ps = parent[:len(parent):len(parent)]
	domain := splitPath(key)
	seen := map[string]bool{}
	for i, b := range []vfs.Backend{f.a, f.b} {
		f.mu.Lock()
		if f.dirs[i] == nil {
			f.dirs[i], _ = dir.New(b)
		}
		d := f.dirs[i]
		f.mu.Unlock()
		data, err := d.ReadFile(f.ctx, path.Join(key, ".gitignore"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSuffix(l, "\r")
			if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") || seen[l] {
				continue
			}
			seen[l] = true
			ps = append(ps, gitignore.ParsePattern(l, domain))
		}
	}
	f.mu.Lock()
	f.cache[key] = ps
	f.mu.Unlock()
	return ps
}

// keep reports whether entry e of directory p is compared.
func (f *diffFilter) keep(p vfs.Path, e vfs.DirEntry, side int) bool {
	if e.Name == ".git" && !f.dotGit {
		return false
	}
	full := e.Name
	if !p.IsRoot() {
		full = p.String() + "/" + e.Name
	}
	if !f.noIgnore {
		if ps := f.patterns(p); len(ps) > 0 {
			if gitignore.NewMatcher(ps).Match(splitPath(full), e.Type.IsDir()) {
				return false
			}
		}
	}
	// A file git's stat cache shows unchanged is left out on both sides.
	if f.hints != nil && e.Type.IsRegular() && f.hints.Unchanged(f.ctx, f.a, f.b, full) {
		return false
	}
	// What the policy refuses is left out of the comparison and counted.
	root := f.pa
	if side == 1 {
		root = f.pb
	}
	ns := root.Join(vfs.MustParse(full)).String()
	op := policy.OpStat
	if e.Type.IsDir() {
		op = policy.OpList
	}
	if d := f.s.Policy.Decide(f.ctx, &policy.Request{Op: op, Path: ns}); d.Effect == policy.Deny {
		f.mu.Lock()
		if f.seen == nil {
			f.seen = map[string]bool{}
		}
		if !f.seen[full] {
			f.seen[full] = true
			f.hidden = append(f.hidden, full)
		}
		f.mu.Unlock()
		return false
	}
	return true
}

// filteredBackend is one side of a directory diff: its ReadDir leaves out what
// the filter does not keep.
type filteredBackend struct {
	vfs.Backend
	f    *diffFilter
	side int
}

func (b *filteredBackend) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	es, err := b.Backend.ReadDir(ctx, p)
	if err != nil {
		return nil, err
	}
	if h := b.f.hints; h != nil {
		// Decide the directory's files against the index in parallel (each is
		// an Lstat on both sides); keep then finds the answers cached.
		var wg sync.WaitGroup
		for _, e := range es {
			if !e.Type.IsRegular() || e.Name == ".git" {
				continue
			}
			full := e.Name
			if !p.IsRoot() {
				full = p.String() + "/" + e.Name
			}
			wg.Add(1)
			b.f.work(func() {
				defer wg.Done()
				h.Unchanged(b.f.ctx, b.f.a, b.f.b, full)
			})
		}
		wg.Wait()
	}
	out := es[:0:0]
	for _, e := range es {
		if b.f.keep(p, e, b.side) {
			out = append(out, e)
		}
	}
	return out, nil
}

// colorDiffWriter colours a unified diff line by line as git does: headers
// bold, hunk headers cyan, removed lines red, added lines green.
type colorDiffWriter struct {
	w    io.Writer
	part []byte
}

func (c *colorDiffWriter) Write(p []byte) (int, error) {
	c.part = append(c.part, p...)
	for {
		i := bytes.IndexByte(c.part, '\n')
		if i < 0 {
			break
		}
		c.line(string(c.part[:i]))
		c.part = c.part[i+1:]
	}
	return len(p), nil
}

func (c *colorDiffWriter) flush() {
	if len(c.part) > 0 {
		c.line(string(c.part))
		c.part = nil
	}
}

func (c *colorDiffWriter) line(l string) {
	code := ""
	switch {
	case strings.HasPrefix(l, "diff --git "), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "),
		strings.HasPrefix(l, "index "), strings.HasPrefix(l, "new file mode"), strings.HasPrefix(l, "deleted file mode"),
		strings.HasPrefix(l, "similarity index"), strings.HasPrefix(l, "rename "), strings.HasPrefix(l, "old mode"), strings.HasPrefix(l, "new mode"):
		code = "1"
	case strings.HasPrefix(l, "@@"):
		code = "36"
	case strings.HasPrefix(l, "-"):
		code = "31"
	case strings.HasPrefix(l, "+"):
		code = "32"
	}
	if code == "" {
		fmt.Fprintln(c.w, l)
		return
	}
	fmt.Fprintf(c.w, "\x1b[%sm%s\x1b[m\n", code, l)
}

// fileTree returns a memory tree holding the contents of file p of d at name, with
// p's permission bits.
func fileTree(ctx context.Context, d *dir.Dir, p, name string, mode fs.FileMode) (vfs.Backend, error) {
	data, err := d.ReadFile(ctx, p)
	if err != nil {
		return nil, err
	}
	mem := memory.New()
	host, _ := dir.New(mem)
	np := vfs.MustParse(name)
	if !np.Dir().IsRoot() {
		if err := host.MkdirAll(ctx, np.Dir().String()); err != nil {
			return nil, err
		}
	}
	if err := host.WriteFile(ctx, name, data, mode.Perm()); err != nil {
		return nil, err
	}
	return mem, nil
}
