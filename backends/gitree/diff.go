package gitree

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/capfs/capfs/vfs"
)

// ChangeKind says how one path differs between two trees.
type ChangeKind string

// The kinds of Change. A path that is a directory on one side and not on the other
// is reported as its files deleted (or added) plus the non-directory added (or
// deleted), as git does; type_changed is reserved for a non-directory whose type
// changes (regular file, symlink, submodule) at the same path.
const (
	Added       ChangeKind = "added"        // only in b
	Modified    ChangeKind = "modified"     // content (or symlink target) differs; modes may differ too
	Deleted     ChangeKind = "deleted"      // only in a
	TypeChanged ChangeKind = "type_changed" // e.g. regular file in a, symlink in b
	ModeChanged ChangeKind = "mode_changed" // same content, different permission bits
)

// Change is one difference between two trees. Only leaves are reported — files,
// symlinks and submodules — never directories themselves.
type Change struct {
	Kind ChangeKind
	// Path is slash-separated and relative to the compared roots.
	Path string
	// OldMode and NewMode are the modes in a and b (0 where absent): 0644 or 0755
	// for files, fs.ModeSymlink|0777 for symlinks, fs.ModeDir|0755 for a submodule.
	// DiffBackends reports other backends' Lstat permission bits as they are.
	OldMode, NewMode fs.FileMode
	// OldID and NewID are git object ids in hex ("" where absent): the blob id of a
	// file or symlink, the pinned commit of a submodule. DiffBackends computes blob ids
	// for changed entries of backends that do not carry them.
	OldID, NewID string
}

// Diff compares two revisions tree against tree and returns every changed leaf,
// sorted by path. Subtrees whose ids are equal are skipped without being read, so
// the cost is proportional to what changed. a and b may come from different Opens
// (of the same or different repositories): each side reads its own object store.
func Diff(ctx context.Context, a, b *FS) ([]Change, error) {
	d := treeDiffer{ctx: ctx, a: a.r, b: b.r}
	if err := d.diff("", a.root, true, b.root, true); err != nil {
		return nil, err
	}
	sortChanges(d.out)
	return d.out, nil
}

type treeDiffer struct {
	ctx  context.Context
	a, b *repoState
	out  []Change
}

func gitMode(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Dir, filemode.Submodule:
		return fs.ModeDir | 0o755
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	case filemode.Executable:
		return 0o755
	}
	return 0o644
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func diffErr(path string, err error) error {
	p, perr := vfs.ParseGuest(path)
	if perr != nil || path == "" {
		p = vfs.Path{}
	}
	return vfs.Errno("diff", p, err)
}

// diff compares node x (present when hx) with node y (present when hy) at path.
func (d *treeDiffer) diff(path string, x node, hx bool, y node, hy bool) error {
	if err := d.ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: path, Err: err}
	}
	xTree := hx && x.mode == filemode.Dir
	yTree := hy && y.mode == filemode.Dir
	if hx && hy && x == y {
		return nil
	}
	if xTree && yTree {
		return d.merge(path, x, y)
	}
	if xTree {
		// A tree replaced by a leaf (or removed): its files go, the leaf comes.
		if err := d.expand(path, x, d.a, Deleted); err != nil {
			return err
		}
		hx = false
	}
	if yTree {
		if hx {
			d.leaf(path, x, true, node{}, false)
		}
		return d.expand(path, y, d.b, Added)
	}
	if hx || hy {
		d.leaf(path, x, hx, y, hy)
	}
	return nil
}

// merge compares two trees entry by entry.
func (d *treeDiffer) merge(path string, x, y node) error {
	dx, err := d.a.loadDir(x)
	if err != nil {
		return diffErr(path, err)
	}
	dy, err := d.b.loadDir(y)
	if err != nil {
		return diffErr(path, err)
	}
	i, j := 0, 0
	for i < len(dx.names) || j < len(dy.names) {
		switch {
		case j == len(dy.names) || (i < len(dx.names) && dx.names[i] < dy.names[j]):
			err = d.diff(joinPath(path, dx.names[i]), dx.nodes[i], true, node{}, false)
			i++
		case i == len(dx.names) || dy.names[j] < dx.names[i]:
			err = d.diff(joinPath(path, dy.names[j]), node{}, false, dy.nodes[j], true)
			j++
		default:
			err = d.diff(joinPath(path, dx.names[i]), dx.nodes[i], true, dy.nodes[j], true)
			i++
			j++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leaf records the change between two non-tree entries (either may be absent).
func (d *treeDiffer) leaf(path string, x node, hx bool, y node, hy bool) {
	c := Change{Path: path}
	if hx {
		c.OldMode, c.OldID = gitMode(x.mode), x.hash.String()
	}
	if hy {
		c.NewMode, c.NewID = gitMode(y.mode), y.hash.String()
	}
	switch {
	case !hy:
		c.Kind = Deleted
	case !hx:
		c.Kind = Added
	case c.OldMode.Type() != c.NewMode.Type():
		c.Kind = TypeChanged
	case x.hash != y.hash:
		c.Kind = Modified
	default:
		c.Kind = ModeChanged
	}
	d.out = append(d.out, c)
}

// expand reports every leaf under tree n as kind.
func (d *treeDiffer) expand(path string, n node, r *repoState, kind ChangeKind) error {
	if err := d.ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: path, Err: err}
	}
	dd, err := r.loadDir(n)
	if err != nil {
		return diffErr(path, err)
	}
	for i, name := range dd.names {
		p, m := joinPath(path, name), dd.nodes[i]
		if m.mode == filemode.Dir {
			if err := d.expand(p, m, r, kind); err != nil {
				return err
			}
			continue
		}
		c := Change{Kind: kind, Path: p}
		if kind == Deleted {
			c.OldMode, c.OldID = gitMode(m.mode), m.hash.String()
		} else {
			c.NewMode, c.NewID = gitMode(m.mode), m.hash.String()
		}
		d.out = append(d.out, c)
	}
	return nil
}

func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}

// DiffBackends compares any two backends by walking both: names are matched per
// directory, types and permission bits compared from Lstat, symlink targets from
// Readlink, and regular files by size first and then by reading both in bounded
// chunks. Directories are descended, never reported; a submodule of a gitree FS
// (a directory whose Info.Sys is an *Entry of kind "submodule") is a leaf compared
// by the commit it pins. Permission bits of directories are ignored. Entries that
// carry an *Entry (gitree) report its id; for others, the git blob id of a changed
// file or symlink is computed from its content. Changes are sorted by path.
func DiffBackends(ctx context.Context, a, b vfs.Backend) ([]Change, error) {
	w := walkDiffer{ctx: ctx, a: a, b: b}
	if err := w.dir(vfs.Path{}, ""); err != nil {
		return nil, err
	}
	sortChanges(w.out)
	return w.out, nil
}

type walkDiffer struct {
	ctx  context.Context
	a, b vfs.Backend
	out  []Change
}

// side is what a walk found at one path on one side.
type side struct {
	ok   bool
	info vfs.Info
}

func isSubmodule(i vfs.Info) bool {
	e, ok := i.Sys.(*Entry)
	return ok && e.Kind == "submodule"
}

func isWalkDir(s side) bool { return s.ok && s.info.Mode.IsDir() && !isSubmodule(s.info) }

func leafMode(i vfs.Info) fs.FileMode {
	switch {
	case i.Mode.IsDir():
		return fs.ModeDir | 0o755
	case i.Mode&fs.ModeSymlink != 0:
		return fs.ModeSymlink | 0o777
	}
	return i.Mode & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

func (w *walkDiffer) dir(p vfs.Path, path string) error {
	if err := w.ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: path, Err: err}
	}
	ea, err := w.a.ReadDir(w.ctx, p)
	if err != nil {
		return err
	}
	eb, err := w.b.ReadDir(w.ctx, p)
	if err != nil {
		return err
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		var name string
		var inA, inB bool
		switch {
		case j == len(eb) || (i < len(ea) && ea[i].Name < eb[j].Name):
			name, inA = ea[i].Name, true
			i++
		case i == len(ea) || eb[j].Name < ea[i].Name:
			name, inB = eb[j].Name, true
			j++
		default:
			name, inA, inB = ea[i].Name, true, true
			i++
			j++
		}
		cp, err := p.Child(name)
		if err != nil {
			return err
		}
		if err := w.entry(cp, joinPath(path, name), inA, inB); err != nil {
			return err
		}
	}
	return nil
}

func (w *walkDiffer) entry(p vfs.Path, path string, inA, inB bool) error {
	var sa, sb side
	var err error
	if inA {
		if sa.info, err = w.a.Lstat(w.ctx, p); err != nil {
			return err
		}
		sa.ok = true
	}
	if inB {
		if sb.info, err = w.b.Lstat(w.ctx, p); err != nil {
			return err
		}
		sb.ok = true
	}
	da, db := isWalkDir(sa), isWalkDir(sb)
	switch {
	case da && db:
		return w.dir(p, path)
	case da:
		if err := w.expand(w.a, p, path, Deleted); err != nil {
			return err
		}
		sa = side{}
	case db:
		if sa.ok {
			if err := w.leaf(p, path, sa, side{}); err != nil {
				return err
			}
		}
		return w.expand(w.b, p, path, Added)
	}
	if !sa.ok && !sb.ok {
		return nil
	}
	return w.leaf(p, path, sa, sb)
}

// leaf compares two non-directory entries (either may be absent).
func (w *walkDiffer) leaf(p vfs.Path, path string, sa, sb side) error {
	c := Change{Path: path}
	if sa.ok {
		c.OldMode = leafMode(sa.info)
	}
	if sb.ok {
		c.NewMode = leafMode(sb.info)
	}
	switch {
	case !sb.ok:
		c.Kind = Deleted
	case !sa.ok:
		c.Kind = Added
	case c.OldMode.Type() != c.NewMode.Type():
		c.Kind = TypeChanged
	default:
		same, err := w.sameContent(p, sa.info, sb.info)
		if err != nil {
			return err
		}
		switch {
		case !same:
			c.Kind = Modified
		case c.OldMode != c.NewMode:
			c.Kind = ModeChanged
		default:
			return nil
		}
	}
	var err error
	if sa.ok {
		if c.OldID, err = objectID(w.ctx, w.a, p, sa.info); err != nil {
			return err
		}
	}
	if sb.ok {
		if c.NewID, err = objectID(w.ctx, w.b, p, sb.info); err != nil {
			return err
		}
	}
	w.out = append(w.out, c)
	return nil
}

// expand reports every leaf under directory p of b as kind.
func (w *walkDiffer) expand(b vfs.Backend, p vfs.Path, path string, kind ChangeKind) error {
	if err := w.ctx.Err(); err != nil {
		return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: path, Err: err}
	}
	es, err := b.ReadDir(w.ctx, p)
	if err != nil {
		return err
	}
	for _, e := range es {
		cp, err := p.Child(e.Name)
		if err != nil {
			return err
		}
		i, err := b.Lstat(w.ctx, cp)
		if err != nil {
			return err
		}
		s := side{ok: true, info: i}
		if isWalkDir(s) {
			if err := w.expand(b, cp, joinPath(path, e.Name), kind); err != nil {
				return err
			}
			continue
		}
		if kind == Deleted {
			err = w.leaf(cp, joinPath(path, e.Name), s, side{})
		} else {
			err = w.leaf(cp, joinPath(path, e.Name), side{}, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sameContent compares two entries of the same type.
func (w *walkDiffer) sameContent(p vfs.Path, ia, ib vfs.Info) (bool, error) {
	ea, oka := ia.Sys.(*Entry)
	eb, okb := ib.Sys.(*Entry)
	if oka && okb {
		return ea.ID == eb.ID, nil
	}
	switch {
	case ia.Mode.IsDir(): // submodules
		return false, nil
	case ia.Mode&fs.ModeSymlink != 0:
		ta, err := w.a.Readlink(w.ctx, p)
		if err != nil {
			return false, err
		}
		tb, err := w.b.Readlink(w.ctx, p)
		if err != nil {
			return false, err
		}
		return ta == tb, nil
	case !ia.Mode.IsRegular():
		return true, nil // devices, fifos: nothing to read; modes were compared
	}
	if ia.Size != ib.Size {
		return false, nil
	}
	fa, err := w.a.OpenFile(w.ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := w.b.OpenFile(w.ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	const chunk = 32 << 10
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		if err := w.ctx.Err(); err != nil {
			return false, &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: p.String(), Err: err}
		}
		na, erra := io.ReadFull(fa, ba)
		nb, errb := io.ReadFull(fb, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		endA := erra == io.EOF || erra == io.ErrUnexpectedEOF
		endB := errb == io.EOF || errb == io.ErrUnexpectedEOF
		if erra != nil && !endA {
			return false, erra
		}
		if errb != nil && !endB {
			return false, errb
		}
		if endA || endB {
			return endA == endB, nil
		}
	}
}

// objectID returns the git object id of a leaf: from its *Entry when it has one,
// otherwise the blob id of its content (or symlink target); "" for other types.
func objectID(ctx context.Context, b vfs.Backend, p vfs.Path, i vfs.Info) (string, error) {
	if e, ok := i.Sys.(*Entry); ok {
		return e.ID, nil
	}
	h := sha1.New()
	switch {
	case i.Mode&fs.ModeSymlink != 0:
		t, err := b.Readlink(ctx, p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "blob %d\x00%s", len(t), t)
	case i.Mode.IsRegular():
		f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		// The header is written from Info.Size and checked against what was read.
		fmt.Fprintf(h, "blob %d\x00", i.Size)
		n, err := io.Copy(h, f)
		if err != nil {
			return "", err
		}
		if n != i.Size {
			return "", vfs.NewError(vfs.CodeIO, "diff", p, "file changed size while hashed")
		}
	default:
		return "", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Bounds of UnifiedDiff.
const (
	// MaxDiffBytes is the largest file UnifiedDiff reads for a text diff; larger
	// files are reported as "Files a/p and b/p differ (too large to diff)".
	MaxDiffBytes = 16 << 20
	// maxDiffLines: past this many lines on both sides together (after trimming the
	// common prefix and suffix), and maxEditCost: past this many differing lines, a
	// file is shown as one hunk replacing the whole old text by the whole new text.
	maxDiffLines = 200_000
	maxEditCost  = 1_000
	diffContext  = 3
	binarySniff  = 8000
)

// UnifiedDiff writes changes, as returned by Diff or DiffBackends on a and b, as
// git-style unified text: a "diff --git a/p b/p" header, mode lines ("new file
// mode", "deleted file mode", "old mode"/"new mode"), "index" lines when both ids
// are known, "--- a/p" / "+++ b/p" and @@ hunks with 3 lines of context. A type
// change is written as a deletion followed by an addition, as git does. Content
// with a NUL byte in its first 8000 bytes is "Binary files a/p and b/p differ".
// Paths are quoted as git quotes them, and hunk headers carry git's default
// function-name context (no diff drivers or attributes are consulted). The line diff is Myers' algorithm,
// bounded in memory: files over MaxDiffBytes are not diffed, and a pair of files
// with too many lines or differences becomes one whole-file replacement hunk.
func UnifiedDiff(ctx context.Context, a, b vfs.Backend, changes []Change, w io.Writer) error {
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: c.Path, Err: err}
		}
		if c.Kind == TypeChanged {
			del, add := c, c
			del.Kind, del.NewMode, del.NewID = Deleted, 0, ""
			add.Kind, add.OldMode, add.OldID = Added, 0, ""
			if err := unifiedOne(ctx, a, b, del, w); err != nil {
				return err
			}
			if err := unifiedOne(ctx, a, b, add, w); err != nil {
				return err
			}
			continue
		}
		if err := unifiedOne(ctx, a, b, c, w); err != nil {
			return err
		}
	}
	return nil
}

// gitModeString renders a Change mode as git's octal mode.
func gitModeString(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "160000"
	case m&fs.ModeSymlink != 0:
		return "120000"
	case m&0o111 != 0:
		return "100755"
	}
	return "100644"
}

func abbrev(id string) string {
	if id == "" {
		return "0000000"
	}
	if len(id) > 7 {
		return id[:7]
	}
	return id
}

// content reads the text a diff shows for one side of c.
func content(ctx context.Context, b vfs.Backend, path string, mode fs.FileMode, id string) ([]byte, bool, error) {
	if mode.IsDir() {
		return []byte("Subproject commit " + id + "\n"), false, nil
	}
	p, err := vfs.ParseGuest(path)
	if err != nil {
		return nil, false, err
	}
	if mode&fs.ModeSymlink != 0 {
		t, err := b.Readlink(ctx, p)
		return []byte(t), false, err
	}
	f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDiffBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > MaxDiffBytes {
		return nil, true, nil
	}
	return data, false, nil
}

func spaceTab(name string) string {
	if strings.IndexByte(name, ' ') >= 0 {
		return "\t"
	}
	return ""
}

func isBinary(b []byte) bool {
	if len(b) > binarySniff {
		b = b[:binarySniff]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// quoteName renders prefix+path as git does (core.quotePath on): unchanged unless
// it holds a control character, '"', '\\', DEL or a non-ASCII byte, in which case it
// is a double-quoted C string with octal escapes.
func quoteName(prefix, path string) string {
	s := prefix + path
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, "\\%03o", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func unifiedOne(ctx context.Context, a, b vfs.Backend, c Change, w io.Writer) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "diff --git %s %s\n", quoteName("a/", c.Path), quoteName("b/", c.Path))
	switch c.Kind {
	case Added:
		fmt.Fprintf(&buf, "new file mode %s\n", gitModeString(c.NewMode))
	case Deleted:
		fmt.Fprintf(&buf, "deleted file mode %s\n", gitModeString(c.OldMode))
	default:
		if gitModeString(c.OldMode) != gitModeString(c.NewMode) {
			fmt.Fprintf(&buf, "old mode %s\nnew mode %s\n", gitModeString(c.OldMode), gitModeString(c.NewMode))
		}
	}
	if c.Kind == ModeChanged {
		_, err := w.Write(buf.Bytes())
		return err
	}
	if c.OldID != "" || c.NewID != "" {
		fmt.Fprintf(&buf, "index %s..%s", abbrev(c.OldID), abbrev(c.NewID))
		if c.Kind == Modified && gitModeString(c.OldMode) == gitModeString(c.NewMode) {
			fmt.Fprintf(&buf, " %s", gitModeString(c.NewMode))
		}
		buf.WriteByte('\n')
	}
	var old, cur []byte
	var bigA, bigB bool
	var err error
	if c.Kind != Added {
		if old, bigA, err = content(ctx, a, c.Path, c.OldMode, c.OldID); err != nil {
			return err
		}
	}
	if c.Kind != Deleted {
		if cur, bigB, err = content(ctx, b, c.Path, c.NewMode, c.NewID); err != nil {
			return err
		}
	}
	from, to := quoteName("a/", c.Path), quoteName("b/", c.Path)
	if c.Kind == Added {
		from = "/dev/null"
	}
	if c.Kind == Deleted {
		to = "/dev/null"
	}
	switch {
	case bigA || bigB:
		fmt.Fprintf(&buf, "Files %s and %s differ (too large to diff)\n", from, to)
	case isBinary(old) || isBinary(cur):
		fmt.Fprintf(&buf, "Binary files %s and %s differ\n", from, to)
	default:
		// Like git, a name with a space ends in a tab, for patch(1).
		fmt.Fprintf(&buf, "--- %s%s\n+++ %s%s\n", from, spaceTab(from), to, spaceTab(to))
		writeHunks(&buf, splitLines(old), splitLines(cur))
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// splitLines splits b after each '\n'; a last line without one is kept as is.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// op is one line of an edit script: ' ' kept, '-' deleted, '+' inserted, with the
// line's index in its own side.
type op struct {
	kind byte
	i    int // index in old (for ' ' and '-')
	j    int // index in new (for ' ' and '+')
}

// editScript returns the edits turning x into y.
func editScript(x, y []string) []op {
	// Common prefix and suffix cost nothing.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var ops []op
	for k := 0; k < pre; k++ {
		ops = append(ops, op{' ', k, k})
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	mid, ok := myers(mx, my)
	if !ok {
		mid = mid[:0]
		for i := range mx {
			mid = append(mid, op{'-', i, 0})
		}
		for j := range my {
			mid = append(mid, op{'+', len(mx), j})
		}
	}
	for _, o := range mid {
		o.i += pre
		o.j += pre
		ops = append(ops, o)
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, op{' ', len(x) - suf + k, len(y) - suf + k})
	}
	return ops
}

// myers is Myers' O(ND) greedy diff. It gives up (ok false) when the inputs are
// longer than maxDiffLines together or need more than maxEditCost edits, which
// bounds the saved frontiers to O(maxEditCost²) ints.
func myers(x, y []string) ([]op, bool) {
	n, m := len(x), len(y)
	if n+m > maxDiffLines {
		return nil, false
	}
	if n == 0 || m == 0 {
		var ops []op
		for i := range x {
			ops = append(ops, op{'-', i, 0})
		}
		for j := range y {
			ops = append(ops, op{'+', n, j})
		}
		return ops, true
	}
	max := n + m
	if max > maxEditCost {
		max = maxEditCost
	}
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	for d := 0; d <= max; d++ {
		// Save the frontier of step d-1 over the diagonals it can reach.
		snap := make([]int, 2*d+3)
		copy(snap, v[off-d-1:off+d+2])
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			var xi int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				xi = v[off+k+1]
			} else {
				xi = v[off+k-1] + 1
			}
			yi := xi - k
			for xi < n && yi < m && x[xi] == y[yi] {
				xi++
				yi++
			}
			v[off+k] = xi
			if xi >= n && yi >= m {
				return backtrack(trace, n, m, d), true
			}
		}
	}
	return nil, false
}

// backtrack walks the saved frontiers from (n, m) back to (0, 0).
func backtrack(trace [][]int, n, m, dEnd int) []op {
	var rev []op
	xi, yi := n, m
	for d := dEnd; d > 0; d-- {
		vp := trace[d] // frontier after step d-1, indexed k+d+1 for k in [-d-1, d+1]
		at := func(k int) int { return vp[k+d+1] }
		k := xi - yi
		insert := k == -d || (k != d && at(k-1) < at(k+1))
		pk := k - 1
		if insert {
			pk = k + 1
		}
		px := at(pk)
		py := px - pk
		midx, midy := px+1, py
		if insert {
			midx, midy = px, py+1
		}
		for xi > midx && yi > midy {
			xi--
			yi--
			rev = append(rev, op{' ', xi, yi})
		}
		if insert {
			rev = append(rev, op{'+', px, py})
		} else {
			rev = append(rev, op{'-', px, py})
		}
		xi, yi = px, py
	}
	for xi > 0 && yi > 0 {
		xi--
		yi--
		rev = append(rev, op{' ', xi, yi})
	}
	out := make([]op, len(rev))
	for i, o := range rev {
		out[len(rev)-1-i] = o
	}
	return out
}

// writeHunks writes the @@ hunks of the diff from x to y.
func writeHunks(w *bytes.Buffer, x, y []string) {
	ops := editScript(x, y)
	fn := funcName{prev: -1}
	for start := 0; start < len(ops); {
		// Find the next change.
		for start < len(ops) && ops[start].kind == ' ' {
			start++
		}
		if start == len(ops) {
			return
		}
		lo := max(start-diffContext, 0)
		// Extend while the next change is within 2*context kept lines.
		end := start
		for {
			for end < len(ops) && ops[end].kind != ' ' {
				end++
			}
			k := end
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k == len(ops) || k-end > 2*diffContext {
				break
			}
			end = k
		}
		hi := min(end+diffContext, len(ops))
		writeHunk(w, ops[lo:hi], x, y, &fn)
		start = hi
	}
}

func hunkRange(start, count int) string {
	if count == 1 {
		return strconv.Itoa(start)
	}
	if count == 0 {
		return strconv.Itoa(start-1) + ",0"
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

// funcName is git's default hunk-header context: the nearest old line above the
// hunk that starts with a letter, '_' or '$' (cut to 80 bytes, trailing space
// trimmed), searched back to where the previous hunk's search began; a hunk that
// finds none keeps the previous hunk's name.
type funcName struct {
	text string
	prev int
}

func (f *funcName) find(x []string, start int) string {
	for l := start - 1; l > f.prev && l >= 0; l-- {
		line := x[l]
		if line == "" {
			continue
		}
		c := line[0]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$') {
			continue
		}
		if len(line) > 80 {
			line = line[:80]
		}
		f.text = strings.TrimRight(line, " \t\n\v\f\r")
		break
	}
	f.prev = start - 1
	return f.text
}

func writeHunk(w *bytes.Buffer, ops []op, x, y []string, fn *funcName) {
	var nx, ny int
	sx, sy := -1, -1
	for _, o := range ops {
		if o.kind != '+' {
			nx++
			if sx < 0 {
				sx = o.i
			}
		}
		if o.kind != '-' {
			ny++
			if sy < 0 {
				sy = o.j
			}
		}
	}
	// An empty side starts where the other side's position says it is.
	if sx < 0 {
		sx = ops[0].i
	}
	if sy < 0 {
		sy = ops[0].j
	}
	fmt.Fprintf(w, "@@ -%s +%s @@", hunkRange(sx+1, nx), hunkRange(sy+1, ny))
	if name := fn.find(x, sx); name != "" {
		w.WriteByte(' ')
		w.WriteString(name)
	}
	w.WriteByte('\n')
	for _, o := range ops {
		var line string
		switch o.kind {
		case '-':
			line = x[o.i]
		default:
			line = y[o.j]
		}
		w.WriteByte(o.kind)
		w.WriteString(line)
		if len(line) == 0 || line[len(line)-1] != '\n' {
			w.WriteString("\n\\ No newline at end of file\n")
		}
	}
}
