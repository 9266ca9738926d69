package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

type writeIn struct {
	Path       string `json:"path" jsonschema:"the file to write, relative to the root; missing parent directories are created"`
	Content    string `json:"content" jsonschema:"the complete new contents of the file"`
	CreateOnly bool   `json:"create_only,omitempty" jsonschema:"fail with already_exists instead of replacing an existing file"`
}

type appendIn struct {
	Path    string `json:"path" jsonschema:"the file to append to; created if missing"`
	Content string `json:"content" jsonschema:"the text to add at the end of the file"`
}

type editIn struct {
	Path       string `json:"path" jsonschema:"the file to edit"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace; it must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence"`
	DryRun     bool   `json:"dry_run,omitempty" jsonschema:"change nothing; return the unified diff the edit would make"`
}

type mkdirIn struct {
	Path string `json:"path" jsonschema:"the directory to create, with any missing parents"`
}

type moveIn struct {
	Source      string `json:"source" jsonschema:"the file or directory to move or rename"`
	Destination string `json:"destination" jsonschema:"its new path"`
	Overwrite   bool   `json:"overwrite,omitempty" jsonschema:"replace an existing file (or empty directory) at destination"`
}

type copyIn struct {
	Source      string `json:"source" jsonschema:"the file or directory to copy (directories are copied recursively)"`
	Destination string `json:"destination" jsonschema:"the path of the copy"`
	Overwrite   bool   `json:"overwrite,omitempty" jsonschema:"replace an existing file at destination"`
}

type removeIn struct {
	Path      string `json:"path" jsonschema:"the file, symlink or directory to remove"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"remove a non-empty directory and everything beneath it"`
}

// ensureParent creates the parent directories of p if needed.
func (s *server) ensureParent(ctx context.Context, p string) error {
	parent, err := vfs.ParseGuest(p)
	if err != nil {
		return err // a bad path: let the Dir call that follows report it
	}
	if parent.IsRoot() || parent.Dir().IsRoot() {
		return nil
	}
	return s.root.MkdirAll(ctx, "/"+parent.Dir().String())
}

// withParents runs fn, and if it fails with not_found, creates path's missing
// parent directories and runs it again: a refused call creates nothing.
func (s *server) withParents(ctx context.Context, path string, fn func() error) error {
	return s.withParentsOf(ctx, "", path, fn)
}

// withParentsOf is withParents for a call with a source: the parents are created
// only if source exists.
func (s *server) withParentsOf(ctx context.Context, source, path string, fn func() error) error {
	err := fn()
	if vfs.CodeOf(err) != vfs.CodeNotFound {
		return err
	}
	if source != "" {
		if _, serr := s.root.Lstat(ctx, source); serr != nil {
			return serr
		}
	}
	if perr := s.ensureParent(ctx, path); perr != nil {
		if vfs.CodeOf(perr) == vfs.CodeNotFound {
			return err
		}
		return perr
	}
	return fn()
}

func (s *server) write(ctx context.Context, in writeIn) (changeOut, string, error) {
	if in.CreateOnly {
		if err := s.withParents(ctx, in.Path, func() error {
			_, err := s.root.CreateFile(ctx, in.Path)
			return err
		}); err != nil {
			return changeOut{}, "", err
		}
		if err := s.root.WriteFile(ctx, in.Path, []byte(in.Content), 0o644); err != nil {
			_ = s.root.Remove(ctx, in.Path)
			return changeOut{}, "", err
		}
		return changeOut{Path: in.Path, Bytes: len(in.Content)}, fmt.Sprintf("created %s (%d bytes)\n", esc(in.Path), len(in.Content)), nil
	}
	if err := s.withParents(ctx, in.Path, func() error {
		return s.root.WriteFile(ctx, in.Path, []byte(in.Content), 0o644)
	}); err != nil {
		return changeOut{}, "", err
	}
	return changeOut{Path: in.Path, Bytes: len(in.Content)}, fmt.Sprintf("wrote %s (%d bytes)\n", esc(in.Path), len(in.Content)), nil
}

func (s *server) appendTool(ctx context.Context, in appendIn) (changeOut, string, error) {
	if err := s.root.Append(ctx, in.Path, []byte(in.Content)); err != nil {
		return changeOut{}, "", err
	}
	return changeOut{Path: in.Path, Bytes: len(in.Content)}, fmt.Sprintf("appended %d bytes to %s\n", len(in.Content), esc(in.Path)), nil
}

// changeOut is the structured result of the tools that change files.
type changeOut struct {
	Path         string `json:"path" jsonschema:"the file or directory changed (move and copy: the source)"`
	Destination  string `json:"destination,omitempty" jsonschema:"move and copy: where it went"`
	Bytes        int    `json:"bytes,omitempty" jsonschema:"bytes written"`
	Replacements int    `json:"replacements,omitempty" jsonschema:"edit and multi_edit: occurrences replaced"`
	LineEnding   string `json:"line_ending,omitempty" jsonschema:"edit and multi_edit: crlf when the file's CRLF line ends were kept"`
	DryRun       bool   `json:"dry_run,omitempty" jsonschema:"nothing was written"`
	Diff         string `json:"diff,omitempty" jsonschema:"dry_run: the unified diff the change would make"`
	Summary      string `json:"summary,omitempty" jsonschema:"apply_patch: what changed, one line per file"`
}

// editSpec is one replacement of edit and multi_edit.
type editSpec struct {
	OldString  string `json:"old_string" jsonschema:"the exact text to replace"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence"`
}

type multiEditIn struct {
	Path   string     `json:"path" jsonschema:"the file to edit"`
	Edits  []editSpec `json:"edits" jsonschema:"the replacements, applied in order, each to the result of the previous; all succeed or the file is left as it was"`
	DryRun bool       `json:"dry_run,omitempty" jsonschema:"change nothing; return the unified diff the edits would make"`
}

func (s *server) edit(ctx context.Context, in editIn) (changeOut, string, error) {
	return s.editFile(ctx, "edit", in.Path, []editSpec{{OldString: in.OldString, NewString: in.NewString, ReplaceAll: in.ReplaceAll}}, in.DryRun)
}

// maxEdits bounds multi_edit's list.
const maxEdits = 100

func (s *server) multiEdit(ctx context.Context, in multiEditIn) (changeOut, string, error) {
	if len(in.Edits) == 0 {
		return changeOut{}, "", argErrorf("argument \"edits\" is empty; give at least one {old_string, new_string}")
	}
	if len(in.Edits) > maxEdits {
		return changeOut{}, "", argErrorf("argument \"edits\" has %d edits; at most %d per call", len(in.Edits), maxEdits)
	}
	return s.editFile(ctx, "multi_edit", in.Path, in.Edits, in.DryRun)
}

// editFile applies edits in order to the file's contents in memory and writes
// the result once (atomically): all of them or none.
func (s *server) editFile(ctx context.Context, op, p string, edits []editSpec, dryRun bool) (changeOut, string, error) {
	out := changeOut{Path: p, DryRun: dryRun}
	if err := checkEdits(op, edits); err != nil {
		return out, "", err
	}
	data, err := s.root.ReadFile(ctx, p)
	if err != nil {
		return out, "", err
	}
	if bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 || !utf8.Valid(data) {
		return out, "", toolError(vfs.CodeNotSupported, op, p, "not UTF-8 text: edit only changes text files")
	}
	old := string(data)
	cur, err := applyEdits(op, p, old, edits, &out)
	if err != nil {
		return out, "", err
	}
	if dryRun {
		out.Diff = unifiedDiff(esc(displayName(p)), old, cur)
		return out, out.Diff, nil
	}
	if err := s.root.WriteFile(ctx, p, []byte(cur), 0o644); err != nil {
		return out, "", err
	}
	out.Bytes = len(cur)
	msg := fmt.Sprintf("edited %s: %d replacement(s)", esc(p), out.Replacements)
	if op == "multi_edit" {
		msg = fmt.Sprintf("edited %s: %d edit(s), %d replacement(s)", esc(p), len(edits), out.Replacements)
	}
	if out.LineEnding == "crlf" {
		msg += " (CRLF line endings kept)"
	}
	return out, msg + "\n", nil
}

// editName is how an error names edit i of op's edits: "" for edit's one
// edit, else "edits[i]: ".
func editName(op string, edits []editSpec, i int) string {
	if len(edits) == 1 && op == "edit" {
		return ""
	}
	return fmt.Sprintf("edits[%d]: ", i)
}

// checkEdits refuses an edit with an empty old_string, or one that changes
// nothing.
func checkEdits(op string, edits []editSpec) error {
	for i, e := range edits {
		if e.OldString == "" {
			return argErrorf("%sold_string is empty: use write to create or replace a whole file", editName(op, edits, i))
		}
		if e.OldString == e.NewString {
			return argErrorf("%sold_string and new_string are the same: nothing to change", editName(op, edits, i))
		}
	}
	return nil
}

// applyEdits applies edits in order to the contents old of file p, counting
// replacements (and CRLF line ends used) in out. The error names op, p and
// the edit that failed.
func applyEdits(op, p, old string, edits []editSpec, out *changeOut) (string, error) {
	cur := old
	crlf := strings.Contains(old, "\r\n")
	for i, e := range edits {
		var n int
		var usedCRLF bool
		var err error
		cur, n, usedCRLF, err = applyEdit(cur, e, crlf)
		if err != nil {
			var ve *vfs.Error
			if errors.As(err, &ve) {
				ve.Op, ve.Path = op, p
				if name := editName(op, edits, i); name != "" {
					ve.Err = fmt.Errorf("%s%w (no edit was applied)", name, ve.Err)
				}
			}
			return "", err
		}
		out.Replacements += n
		if usedCRLF {
			out.LineEnding = "crlf"
		}
	}
	return cur, nil
}

// toCRLF writes every line end of s as \r\n.
func toCRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// applyEdit replaces e.OldString in content. In a file with CRLF line ends, an
// old_string written with \n that does not match as it is matches with \r\n,
// and new_string's line ends are then written \r\n too (usedCRLF).
func applyEdit(content string, e editSpec, crlf bool) (updated string, n int, usedCRLF bool, err error) {
	oldS, newS := e.OldString, e.NewString
	n = strings.Count(content, oldS)
	if n == 0 && crlf && strings.Contains(oldS, "\n") {
		if c := toCRLF(oldS); c != oldS {
			if m := strings.Count(content, c); m > 0 {
				oldS, newS, n, usedCRLF = c, toCRLF(newS), m, true
			}
		}
	}
	switch {
	case n == 0:
		return content, 0, false, toolError(vfs.CodeNotFound, "edit", "", "old_string occurs 0 times in the file. %s", nearMiss(content, e.OldString))
	case n > 1 && !e.ReplaceAll:
		return content, 0, false, toolError(vfs.CodeConflict, "edit", "",
			"old_string occurs %d times (lines %s): add surrounding lines to make it unique, or set replace_all",
			n, matchLines(content, oldS, 10))
	}
	if e.ReplaceAll {
		return strings.ReplaceAll(content, oldS, newS), n, usedCRLF, nil
	}
	return strings.Replace(content, oldS, newS, 1), 1, usedCRLF, nil
}

// displayName is a guest path without its leading "/", for diff headers.
func displayName(p string) string {
	if q, err := vfs.ParseGuest(p); err == nil && !q.IsRoot() {
		return q.String()
	}
	return strings.TrimPrefix(p, "/")
}

// matchLines lists the 1-based line numbers where sub starts in s, at most max.
func matchLines(s, sub string, limit int) string {
	var nums []string
	off := 0
	for len(nums) < limit {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			break
		}
		nums = append(nums, fmt.Sprint(strings.Count(s[:off+i], "\n")+1))
		off += i + max(1, len(sub))
	}
	out := strings.Join(nums, ", ")
	if strings.Count(s, sub) > limit {
		out += ", ..."
	}
	return out
}

// nearMiss describes the part of content closest to old, to help the caller fix
// an old_string that does not match: a match that ignores whitespace, or else the
// line most similar to old's first non-blank line.
func nearMiss(content, old string) string {
	lines := strings.Split(content, "\n")
	want := strings.Split(strings.TrimRight(old, "\n"), "\n")
	// Line ends: the same lines, once \r is ignored.
	if i := findLines(lines, want, func(s string) string { return strings.TrimSuffix(s, "\r") }); i >= 0 {
		return fmt.Sprintf("Nearest: lines %d-%d differ only in line endings (the file mixes \\n and \\r\\n there); copy them exactly or edit fewer lines at a time.", i+1, i+len(want))
	}
	if i := findLines(lines, want, func(s string) string { return strings.Join(strings.Fields(s), " ") }); i >= 0 {
		return fmt.Sprintf("Nearest: lines %d-%d match if whitespace is ignored; copy them exactly (indentation, tabs, trailing spaces):\n%s",
			i+1, i+len(want), clip(strings.Join(lines[i:i+len(want)], "\n"), 2000))
	}
	first := ""
	for _, w := range want {
		if strings.TrimSpace(w) != "" {
			first = strings.TrimSpace(w)
			break
		}
	}
	if first == "" {
		return "old_string is only whitespace."
	}
	best, bestScore := -1, 0.0
	fb := bigrams(first)
	for i, l := range lines {
		if sc := dice(fb, bigrams(strings.TrimSpace(l))); sc > bestScore {
			best, bestScore = i, sc
		}
	}
	if best < 0 || bestScore < 0.3 {
		return "No line resembles its first line; read the file again before editing."
	}
	got := strings.TrimSuffix(lines[best], "\r")
	return fmt.Sprintf("Nearest: line %d (%.0f%% similar to old_string's first line): %s\n%s",
		best+1, bestScore*100, clip(got, 500), firstDifference(got, first))
}

// findLines returns the index of the first run of lines equal to want once
// both are normalized by norm, or -1.
func findLines(lines, want []string, norm func(string) string) int {
	for i := 0; i+len(want) <= len(lines); i++ {
		ok := true
		for j := range want {
			if norm(lines[i+j]) != norm(want[j]) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// firstDifference says where a file line and old_string's first line part.
func firstDifference(line, want string) string {
	t := strings.TrimSpace(line)
	lead := len(line) - len(strings.TrimLeft(line, " \t"))
	i := 0
	for i < len(t) && i < len(want) && t[i] == want[i] {
		i++
	}
	col := lead + i + 1
	switch {
	case i == len(want) && i == len(t):
		return "They differ only in surrounding whitespace."
	case i == len(want):
		return fmt.Sprintf("The line continues after old_string's text at column %d: %q.", col, clip(t[i:], 60))
	case i == len(t):
		return fmt.Sprintf("The line ends at column %d where old_string continues with %q.", col, clip(want[i:], 60))
	}
	return fmt.Sprintf("First difference at column %d: the file has %q, old_string has %q.", col, clip(t[i:], 40), clip(want[i:], 40))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// bigrams returns the sorted byte bigrams of s (s itself if shorter than 2).
func bigrams(s string) []string {
	if len(s) > 500 {
		s = s[:500]
	}
	if len(s) < 2 {
		return []string{s}
	}
	out := make([]string, len(s)-1)
	for i := range out {
		out[i] = s[i : i+2]
	}
	sort.Strings(out)
	return out
}

// dice is the Sørensen–Dice coefficient of two sorted bigram multisets.
func dice(a, b []string) float64 {
	if len(a)+len(b) == 0 {
		return 0
	}
	i, j, common := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return 2 * float64(common) / float64(len(a)+len(b))
}

func (s *server) mkdir(ctx context.Context, in mkdirIn) (changeOut, string, error) {
	if err := s.root.MkdirAll(ctx, in.Path); err != nil {
		return changeOut{}, "", err
	}
	return changeOut{Path: in.Path}, fmt.Sprintf("directory %s exists\n", esc(in.Path)), nil
}

// refuseExisting fails with already_exists when something is at p.
func (s *server) refuseExisting(ctx context.Context, op, p string) error {
	ok, err := s.root.Exists(ctx, p)
	if err != nil {
		return err
	}
	if ok {
		return toolError(vfs.CodeExists, op, p, "destination exists: set overwrite to replace it")
	}
	return nil
}

func (s *server) move(ctx context.Context, in moveIn) (changeOut, string, error) {
	if !in.Overwrite {
		if err := s.refuseExisting(ctx, "move", in.Destination); err != nil {
			return changeOut{}, "", err
		}
	}
	if err := s.withParentsOf(ctx, in.Source, in.Destination, func() error {
		return s.root.Move(ctx, in.Source, in.Destination, dir.AllowCopy())
	}); err != nil {
		return changeOut{}, "", err
	}
	return changeOut{Path: in.Source, Destination: in.Destination}, fmt.Sprintf("moved %s to %s\n", esc(in.Source), esc(in.Destination)), nil
}

func (s *server) copyTool(ctx context.Context, in copyIn) (changeOut, string, error) {
	if !in.Overwrite {
		if err := s.refuseExisting(ctx, "copy", in.Destination); err != nil {
			return changeOut{}, "", err
		}
	}
	if err := s.withParentsOf(ctx, in.Source, in.Destination, func() error {
		return s.root.Copy(ctx, in.Source, in.Destination)
	}); err != nil {
		return changeOut{}, "", err
	}
	return changeOut{Path: in.Source, Destination: in.Destination}, fmt.Sprintf("copied %s to %s\n", esc(in.Source), esc(in.Destination)), nil
}

func (s *server) remove(ctx context.Context, in removeIn) (changeOut, string, error) {
	if !in.Recursive {
		if err := s.root.Remove(ctx, in.Path); err != nil {
			if vfs.CodeOf(err) == vfs.CodeNotEmpty {
				return changeOut{}, "", toolError(vfs.CodeNotEmpty, "remove", in.Path, "directory is not empty: set recursive to remove it and everything beneath it")
			}
			return changeOut{}, "", err
		}
		return changeOut{Path: in.Path}, fmt.Sprintf("removed %s\n", esc(in.Path)), nil
	}
	info, err := s.root.Lstat(ctx, in.Path)
	if err != nil {
		return changeOut{}, "", err
	}
	if err := s.root.RemoveAll(ctx, in.Path); err != nil {
		return changeOut{}, "", err
	}
	what := "file"
	if info.Mode()&fs.ModeDir != 0 {
		what = "directory tree"
	}
	return changeOut{Path: in.Path}, fmt.Sprintf("removed %s %s\n", what, esc(path.Clean(in.Path))), nil
}
