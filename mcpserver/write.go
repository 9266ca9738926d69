package mcpserver

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

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

func (s *server) write(ctx context.Context, in writeIn) (string, error) {
	if in.CreateOnly {
		if err := s.withParents(ctx, in.Path, func() error {
			_, err := s.root.CreateFile(ctx, in.Path)
			return err
		}); err != nil {
			return "", err
		}
		if err := s.root.WriteFile(ctx, in.Path, []byte(in.Content), 0o644); err != nil {
			_ = s.root.Remove(ctx, in.Path)
			return "", err
		}
		return fmt.Sprintf("created %s (%d bytes)\n", esc(in.Path), len(in.Content)), nil
	}
	if err := s.withParents(ctx, in.Path, func() error {
		return s.root.WriteFile(ctx, in.Path, []byte(in.Content), 0o644)
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s (%d bytes)\n", esc(in.Path), len(in.Content)), nil
}

func (s *server) appendTool(ctx context.Context, in appendIn) (string, error) {
	if err := s.root.Append(ctx, in.Path, []byte(in.Content)); err != nil {
		return "", err
	}
	return fmt.Sprintf("appended %d bytes to %s\n", len(in.Content), esc(in.Path)), nil
}

func (s *server) edit(ctx context.Context, in editIn) (string, error) {
	if in.OldString == "" {
		return "", toolError(vfs.CodeInvalidPath, "edit", in.Path, "old_string is empty: use write to create or replace a whole file")
	}
	if in.OldString == in.NewString {
		return "", toolError(vfs.CodeInvalidPath, "edit", in.Path, "old_string and new_string are the same: nothing to change")
	}
	data, err := s.root.ReadFile(ctx, in.Path)
	if err != nil {
		return "", err
	}
	old := string(data)
	n := strings.Count(old, in.OldString)
	switch {
	case n == 0:
		return "", toolError(vfs.CodeNotFound, "edit", in.Path, "old_string occurs 0 times in the file. %s", nearMiss(old, in.OldString))
	case n > 1 && !in.ReplaceAll:
		return "", toolError(vfs.CodeConflict, "edit", in.Path,
			"old_string occurs %d times (lines %s): add surrounding lines to make it unique, or set replace_all",
			n, matchLines(old, in.OldString, 10))
	}
	updated := strings.Replace(old, in.OldString, in.NewString, -1)
	if !in.ReplaceAll {
		updated = strings.Replace(old, in.OldString, in.NewString, 1)
	}
	if in.DryRun {
		return unifiedDiff(esc(displayName(in.Path)), old, updated), nil
	}
	if err := s.root.WriteFile(ctx, in.Path, []byte(updated), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("edited %s: %d replacement(s)\n", esc(in.Path), n), nil
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
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if len(want) <= len(lines) {
		for i := 0; i+len(want) <= len(lines); i++ {
			ok := true
			for j := range want {
				if norm(lines[i+j]) != norm(want[j]) {
					ok = false
					break
				}
			}
			if ok {
				return fmt.Sprintf("Nearest: lines %d-%d match if whitespace is ignored; copy them exactly (indentation, tabs, trailing spaces):\n%s",
					i+1, i+len(want), clip(strings.Join(lines[i:i+len(want)], "\n"), 2000))
			}
		}
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
	return fmt.Sprintf("Nearest: line %d (%.0f%% similar to old_string's first line): %s",
		best+1, bestScore*100, clip(lines[best], 500))
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

func (s *server) mkdir(ctx context.Context, in mkdirIn) (string, error) {
	if err := s.root.MkdirAll(ctx, in.Path); err != nil {
		return "", err
	}
	return fmt.Sprintf("directory %s exists\n", esc(in.Path)), nil
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

func (s *server) move(ctx context.Context, in moveIn) (string, error) {
	if !in.Overwrite {
		if err := s.refuseExisting(ctx, "move", in.Destination); err != nil {
			return "", err
		}
	}
	if err := s.withParentsOf(ctx, in.Source, in.Destination, func() error {
		return s.root.Move(ctx, in.Source, in.Destination, dir.AllowCopy())
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("moved %s to %s\n", esc(in.Source), esc(in.Destination)), nil
}

func (s *server) copyTool(ctx context.Context, in copyIn) (string, error) {
	if !in.Overwrite {
		if err := s.refuseExisting(ctx, "copy", in.Destination); err != nil {
			return "", err
		}
	}
	if err := s.withParentsOf(ctx, in.Source, in.Destination, func() error {
		return s.root.Copy(ctx, in.Source, in.Destination)
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("copied %s to %s\n", esc(in.Source), esc(in.Destination)), nil
}

func (s *server) remove(ctx context.Context, in removeIn) (string, error) {
	if !in.Recursive {
		if err := s.root.Remove(ctx, in.Path); err != nil {
			if vfs.CodeOf(err) == vfs.CodeNotEmpty {
				return "", toolError(vfs.CodeNotEmpty, "remove", in.Path, "directory is not empty: set recursive to remove it and everything beneath it")
			}
			return "", err
		}
		return fmt.Sprintf("removed %s\n", esc(in.Path)), nil
	}
	info, err := s.root.Lstat(ctx, in.Path)
	if err != nil {
		return "", err
	}
	if err := s.root.RemoveAll(ctx, in.Path); err != nil {
		return "", err
	}
	what := "file"
	if info.Mode()&fs.ModeDir != 0 {
		what = "directory tree"
	}
	return fmt.Sprintf("removed %s %s\n", what, esc(path.Clean(in.Path))), nil
}
