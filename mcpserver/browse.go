package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
)

type listIn struct {
	Path    string `json:"path,omitempty" jsonschema:"the directory to list, relative to the root (default the root)"`
	SortBy  string `json:"sort_by,omitempty" jsonschema:"name (default), size (largest first) or mtime (newest first)"`
	Reverse bool   `json:"reverse,omitempty" jsonschema:"reverse the order"`
	Sizes   *bool  `json:"sizes,omitempty" jsonschema:"show sizes and times (default true); false lists names and types only, without a stat per entry (faster on large directories; entries the policy refuses are then not marked hidden)"`
}

// listEntry is one entry of list's and tree's structured results.
type listEntry struct {
	Name    string `json:"name" jsonschema:"the entry's name (in tree: its path from the tree's directory)"`
	Type    string `json:"type" jsonschema:"file, directory, symlink, special, hidden (refused by the policy: not even its size is shown), unreadable, or unaddressable (a host name no path can hold, such as one with a backslash: it cannot be read; reason says why)"`
	Size    int64  `json:"size,omitempty" jsonschema:"a file's size in bytes"`
	ModTime string `json:"mod_time,omitempty" jsonschema:"modification time, RFC 3339"`
	Target  string `json:"target,omitempty" jsonschema:"a symlink's target"`
	Depth   int    `json:"depth,omitempty" jsonschema:"tree only: levels below the tree's directory"`
	Reason  string `json:"reason,omitempty" jsonschema:"unaddressable only: why no path can name the entry"`
}

// skippedNames collects the entries listings leave out because no path can
// name them (vfs.WithUnaddressable), as entries of type unaddressable.
type skippedNames struct {
	mu    sync.Mutex
	seen  map[string]bool
	add   func(listEntry) // called with mu held
	dir   string          // the directory being listed, as the result names it
	depth int             // its depth
}

// context returns ctx reporting to k.
func (k *skippedNames) context(ctx context.Context) context.Context {
	return vfs.WithUnaddressable(ctx, k.note)
}

// note adds u, in the directory being listed, unless it was added already.
func (k *skippedNames) note(u vfs.Unaddressable) {
	k.mu.Lock()
	defer k.mu.Unlock()
	name := joinGuest(k.dir, u.Name)
	if k.seen[name] {
		return
	}
	if k.seen == nil {
		k.seen = map[string]bool{}
	}
	k.seen[name] = true
	k.add(listEntry{Name: name, Type: "unaddressable", Reason: u.Reason, Depth: k.depth})
}

// addressable returns ents without the entries whose names no path can hold
// (a git tree lists them), which it notes as unaddressable.
func (k *skippedNames) addressable(ents []fs.DirEntry) []fs.DirEntry {
	out := ents[:0]
	for _, e := range ents {
		if why := vfs.NameProblem(e.Name()); why != "" {
			k.note(vfs.Unaddressable{Name: e.Name(), Reason: why})
			continue
		}
		out = append(out, e)
	}
	return out
}

// at says that the listings from now on are of directory dir, at depth.
func (k *skippedNames) at(dir string, depth int) {
	k.mu.Lock()
	k.dir, k.depth = dir, depth
	k.mu.Unlock()
}

type listOut struct {
	Path    string      `json:"path"`
	Entries []listEntry `json:"entries" jsonschema:"the entries, described; with list's sizes false only those that are neither a file nor a directory (symlinks with their targets, special files), the rest being in names"`
	Names   []string    `json:"names,omitempty" jsonschema:"list with sizes false: every entry's name in order, a directory's ending in /"`
	More    int         `json:"more,omitempty" jsonschema:"entries not shown"`
}

// searchSkips collects, for a search (grep, glob), the names its listings
// left out because no path can hold them: skippedNames, the list and tree
// tools' collector, without the directory (a search's walk is not in order).
type searchSkips struct {
	k    skippedNames
	ents []listEntry
}

// context returns ctx reporting to s.
func (s *searchSkips) context(ctx context.Context) context.Context {
	s.k.add = func(e listEntry) { s.ents = append(s.ents, e) }
	return s.k.context(ctx)
}

// names lists them as "name: reason", for a tool's structured result.
func (s *searchSkips) names() []string {
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	var out []string
	for _, e := range s.ents {
		out = append(out, esc(e.Name)+": "+e.Reason)
	}
	return out
}

// text is listText's line for each, for a tool's text result.
func (s *searchSkips) text() string {
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	if len(s.ents) == 0 {
		return ""
	}
	return listText(s.ents, false, 0)
}

type statIn struct {
	Path string `json:"path" jsonschema:"the entry to describe"`
}

type noIn struct{}

// listing entries shown per list call, at most.
const maxList = 10000

// describe fills a listEntry from a directory entry; a policy refusal makes
// it hidden, shown with no size.
func (s *server) describe(ctx context.Context, dirPath string, e fs.DirEntry, name string) listEntry {
	le := listEntry{Name: name}
	info, err := e.Info()
	switch {
	case err != nil && (vfs.CodeOf(err) == vfs.CodePermission || vfs.CodeOf(err) == vfs.CodeOutside):
		le.Type = "hidden"
	case err != nil:
		le.Type = "unreadable"
	default:
		le.ModTime = info.ModTime().UTC().Format(time.RFC3339)
		switch m := info.Mode(); {
		case m.IsDir():
			le.Type = "directory"
		case m&fs.ModeSymlink != 0:
			le.Type = "symlink"
			if t, lerr := s.root.Readlink(ctx, joinGuest(dirPath, e.Name())); lerr == nil {
				le.Target = t
			} else {
				le.Target = "?"
			}
		case m.IsRegular():
			le.Type = "file"
			le.Size = info.Size()
		default:
			le.Type = "special"
		}
	}
	return le
}

// walked is an entry tree found, to be described.
type walked struct {
	idx int
	dir string
	d   fs.DirEntry
}

// describeWalked fills entries[w.idx] for each walked entry, in parallel,
// keeping the name and depth already set.
func (s *server) describeWalked(ctx context.Context, entries []listEntry, ws []walked) {
	eachParallel(len(ws), func(i int) {
		w := ws[i]
		e := &entries[w.idx]
		le := s.describe(ctx, w.dir, w.d, e.Name)
		le.Depth = e.Depth
		*e = le
	})
}

// describeAll describes entries in parallel (each Info is a Dir call).
func (s *server) describeAll(ctx context.Context, dirPath string, ents []fs.DirEntry) []listEntry {
	out := make([]listEntry, len(ents))
	eachParallel(len(ents), func(i int) {
		out[i] = s.describe(ctx, dirPath, ents[i], ents[i].Name())
	})
	return out
}

// eachParallel calls fn with every index in [0, n) on up to 8 goroutines
// (each call a Dir call, say), and returns once all are done.
func eachParallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(8, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// namesOnly describes entries from their names and types alone.
func (s *server) namesOnly(ctx context.Context, dirPath string, ents []fs.DirEntry) []listEntry {
	out := make([]listEntry, len(ents))
	for i, e := range ents {
		le := listEntry{Name: e.Name()}
		switch t := e.Type(); {
		case t.IsDir():
			le.Type = "directory"
		case t&fs.ModeSymlink != 0:
			le.Type = "symlink"
			if tg, err := s.root.Readlink(ctx, joinGuest(dirPath, e.Name())); err == nil {
				le.Target = tg
			} else {
				le.Target = "?"
			}
		case t.IsRegular():
			le.Type = "file"
		default:
			le.Type = "special"
		}
		out[i] = le
	}
	return out
}

func (s *server) list(ctx context.Context, in listIn) (listOut, string, error) {
	p := in.Path
	if p == "" {
		p = "."
	}
	out := listOut{Path: p, Entries: []listEntry{}}
	switch in.SortBy {
	case "", "name", "size", "mtime":
	default:
		return out, "", argErrorf("argument \"sort_by\" must be name, size or mtime, got %q", in.SortBy)
	}
	var skipped []listEntry
	k := skippedNames{add: func(e listEntry) { skipped = append(skipped, e) }}
	ents, err := s.root.ReadDir(k.context(ctx), p)
	if err != nil {
		return out, "", err
	}
	ents = k.addressable(ents)
	if len(ents) > maxList {
		out.More = len(ents) - maxList
		ents = ents[:maxList]
	}
	if in.Sizes != nil && !*in.Sizes {
		if in.SortBy == "size" || in.SortBy == "mtime" {
			return out, "", argErrorf("sort_by %q needs sizes and times: leave \"sizes\" true", in.SortBy)
		}
		out.Entries = append(s.namesOnly(ctx, p, ents), skipped...)
		if in.Reverse {
			slices.Reverse(out.Entries)
		}
		text := listText(out.Entries, false, out.More)
		namesOnly(&out)
		return out, text, nil
	}
	out.Entries = append(s.describeAll(ctx, p, ents), skipped...)
	sortEntries(out.Entries, in.SortBy)
	if in.Reverse {
		slices.Reverse(out.Entries)
	}
	return out, listText(out.Entries, true, out.More), nil
}

// namesOnly moves out's plain files and directories (these with a trailing
// "/") to out.Names, in order, and keeps the other entries described: a
// client decodes 883 names in one array of strings in a third of the time
// of as many objects.
func namesOnly(out *listOut) {
	out.Names = make([]string, len(out.Entries))
	other := out.Entries[:0:0]
	for i, e := range out.Entries {
		switch e.Type {
		case "directory":
			out.Names[i] = e.Name + "/"
		case "file":
			out.Names[i] = e.Name
		default:
			out.Names[i] = e.Name
			other = append(other, e)
		}
	}
	out.Entries = other
}

// sortEntries sorts entries, listed by name, by size or modification time
// (largest, newest first) when by says so.
func sortEntries(entries []listEntry, by string) {
	switch by {
	case "size":
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].Size > entries[j].Size })
	case "mtime":
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].ModTime > entries[j].ModTime })
	}
}

// listText is list's text result.
func listText(entries []listEntry, sizes bool, more int) string {
	var b strings.Builder
	b.Grow(len(entries) * 40)
	if len(entries) == 0 {
		b.WriteString("(empty directory)\n")
	}
	for _, e := range entries {
		name := esc(e.Name)
		switch e.Type {
		case "directory":
			b.WriteString("[DIR]  ")
			b.WriteString(name)
			b.WriteString("/\n")
		case "symlink":
			b.WriteString("[LINK] ")
			b.WriteString(name)
			b.WriteString(" -> ")
			b.WriteString(esc(e.Target))
			b.WriteByte('\n')
		case "file":
			b.WriteString("[FILE] ")
			b.WriteString(name)
			if sizes {
				b.WriteString("  ")
				b.WriteString(strconv.FormatInt(e.Size, 10))
				b.WriteString(" bytes")
			}
			b.WriteByte('\n')
		case "hidden":
			fmt.Fprintf(&b, "[HIDDEN] %s (refused by the policy)\n", name)
		case "unreadable":
			fmt.Fprintf(&b, "[?]    %s (unreadable)\n", name)
		case "unaddressable":
			fmt.Fprintf(&b, "[SKIPPED] %s (cannot be addressed: %s)\n", name, e.Reason)
		default:
			fmt.Fprintf(&b, "[SPECIAL] %s\n", name)
		}
	}
	if more > 0 {
		fmt.Fprintf(&b, "(%d more entries not shown)\n", more)
	}
	return b.String()
}

// esc escapes a guest-controlled name, path or symlink target for a text result:
// control characters, bidi overrides and invalid UTF-8 are written as Go/JSON
// escapes (\n, \u001b, \u202e, \xff) and backslashes doubled, so one entry is
// one line and a name cannot forge another (see internal/termsafe). Every text
// result puts each name through it once; JSON results (stat, mounts) hold raw
// names, which JSON escapes itself.
func esc(s string) string { return termsafe.Escape(s) }

func joinGuest(dir, name string) string {
	if dir == "" || dir == "." || dir == "/" {
		return name
	}
	return strings.TrimSuffix(dir, "/") + "/" + name
}

func (s *server) headLimit(n int) int {
	if n <= 0 {
		return s.opts.HeadLimit
	}
	return n
}

// cleanGuest is the path as Walk reports the root: cleaned, "." for the root.
func cleanGuest(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// relTo is p relative to root, both as Walk reports them.
func relTo(root, p string) string {
	r := cleanGuest(root)
	if r == "." {
		return p
	}
	if p == r {
		return "."
	}
	return strings.TrimPrefix(p, r+"/")
}

func relDepth(root, p string) int {
	rel := relTo(root, p)
	if rel == "." {
		return 0
	}
	return strings.Count(rel, "/") + 1
}

// statOut is the stat tool's answer.
type statOut struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	ModTime    string `json:"mod_time"`
	Target     string `json:"target,omitempty"`
	TargetType string `json:"target_type,omitempty"`
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	default:
		return "special"
	}
}

func (s *server) stat(ctx context.Context, in statIn) (statOut, string, error) {
	info, err := s.root.Lstat(ctx, in.Path)
	if err != nil {
		return statOut{}, "", err
	}
	out := statOut{Path: in.Path, Type: typeName(info.Mode()), Size: info.Size(),
		Mode: info.Mode().String(), ModTime: info.ModTime().UTC().Format(time.RFC3339Nano)}
	if info.Mode()&fs.ModeSymlink != 0 {
		if out.Target, err = s.root.Readlink(ctx, in.Path); err != nil {
			return statOut{}, "", err
		}
		if ti, terr := s.root.Stat(ctx, in.Path); terr == nil {
			out.TargetType = typeName(ti.Mode())
		} else {
			out.TargetType = "unreachable (" + string(vfs.CodeOf(terr)) + ")"
		}
	}
	text, err := jsonText(out)
	return out, text, err
}

func jsonText(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}

// mountsOut is the mounts tool's answer.
type mountsOut struct {
	Mounts []MountInfo `json:"mounts"`
}

func (s *server) mountList() []MountInfo {
	var ms []MountInfo
	if s.opts.Mounts != nil {
		ms = s.opts.Mounts()
	} else {
		ms = []MountInfo{{Path: "/", Backend: "capfs", ReadOnly: s.root.IsReadOnly()}}
	}
	if ms == nil {
		ms = []MountInfo{}
	}
	return ms
}

func (s *server) mounts(ctx context.Context, _ noIn) (mountsOut, string, error) {
	if err := s.guard(ctx); err != nil {
		return mountsOut{}, "", err
	}
	out := mountsOut{Mounts: s.mountList()}
	text, err := jsonText(out.Mounts)
	return out, text, err
}

// helpOut is the help tool's answer.
type helpOut struct {
	Text string `json:"text"`
}

func (s *server) help(ctx context.Context, _ noIn) (helpOut, string, error) {
	if err := s.guard(ctx); err != nil {
		return helpOut{}, "", err
	}
	var b strings.Builder
	b.WriteString(toolHelp)
	b.WriteString("\nWhat is mounted (see the mounts tool):\n")
	for _, m := range s.mountList() {
		ro := "read-write"
		if m.ReadOnly {
			ro = "read-only"
		}
		fmt.Fprintf(&b, "  %s  %s, %s", esc(m.Path), m.Backend, ro)
		if m.Note != "" {
			fmt.Fprintf(&b, " (%s)", m.Note)
		}
		b.WriteByte('\n')
	}
	if s.root.IsReadOnly() {
		b.WriteString("\nThis server is read-only: it offers no tool that writes.\n")
	}
	return helpOut{Text: b.String()}, b.String(), nil
}

const toolHelp = `How to work with these files:

Paths are slash-separated and relative to the root; a leading / means that root,
never the host's, and .. cannot climb above it. Start with mounts or list to see
what is there, glob to find files by name, grep to find text, read to look at a
file (tail for its end, read on an image or audio file returns the media).
Change files with edit (one exact replacement), multi_edit (several, all or
none), apply_patch (several files, all or none) or write (a whole file).

Every error starts with "error <code>:" and says what to do. The codes:
  not_found             the path does not exist: check it with list or glob
  fs_permission_denied  the host's policy refuses this path (secrets such as .env
                        and .ssh, startup files such as .bashrc, .git/hooks): do
                        not retry it under another name; list shows such entries
                        as hidden
  read_only             this location cannot be written
  path_outside_sandbox  the path (or a symlink on it) leads outside the root
  invalid_argument      an argument is missing, unknown, of the wrong type or out
                        of range: the message names it
  invalid_path          the path itself is malformed (NUL byte, empty name)
  not_supported         e.g. a binary or non-UTF-8 file given to read
  file_too_large        read a smaller part (offset and limit) or use tail
  conflict              an edit's old_string occurs several times, or the file
                        changed during the call
  already_exists, is_a_directory, not_a_directory, not_empty, quota_exceeded,
  revoked (access withdrawn: nothing will work any more), canceled
Text is UTF-8; read reports a file's line endings when they are CRLF, and edits
keep them (old_string may be written with \n). Names holding control
characters, bidi controls or invalid UTF-8 are shown escaped as in a JSON string
(\n, \u001b, \u202e, \xff) and a backslash in a name is shown doubled; write
the name the same way inside a JSON string argument to address it.
`
