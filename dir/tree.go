package dir

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// MoveOption changes how Move behaves.
type MoveOption func(*moveConfig)

type moveConfig struct{ allowCopy bool }

// AllowCopy lets Move fall back to copy-then-delete when the source and destination
// are on different mounts (where a rename fails with cross_mount). The fallback is
// not atomic: if deleting the source fails after the copy, both exist and the error
// is returned.
func AllowCopy() MoveOption { return func(m *moveConfig) { m.allowCopy = true } }

// RemoveAll removes path and everything beneath it. Symlinks are removed, never
// followed. A missing path is not an error. The Dir's own root cannot be removed
// (invalid_path). With a custom policy, every path beneath is checked before
// anything is removed: a refusal anywhere removes nothing.
func (d *Dir) RemoveAll(ctx context.Context, path string) error {
	c := &call{sp: specRemoveAll, path: path}
	return d.do(ctx, c, func(ctx context.Context) error {
		return d.s.removeAll(ctx, c, c.rp, true)
	})
}

// Move renames from to to. A file replaces a file at to; a directory replaces an
// empty directory. Moving a directory into itself is invalid_path. Across mounts the
// rename fails with cross_mount unless AllowCopy is given, in which case from is
// copied to to and then removed. With a custom policy, moving a directory checks
// every path beneath it (old and new name) first.
func (d *Dir) Move(ctx context.Context, from, to string, opts ...MoveOption) error {
	var mc moveConfig
	for _, o := range opts {
		if o != nil {
			o(&mc)
		}
	}
	c := &call{sp: specMove, path: from, dest: to}
	return d.do(ctx, c, func(ctx context.Context) error {
		const method = "Move"
		if c.p.IsRoot() || c.q.IsRoot() {
			return errAt(vfs.CodeInvalidPath, method, from, to, "cannot move the root")
		}
		if d.s.env.customPolicy {
			if err := d.s.checkSubtree(ctx, c, method, c.rp, c.rq, policy.OpRename); err != nil {
				return err
			}
		}
		err := d.s.b.Rename(ctx, c.rp, c.rq, 0)
		if codeOf(err) != vfs.CodeCrossMount || !mc.allowCopy {
			return err
		}
		if err := d.s.copyTree(ctx, c, method, c.rp, c.rq, policy.OpRename); err != nil {
			return err
		}
		return d.s.removeAll(ctx, c, c.rp, false)
	})
}

// checkSubtree asks the policy about every path beneath directory from (if it is
// one), paired with its new name under to.
func (s *scope) checkSubtree(ctx context.Context, c *call, method string, from, to vfs.Path, op policy.Op) error {
	from, to = from.WithoutDirMark(), to.WithoutDirMark()
	info, err := s.b.Lstat(ctx, from)
	if err != nil || !info.Mode.IsDir() {
		return nil // the operation itself reports what is wrong
	}
	tree, err := s.collectTree(ctx, method, from, false)
	if err != nil {
		return err
	}
	for _, te := range tree {
		src, dst := from.Join(te.rel), to.Join(te.rel)
		if d, ok := s.allowInner(ctx, c, op, src, &dst); !ok {
			return innerDenied(method, src, d)
		}
	}
	return nil
}

// Copy copies from to to. A file is copied atomically (replacing a file at to,
// which keeps its permission bits; a new file gets from's); a symlink is copied as a
// link, not followed, and its target must stay inside this Dir from its new place;
// a directory is copied recursively (symlinks inside copied as links) and to must
// not exist. Copying a directory into itself is invalid_path. The policy decides
// the call as a copy (Path from, Dest to); with a custom policy, every source path is
// also decided as a read and every path beneath a copied directory as a copy,
// before anything is created; if the copy fails midway, what it created is removed.
func (d *Dir) Copy(ctx context.Context, from, to string) error {
	c := &call{sp: specCopy, path: from, dest: to}
	return d.do(ctx, c, func(ctx context.Context) error {
		if c.q.IsRoot() {
			return errAt(vfs.CodeExists, "Copy", from, to, "the destination is the root")
		}
		// The source is also decided as a read, so a policy that guards reads of a
		// file guards copying it.
		if dd, ok := d.s.allowInner(ctx, c, policy.OpRead, c.rp.WithoutDirMark(), nil); !ok {
			return innerDenied("Copy", c.p.WithoutDirMark(), dd)
		}
		return d.s.copyTree(ctx, c, "Copy", c.rp, c.rq, policy.OpCopy)
	})
}

// Walk walks the tree rooted at root in lexical order, calling fn for root and every
// entry beneath it, like fs.WalkDir: fn may return fs.SkipDir or fs.SkipAll, and an
// error reading a directory is passed to fn a second time. Symlinks are reported,
// never followed. Paths given to fn are root (cleaned, "." for the Dir itself)
// joined with the entry's names; "" means ".". With a custom policy, entries the
// policy refuses are left out (and not descended into). An error fn returns is
// returned unchanged.
func (d *Dir) Walk(ctx context.Context, root string, fn fs.WalkDirFunc) error {
	c := &call{sp: specWalk, path: root}
	return d.do(ctx, c, func(ctx context.Context) error {
		p := c.rp
		var info vfs.Info
		var err error
		if p.MustBeDir() {
			info, err = d.s.b.Stat(ctx, p)
		} else {
			info, err = d.s.b.Lstat(ctx, p)
		}
		p = p.WithoutDirMark()
		name := p.String()
		if err != nil {
			err = fn(name, nil, readdress(err, "Walk", name, ""))
		} else {
			err = d.s.walk(ctx, c, name, p, d.s.entry(d.s.b, p, vfs.DirEntry{Name: path.Base(name), Type: info.Mode & fs.ModeType}), fn)
		}
		if err == fs.SkipDir || err == fs.SkipAll {
			return nil
		}
		if err != nil {
			return &addressed{err}
		}
		return nil
	})
}

func (s *scope) walk(ctx context.Context, c *call, name string, p vfs.Path, de fs.DirEntry, fn fs.WalkDirFunc) error {
	if err := fn(name, de, nil); err != nil || !de.IsDir() {
		if err == fs.SkipDir && de.IsDir() {
			err = nil
		}
		return err
	}
	if err := s.checkLive(ctx, "Walk", p); err != nil {
		var a *addressed
		errors.As(err, &a)
		return a.err
	}
	ents, err := s.b.ReadDir(ctx, p)
	if err != nil {
		if err = fn(name, de, readdress(err, "Walk", name, "")); err != nil {
			if err == fs.SkipDir {
				err = nil
			}
			return err
		}
	}
	for _, e := range ents {
		child, ok := s.listed(ctx, c, p, e.Name, false)
		if !ok {
			continue
		}
		if err := s.walk(ctx, c, path.Join(name, e.Name), child, s.entry(s.b, child, e), fn); err != nil {
			if err == fs.SkipDir {
				break
			}
			return err
		}
	}
	return nil
}

// ReadDirVisible returns the entries of directory path that a Walk of it shows
// and whose status the policy lets a caller read, sorted by name: what a view
// that answers every listed name's lookup (a FUSE mount) lists, so it never
// lists a name it then refuses (a secret's, which Walk shows unless the policy
// hides secrets). "" means ".". It is one call, decided as a listing of path
// and audited once; each entry is decided as Walk decides it, then as a status
// (policy.OpStat) of the entry itself.
func (d *Dir) ReadDirVisible(ctx context.Context, path string) ([]fs.DirEntry, error) {
	keep := func(child vfs.Path, e vfs.DirEntry) fs.DirEntry { return d.s.entry(d.s.b, child, e) }
	return visible(ctx, d, path, vfs.ReadDir, func(e vfs.DirEntry) string { return e.Name }, keep)
}

// ReadDirVisibleInfo is ReadDirVisible with each entry's status, as an Lstat
// of it through [Dir.Backend] reports it, read with the listing in one pass
// where the backend can (vfs.ReadDirInfo): what a view that answers a listing
// with attributes (a FUSE mount's READDIRPLUS) needs, without a lookup per
// entry. It is decided and audited as ReadDirVisible. An entry whose status
// the backend could not read carries that error in Err.
func (d *Dir) ReadDirVisibleInfo(ctx context.Context, path string) ([]vfs.DirInfo, error) {
	keep := func(_ vfs.Path, e vfs.DirInfo) vfs.DirInfo { return e }
	return visible(ctx, d, path, vfs.ReadDirInfo, func(e vfs.DirInfo) string { return e.Name }, keep)
}

// visible is ReadDirVisible's one call: directory path listed with list,
// each entry kept (through keep) when the listing shows it (scope.listed,
// with the status decision).
func visible[E, T any](ctx context.Context, d *Dir, path string, list func(context.Context, vfs.Backend, vfs.Path) ([]E, error), name func(E) string, keep func(vfs.Path, E) T) ([]T, error) {
	var out []T
	c := &call{sp: specReadDirVisible, path: path}
	err := d.do(ctx, c, func(ctx context.Context) error {
		ents, err := list(ctx, d.s.b, c.rp)
		if err != nil {
			return err
		}
		p := c.rp.WithoutDirMark()
		out = make([]T, 0, len(ents))
		for _, e := range ents {
			if child, ok := d.s.listed(ctx, c, p, name(e), true); ok {
				out = append(out, keep(child, e))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listed returns the path of entry name of directory p and whether the
// listing c shows it: the policy allows it as a listing of its own path (Walk's
// rule) and, with lookup, as a status of it too (ReadDirVisible's). A name no
// path can hold (a backend that lists one) is reported to ctx's
// vfs.WithUnaddressable function, not dropped silently.
func (s *scope) listed(ctx context.Context, c *call, p vfs.Path, name string, lookup bool) (vfs.Path, bool) {
	child, err := p.Child(name)
	if err != nil {
		vfs.NoteUnaddressable(ctx, vfs.Unaddressable{Name: name, Reason: vfs.NameProblem(name)})
		return child, false
	}
	if _, ok := s.allowInner(ctx, c, policy.OpList, child, nil); !ok {
		return child, false
	}
	if lookup {
		if _, ok := s.allowInner(ctx, c, policy.OpStat, child, nil); !ok {
			return child, false
		}
	}
	return child, true
}

// Glob returns the paths matching pattern, relative to this Dir and sorted. The
// syntax is doublestar's: "*" and "?" match within one path element, "[a-z]" and
// "[!x]" classes, "{a,b}" alternatives, "**" any number of directories (zero
// included), "\" escapes. "{}" groups are expanded textually before matching, so
// "*{*}" means "**" and "{*/}" means "*/". A trailing slash matches directories
// only; "x/**" matches x too. A leading "/" means this Dir's root; ".." is
// path_outside_sandbox; a malformed pattern, or one whose "{}" groups expand to more
// than 1024 patterns, is invalid_path. Symlinks to directories
// are matched but not descended into by wildcards. With a custom policy, entries the
// policy refuses are left out.
func (d *Dir) Glob(ctx context.Context, pattern string) ([]string, error) {
	var out []string
	c := &call{sp: specGlob, path: pattern}
	c.prepare = func() error {
		pat, p, err := prepareGlob(pattern)
		if err != nil {
			return err
		}
		c.dest, c.p = pat, p // dest carries the cleaned pattern to fn
		return nil
	}
	err := d.do(ctx, c, func(ctx context.Context) error {
		g := &innerFS{s: &d.s, ctx: ctx, c: c}
		var matches []string
		// The groups are expanded here, not by the engine, which mishandles a
		// slash inside a group ("{,a*/}*").
		for _, alt := range expandBraces(c.dest) {
			alt, ok := cleanGlob(alt)
			if !ok {
				return errAt(vfs.CodeOutside, "Glob", pattern, "", `".." is not allowed in a pattern`)
			}
			m, err := doublestar.Glob(g, alt, doublestar.WithNoFollow())
			if g.fatal != nil {
				return g.fatal
			}
			if err != nil {
				return errAt(vfs.CodeInvalidPath, "Glob", pattern, "", "malformed glob pattern")
			}
			matches = append(matches, m...)
		}
		for i, m := range matches {
			// An alternative that ends in a slash ("*/{,x}") makes the engine
			// report a directory with its slash: give the io/fs name.
			if m = strings.TrimRight(m, "/"); m == "" {
				m = "."
			}
			matches[i] = m
		}
		slices.Sort(matches)
		out = slices.Compact(matches)
		if out == nil {
			out = []string{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// prepareGlob validates a guest glob pattern and returns it cleaned (relative, no "."
// or empty elements) with the literal directory it starts from.
func prepareGlob(pattern string) (string, vfs.Path, error) {
	bad := func(msg string) (string, vfs.Path, error) {
		return "", vfs.Path{}, errAt(vfs.CodeInvalidPath, "Glob", pattern, "", msg)
	}
	switch {
	case pattern == "":
		return bad("empty pattern")
	case len(pattern) > vfs.MaxPathLen:
		return bad("pattern too long")
	case strings.IndexByte(pattern, 0) >= 0:
		return bad("NUL byte in pattern")
	}
	var segs []string
	for _, s := range strings.Split(pattern, "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return "", vfs.Path{}, errAt(vfs.CodeOutside, "Glob", pattern, "", `".." is not allowed in a pattern`)
		}
		segs = append(segs, s)
	}
	pat := strings.Join(segs, "/")
	if pat == "" {
		pat = "."
	}
	if !doublestar.ValidatePattern(pat) {
		return bad("malformed glob pattern")
	}
	if alternatives(pat) > maxGlobAlternatives {
		return bad("too many {} alternatives")
	}
	lit := vfs.Root
	for _, s := range segs {
		if strings.ContainsAny(s, `*?[{\`) {
			break
		}
		next, err := lit.Child(s)
		if err != nil {
			break
		}
		lit = next
	}
	return pat, lit, nil
}

// maxGlobAlternatives bounds how many patterns "{,}" alternatives may expand to:
// the glob engine expands them one by one, so "{a,b}" repeated 30 times would
// otherwise mean a billion walks.
const maxGlobAlternatives = 1024

// alternatives returns an upper bound on the number of patterns pat's "{,}" groups
// expand to: the product, over every group, of its number of alternatives. Braces
// inside a character class count too, since the glob engine expands them there as
// well; only escaped ones do not.
func alternatives(pat string) int {
	total := 1
	var stack []int
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case '\\':
			i++
		case '{':
			stack = append(stack, 1)
		case ',':
			if len(stack) > 0 {
				stack[len(stack)-1]++
			}
		case '}':
			if len(stack) > 0 {
				total *= stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if total > maxGlobAlternatives {
					return total
				}
			}
		}
	}
	return total
}

// cleanGlob cleans one brace-free alternative of a pattern as prepareGlob
// cleaned the whole ("//" and "." elements dropped: "*{/}/" is "*/"), keeping a
// trailing slash, which asks for directories. ok is false if an element is "..",
// which an expansion can form ("{.}{.}/x").
func cleanGlob(alt string) (string, bool) {
	var segs []string
	for _, s := range strings.Split(alt, "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return "", false
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return ".", true
	}
	out := strings.Join(segs, "/")
	if strings.HasSuffix(alt, "/") {
		out += "/"
	}
	return out, true
}

// expandBraces returns the patterns pat's "{a,b}" groups expand to, the first
// group outermost, nested groups included; a pattern without a complete,
// unescaped group is returned as it is. prepareGlob has bounded their number
// (maxGlobAlternatives).
func expandBraces(pat string) []string {
	start, depth := -1, 0
	var commas []int
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				start, commas = i, commas[:0]
			}
			depth++
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		case '}':
			if depth == 0 {
				continue
			}
			if depth--; depth > 0 {
				continue
			}
			var out []string
			from := start + 1
			for _, end := range append(commas, i) {
				out = append(out, expandBraces(pat[:start]+pat[from:end]+pat[i+1:])...)
				from = end + 1
			}
			return out
		}
	}
	return []string{pat}
}

// innerFS is an unaudited io/fs view of a scope used inside one enforced call (Glob):
// it checks revocation and the context at every directory, and hides what the
// policy refuses. A fatal error (revoked, canceled) is kept in fatal, since glob
// engines swallow I/O errors.
type innerFS struct {
	s     *scope
	ctx   context.Context
	c     *call
	fatal error
}

func (g *innerFS) path(op, name string) (vfs.Path, error) {
	if g.fatal != nil {
		return vfs.Path{}, g.fatal
	}
	if !fs.ValidPath(name) {
		return vfs.Path{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return vfs.Path{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if err := g.s.checkLive(g.ctx, g.c.sp.method, p); err != nil {
		var a *addressed
		errors.As(err, &a)
		g.fatal = a.err
		return vfs.Path{}, g.fatal
	}
	return p, nil
}

func (g *innerFS) hidden(p vfs.Path) bool {
	if p.IsRoot() {
		return false
	}
	_, ok := g.s.allowInner(g.ctx, g.c, policy.OpList, p, nil)
	return !ok
}

// Open is not used by the glob engines (they use ReadDir and Stat); it refuses.
func (g *innerFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: errors.ErrUnsupported}
}

func (g *innerFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := g.path("readdir", name)
	if err != nil {
		return nil, err
	}
	ents, err := g.s.b.ReadDir(g.ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		child, err := p.Child(e.Name)
		if err != nil || g.hidden(child) {
			continue
		}
		out = append(out, g.s.entry(g.s.b, child, e))
	}
	return out, nil
}

func (g *innerFS) Stat(name string) (fs.FileInfo, error) {
	p, err := g.path("stat", name)
	if err != nil {
		return nil, err
	}
	if g.hidden(p) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	info, err := g.s.b.Stat(g.ctx, p)
	if err != nil {
		return nil, err
	}
	return named(info, p), nil
}

// matchGlob is io/fs Glob semantics (path.Match syntax, no "**") over an innerFS.
func matchGlob(g *innerFS, pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	if !hasMeta(pattern) {
		if _, err := g.Stat(pattern); err != nil {
			return nil, nil
		}
		return []string{pattern}, nil
	}
	dir, file := path.Split(pattern)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if !hasMeta(dir) {
		return globIn(g, dir, file, nil), nil
	}
	if dir == pattern {
		return nil, path.ErrBadPattern
	}
	dirs, err := matchGlob(g, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dirs {
		out = globIn(g, d, file, out)
	}
	return out, nil
}

func globIn(g *innerFS, dir, pattern string, out []string) []string {
	ents, err := g.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if ok, _ := path.Match(pattern, e.Name()); ok {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	return out
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }
