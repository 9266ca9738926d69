//go:build linux

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/vfs"
)

// summary is a run's change summary, printed compactly (counts by directory,
// the first paths, every refusal) or as JSON (--json, every path).
type summary struct {
	Work       string         `json:"work"`
	Verb       string         `json:"result"`
	Counts     map[string]int `json:"counts"`
	Bytes      int64          `json:"bytes_written"`
	Dirs       []dirCount     `json:"directories"`
	Changes    []changeLine   `json:"changes"`
	Refused    []refusalLine  `json:"refused,omitempty"`
	Conflicts  []string       `json:"conflicts,omitempty"`
	NotApplied []refusalLine  `json:"not_applied,omitempty"`
	Theirs     []string       `json:"kept_source_version,omitempty"`
	Kept       string         `json:"kept_id,omitempty"`
	Checkout   string         `json:"checkout,omitempty"`
	Discarded  bool           `json:"discarded,omitempty"`
	Out        string         `json:"out,omitempty"`

	at     vfs.Path
	show   int
	prefix string // "run" or "sync"
}

type dirCount struct {
	Dir      string `json:"dir"`
	Added    int    `json:"added,omitempty"`
	Modified int    `json:"modified,omitempty"`
	Deleted  int    `json:"deleted,omitempty"`
	Other    int    `json:"other,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
}

type changeLine struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
	Type string `json:"type,omitempty"` // "dir", "symlink"; "" for a file
	Size int64  `json:"size,omitempty"`

	exec bool // a regular file with an execute bit, after the change
}

type refusalLine struct {
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Cause  string `json:"cause,omitempty"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// newSummary builds the summary of rep (Applied: applied, or would be).
func newSummary(at vfs.Path, verb string, rep *syncback.Report) *summary {
	s := &summary{Work: at.String(), Verb: verb, Counts: map[string]int{}, at: at}
	dirs := map[string]*dirCount{}
	for _, c := range rep.Applied {
		s.Counts[string(c.Kind)]++
		if c.Kind != materialize.Touched { // a time alone: counted, not listed
			s.addChange(c, dirs)
		}
	}
	for _, d := range dirs {
		s.Dirs = append(s.Dirs, *d)
	}
	sort.Slice(s.Dirs, func(i, j int) bool {
		a, b := s.Dirs[i], s.Dirs[j]
		na, nb := a.Added+a.Modified+a.Deleted+a.Other, b.Added+b.Modified+b.Deleted+b.Other
		if na != nb {
			return na > nb
		}
		return a.Dir < b.Dir
	})
	s.addUnapplied(rep)
	return s
}

// addChange lists change c and counts it in its directory's line of dirs.
func (s *summary) addChange(c materialize.Change, dirs map[string]*dirCount) {
	var size int64
	if c.New != nil && c.New.IsRegular() && c.Kind != materialize.Deleted {
		size = c.New.Size
		if c.Kind != materialize.ModeChanged {
			s.Bytes += size
		}
	}
	exec := c.New != nil && c.New.IsRegular() && c.Kind != materialize.Deleted && c.New.Mode&0o111 != 0
	s.Changes = append(s.Changes, changeLine{Kind: string(c.Kind), Path: joinGuest(s.at, c.Path), Type: changeType(c), Size: size, exec: exec})
	d := path.Dir(c.Path)
	dc := dirs[d]
	if dc == nil {
		dc = &dirCount{Dir: joinGuest(s.at, d)}
		dirs[d] = dc
	}
	switch c.Kind {
	case materialize.Added:
		dc.Added++
	case materialize.Modified:
		dc.Modified++
	case materialize.Deleted:
		dc.Deleted++
	default:
		dc.Other++
	}
	dc.Bytes += size
}

// changeType is the summary's type of what c changes: "dir", "symlink", or
// "" for a file.
func changeType(c materialize.Change) string {
	e := c.New
	if e == nil {
		e = c.Old
	}
	switch {
	case e == nil:
		return ""
	case e.IsDir():
		return "dir"
	case e.IsSymlink():
		return "symlink"
	}
	return ""
}

// addUnapplied lists what rep refused, found in conflict or did not apply.
func (s *summary) addUnapplied(rep *syncback.Report) {
	at := s.at
	for _, rf := range rep.Refused {
		s.Refused = append(s.Refused, refusalLine{string(rf.Change.Kind), joinGuest(at, rf.Change.Path), "refused", string(rf.Code), rf.Reason})
	}
	for _, c := range rep.Conflicts {
		s.Conflicts = append(s.Conflicts, joinGuest(at, c))
	}
	for _, u := range rep.NotApplied {
		switch u.Cause {
		case syncback.CauseRefused:
		case syncback.CauseTheirs:
			s.Theirs = append(s.Theirs, joinGuest(at, u.Change.Path))
		case syncback.CauseConflict:
			if !containsString(rep.Conflicts, u.Change.Path) {
				s.NotApplied = append(s.NotApplied, refusalLine{string(u.Change.Kind), joinGuest(at, u.Change.Path), string(u.Cause), string(u.Code), u.Reason})
			}
		default:
			s.NotApplied = append(s.NotApplied, refusalLine{string(u.Change.Kind), joinGuest(at, u.Change.Path), string(u.Cause), string(u.Code), u.Reason})
		}
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (s *summary) cmd() string {
	if s.prefix == "" {
		return "run"
	}
	return s.prefix
}

func (s *summary) empty() bool {
	return len(s.Changes) == 0 && len(s.Refused) == 0 && len(s.Conflicts) == 0 && len(s.NotApplied) == 0 && len(s.Theirs) == 0 && s.Counts[string(materialize.Touched)] == 0
}

// maxDirs is how many directories the text summary counts before "N more".
const maxDirs = 8

// printSummary prints s on stderr (text, or JSON with --json), then err when
// nothing else said what went wrong.
func (r *runner) printSummary(s *summary, err error) {
	if s.show == 0 {
		s.show = r.show
	}
	if r.prefix != "" {
		s.prefix = r.prefix
	}
	if r.jsonOut {
		if s.Changes == nil {
			s.Changes = []changeLine{}
		}
		if s.Dirs == nil {
			s.Dirs = []dirCount{}
		}
		b, _ := json.Marshal(termsafe.ForJSONValue(s))
		r.say("%s\n", b)
		return
	}
	writeSummary(r.msgs(), s, err)
}

func writeSummary(w io.Writer, s *summary, err error) {
	if s.empty() {
		fmt.Fprintf(w, "capfs: %s: no changes in %s\n", s.cmd(), showPath(s.Work))
	} else {
		fmt.Fprintf(w, "capfs: %s: %s in %s: %s\n", s.cmd(), s.Verb, showPath(s.Work), s.countsLine())
		if len(s.Dirs) > 1 && s.show >= 0 && len(s.Changes) > s.show {
			writeDirs(w, s.Dirs)
		}
		writeChanges(w, tellingFirst(s.Changes), s.show)
	}
	writeUnapplied(w, s)
	if err != nil && len(s.Refused)+len(s.Conflicts)+len(s.NotApplied) == 0 {
		fmt.Fprintf(w, "capfs: sync-back: %s\n", showError(err))
	}
	if s.Discarded {
		fmt.Fprintf(w, "capfs: run: the changes are discarded (--keep keeps them for capfs sync)\n")
	}
	if s.Out != "" {
		fmt.Fprintf(w, "capfs: run: written into %s\n", show(s.Out))
	}
}

// countsLine is the summary's first line's counts: of each kind, the bytes
// written, the refusals and conflicts.
func (s *summary) countsLine() string {
	var parts []string
	for _, k := range []struct {
		kind  materialize.ChangeKind
		label string
	}{{materialize.Added, "added"}, {materialize.Modified, "modified"}, {materialize.Deleted, "deleted"},
		{materialize.TypeChanged, "changed type"}, {materialize.ModeChanged, "changed mode"}, {materialize.Touched, "touched"}} {
		if n := s.Counts[string(k.kind)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k.label))
		}
	}
	line := strings.Join(parts, ", ")
	if line == "" {
		line = "nothing"
	}
	if s.Bytes > 0 {
		line += " (" + humanBytes(s.Bytes) + " written)"
	}
	if n := len(s.Refused); n > 0 {
		line += fmt.Sprintf("; %d refused", n)
	}
	if n := len(s.Conflicts); n > 0 {
		line += fmt.Sprintf("; %d in conflict", n)
	}
	return line
}

// writeDirs writes the counts of the first maxDirs directories.
func writeDirs(w io.Writer, dirs []dirCount) {
	for i, d := range dirs {
		if i == maxDirs {
			fmt.Fprintf(w, "    ... %d more directories\n", len(dirs)-maxDirs)
			break
		}
		var c []string
		for _, kv := range []struct {
			n int
			l string
		}{{d.Added, "added"}, {d.Modified, "modified"}, {d.Deleted, "deleted"}, {d.Other, "other"}} {
			if kv.n > 0 {
				c = append(c, fmt.Sprintf("%d %s", kv.n, kv.l))
			}
		}
		size := ""
		if d.Bytes > 0 {
			size = " (" + humanBytes(d.Bytes) + ")"
		}
		fmt.Fprintf(w, "    %s/: %s%s\n", show(d.Dir), strings.Join(c, ", "), size)
	}
}

// writeChanges writes the first n changes (n < 0: all), one a line.
func writeChanges(w io.Writer, cs []changeLine, n int) {
	for i, c := range cs {
		if n >= 0 && i >= n {
			fmt.Fprintf(w, "  ... and %d more (--show -1 lists every path, --json prints them all)\n", len(cs)-i)
			break
		}
		size := ""
		if c.Size > 0 {
			size = "  " + humanBytes(c.Size)
		}
		name := show(c.Path)
		switch c.Type {
		case "dir":
			name += "/"
		case "symlink":
			name += "@"
		}
		fmt.Fprintf(w, "  %s %s%s\n", changeLetter(materialize.ChangeKind(c.Kind)), name, size)
	}
}

// writeUnapplied writes every refusal, conflict, change not applied, and
// path whose source version was kept.
func writeUnapplied(w io.Writer, s *summary) {
	for _, rf := range s.Refused {
		fmt.Fprintf(w, "capfs: refused: %s %s: %s (%s)\n", rf.Kind, show(rf.Path), show(rf.Reason), rf.Code)
	}
	for _, c := range s.Conflicts {
		fmt.Fprintf(w, "capfs: conflict: %s changed in the source and in the sandbox (--conflict ours or theirs settles it)\n", show(c))
	}
	for _, u := range s.NotApplied {
		fmt.Fprintf(w, "capfs: not applied: %s %s: %s (%s)\n", u.Kind, show(u.Path), show(u.Reason), u.Cause)
	}
	for _, p := range s.Theirs {
		fmt.Fprintf(w, "capfs: kept the source's version of %s\n", show(p))
	}
}

// maxSkipLines is how many paths left out of a checkout, of one kind, are
// listed one a line; more are counted on one line.
const maxSkipLines = 3

// sayNotInSandbox reports the paths of the checkout of p left out of the
// sandbox: one a line when there are few of a kind (code) or with --show -1,
// else one line with the count and the first two.
func (r *runner) sayNotInSandbox(p vfs.Path, skips []materialize.Skip) {
	byCode := map[vfs.Code][]string{}
	var codes []vfs.Code
	for _, sk := range skips {
		if byCode[sk.Code] == nil {
			codes = append(codes, sk.Code)
		}
		byCode[sk.Code] = append(byCode[sk.Code], showGuest(p, sk.Path))
	}
	for _, c := range codes {
		paths := byCode[c]
		if len(paths) <= maxSkipLines || r.show < 0 {
			for _, q := range paths {
				r.say("capfs: run: not in the sandbox: %s (%s)\n", q, c)
			}
			continue
		}
		what := fmt.Sprintf("paths (%s)", c)
		if c == vfs.CodePermission {
			what = "paths the policy hides"
		}
		r.say("capfs: run: not in the sandbox: %d %s (%s, %s and %d more; --show -1 lists them)\n",
			len(paths), what, paths[0], paths[1], len(paths)-2)
	}
}

// tellingFirst returns the changes in the order the text summary lists them,
// the most telling first: executables, then shallower paths, then files other
// than build intermediates (object files, archives, bytecode), then by path. A
// build's binary and top-level outputs thus come before its object files.
func tellingFirst(cs []changeLine) []changeLine {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b changeLine) int {
		if a.exec != b.exec {
			if a.exec {
				return -1
			}
			return 1
		}
		if da, db := strings.Count(a.Path, "/"), strings.Count(b.Path, "/"); da != db {
			return cmp.Compare(da, db)
		}
		if ia, ib := intermediate(a.Path), intermediate(b.Path); ia != ib {
			if ib {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// intermediateExts are the extensions of build intermediates: what compilers
// leave beside the outputs that matter.
var intermediateExts = map[string]bool{
	".o": true, ".obj": true, ".a": true, ".lo": true, ".la": true, ".d": true,
	".pyc": true, ".pyo": true, ".class": true, ".gcno": true, ".gcda": true,
	".dep": true, ".tmp": true, ".rlib": true, ".rmeta": true,
}

// intermediate reports whether p names a build intermediate.
func intermediate(p string) bool {
	return intermediateExts[strings.ToLower(path.Ext(p))]
}

// printApplied prints a recovered sync's report.
func printApplied(w io.Writer, at vfs.Path, rep *syncback.Report, err error, n int) {
	if rep == nil {
		if err != nil {
			fmt.Fprintf(w, "capfs: sync-back: %s\n", showError(vfs.Under(err, at)))
		}
		return
	}
	s := newSummary(at, "applied", rep)
	s.show = n
	if s.show == 0 {
		s.show = 10
	}
	writeSummary(w, s, err)
}
