package mcpserver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/capfs/capfs/vfs"
)

// Unified diffs, as git diff writes them:
//
//	diff --git a/old/name b/new/name
//	old mode 100644                      (or new file mode / deleted file mode)
//	new mode 100755
//	similarity index 90%
//	rename from old/name                 (or copy from / copy to: refused)
//	rename to new/name
//	index 1234567..89abcde 100644
//	--- a/old/name                       (/dev/null for an added file)
//	+++ b/new/name                       (/dev/null for a deleted file)
//	@@ -12,7 +12,8 @@ optional text
//	 unchanged
//	-removed
//	+added
//	\ No newline at end of file
//
// Plain unified diffs ("--- " and "+++ " lines without a "diff --git" line, as
// diff -u writes them) are read too. Text before the first header and between
// files (a commit message, an email's headers) is ignored, as git apply does.

// looksUnified reports whether text has a "diff --git" line, or a "--- " line
// followed by a "+++ " line.
func looksUnified(text string) bool {
	prevMinus := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "diff --git ") || (prevMinus && strings.HasPrefix(line, "+++ ")) {
			return true
		}
		prevMinus = strings.HasPrefix(line, "--- ")
	}
	return false
}

// parseUnified parses a unified diff. Hunk headers must count their lines
// exactly (as git apply requires); an empty line inside a hunk is an unchanged
// empty line. Line ends: when the first header line ends with CR, the whole diff
// came with CRLF line ends and one CR is removed from every line; otherwise a CR
// before a line's newline belongs to the line.
func parseUnified(text string) ([]patchFile, error) {
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for k, l := range lines {
		if strings.HasPrefix(l, "diff --git ") || strings.HasPrefix(l, "--- ") {
			if strings.HasSuffix(l, "\r") {
				for j := k; j < len(lines); j++ {
					lines[j] = strings.TrimSuffix(lines[j], "\r")
				}
			}
			break
		}
	}
	p := &uniParser{lines: lines}
	var files []patchFile
	for p.i < len(lines) {
		line := lines[p.i]
		var f *patchFile
		var err error
		switch {
		case strings.HasPrefix(line, "diff --git "):
			f, err = p.gitFile()
		case strings.HasPrefix(line, "--- ") && p.i+1 < len(lines) && strings.HasPrefix(lines[p.i+1], "+++ "):
			f, err = p.plainFile()
		default:
			p.i++
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, *f)
	}
	if len(files) == 0 {
		return nil, &patchError{Line: 1, Msg: "the diff changes no file"}
	}
	return files, nil
}

type uniParser struct {
	lines []string
	i     int
}

func (p *uniParser) errf(code vfs.Code, format string, args ...any) error {
	return &patchError{Line: p.i + 1, Msg: fmt.Sprintf(format, args...), Code: code}
}

// gitFile parses one file of a git diff, from its "diff --git" line.
func (p *uniParser) gitFile() (*patchFile, error) {
	start := p.i
	oldName, newName, _ := splitGitNames(p.lines[p.i][len("diff --git "):])
	f := &patchFile{Kind: patchUpdate, Unified: true}
	renamed := false
	p.i++
	for ; p.i < len(p.lines); p.i++ {
		line := p.lines[p.i]
		var err error
		switch {
		case strings.HasPrefix(line, "old mode "):
			f.OldMode, err = parseMode(line[len("old mode "):])
		case strings.HasPrefix(line, "new mode "):
			f.NewMode, err = parseMode(line[len("new mode "):])
		case strings.HasPrefix(line, "deleted file mode "):
			f.Kind = patchDelete
			f.OldMode, err = parseMode(line[len("deleted file mode "):])
		case strings.HasPrefix(line, "new file mode "):
			f.Kind = patchAdd
			f.NewMode, err = parseMode(line[len("new file mode "):])
		case strings.HasPrefix(line, "rename from "):
			oldName, err = unquoteRaw(line[len("rename from "):])
			renamed = true
		case strings.HasPrefix(line, "rename old "):
			oldName, err = unquoteRaw(line[len("rename old "):])
			renamed = true
		case strings.HasPrefix(line, "rename to "):
			newName, err = unquoteRaw(line[len("rename to "):])
			renamed = true
		case strings.HasPrefix(line, "rename new "):
			newName, err = unquoteRaw(line[len("rename new "):])
			renamed = true
		case strings.HasPrefix(line, "copy from "), strings.HasPrefix(line, "copy to "):
			return nil, p.errf(vfs.CodeNotSupported, "copies (%q) are not supported: give the copy as an added file", clip(line, 80))
		case strings.HasPrefix(line, "similarity index "), strings.HasPrefix(line, "dissimilarity index "), strings.HasPrefix(line, "index "):
		case strings.HasPrefix(line, "Binary files ") || line == "GIT binary patch":
			return nil, p.errf(vfs.CodeNotSupported, "binary patches are not supported")
		case strings.HasPrefix(line, "--- ") && p.i+1 < len(p.lines) && strings.HasPrefix(p.lines[p.i+1], "+++ "):
			o, n, err := p.names()
			if err != nil {
				return nil, err
			}
			if (o != "" && o != oldName) || (n != "" && n != newName) {
				if oldName != "" || newName != "" {
					return nil, p.errf("", "the --- and +++ names (%q, %q) do not match the diff --git line", o, n)
				}
			}
			if o != "" {
				oldName = o
			}
			if n != "" {
				newName = n
			}
			if err := p.hunks(f); err != nil {
				return nil, err
			}
			return p.finish(f, oldName, newName, renamed, start)
		default:
			return p.finish(f, oldName, newName, renamed, start)
		}
		if err != nil {
			return nil, p.errf("", "%v", err)
		}
	}
	return p.finish(f, oldName, newName, renamed, start)
}

// plainFile parses one file of a diff without a "diff --git" line.
func (p *uniParser) plainFile() (*patchFile, error) {
	start := p.i
	o, n, err := p.names()
	if err != nil {
		return nil, err
	}
	f := &patchFile{Kind: patchUpdate, Unified: true}
	switch {
	case o == "" && n == "":
		return nil, p.errf("", "both names are /dev/null")
	case o == "":
		f.Kind = patchAdd
	case n == "":
		f.Kind = patchDelete
	}
	if err := p.hunks(f); err != nil {
		return nil, err
	}
	// A plain diff names the file it makes; the old name may be a backup's.
	if f.Kind == patchUpdate {
		o = n
	}
	return p.finish(f, o, n, false, start)
}

// names reads a "--- " and a "+++ " line; a /dev/null side is "".
func (p *uniParser) names() (string, string, error) {
	o, err := headerName(p.lines[p.i][4:])
	if err != nil {
		return "", "", p.errf("", "--- line: %v", err)
	}
	p.i++
	n, err := headerName(p.lines[p.i][4:])
	if err != nil {
		return "", "", p.errf("", "+++ line: %v", err)
	}
	p.i++
	return o, n, nil
}

// hunks reads the "@@" hunks that follow, into f.Chunks.
func (p *uniParser) hunks(f *patchFile) error {
	for p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], "@@ ") {
		c, err := p.hunk()
		if err != nil {
			return err
		}
		f.Chunks = append(f.Chunks, c)
	}
	if p.i < len(p.lines) {
		if l := p.lines[p.i]; l != "" && l != "-- " && strings.ContainsRune(" +-", rune(l[0])) &&
			!(strings.HasPrefix(l, "--- ") && p.i+1 < len(p.lines) && strings.HasPrefix(p.lines[p.i+1], "+++ ")) {
			return p.errf("", "a hunk has more lines than its @@ header counts")
		}
	}
	return nil
}

// hunk reads one "@@ -a,b +c,d @@" hunk.
func (p *uniParser) hunk() (patchChunk, error) {
	c := patchChunk{Numbered: true}
	h := p.lines[p.i]
	rest, ok := strings.CutPrefix(h, "@@ -")
	var oldR, newR string
	if ok {
		oldR, rest, ok = strings.Cut(rest, " +")
	}
	if ok {
		newR, _, ok = strings.Cut(rest, " @@")
	}
	var err1, err2 error
	if ok {
		c.OldStart, c.OldCount, err1 = parseRange(oldR)
		c.NewStart, c.NewCount, err2 = parseRange(newR)
	}
	if !ok || err1 != nil || err2 != nil {
		return c, p.errf("", "bad hunk header %q (want @@ -start,count +start,count @@)", clip(h, 80))
	}
	p.i++
	oldLeft, newLeft := c.OldCount, c.NewCount
	for oldLeft > 0 || newLeft > 0 || (p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], `\`) && len(c.Lines) > 0) {
		if p.i >= len(p.lines) {
			return c, p.errf("", "the diff ends inside a hunk (%d old and %d new lines missing)", oldLeft, newLeft)
		}
		l := p.lines[p.i]
		op, text := byte(' '), l+"\n"
		if !rawBlank(l) {
			op, text = l[0], l[1:]+"\n"
		}
		switch op {
		case ' ':
			oldLeft--
			newLeft--
		case '-':
			oldLeft--
		case '+':
			newLeft--
		case '\\':
			if len(c.Lines) == 0 || !strings.HasSuffix(c.Lines[len(c.Lines)-1].Text, "\n") {
				return c, p.errf("", "a misplaced no-newline marker")
			}
			last := &c.Lines[len(c.Lines)-1]
			last.Text = last.Text[:len(last.Text)-1]
			p.i++
			continue
		default:
			return c, p.errf("", "a hunk line must start with ' ', '-' or '+', got %q", clip(l, 80))
		}
		if oldLeft < 0 || newLeft < 0 {
			return c, p.errf("", "a hunk has more lines than its @@ header counts")
		}
		if msg := checkAfterMarker(c.Lines, op); msg != "" {
			return c, p.errf("", "%s", msg)
		}
		c.Lines = append(c.Lines, hunkLine{Op: op, Text: text})
		p.i++
	}
	return c, nil
}

// finish checks a parsed file and names it.
func (p *uniParser) finish(f *patchFile, oldName, newName string, renamed bool, start int) (*patchFile, error) {
	bad := func(format string, args ...any) (*patchFile, error) {
		return nil, &patchError{Line: start + 1, Msg: fmt.Sprintf(format, args...)}
	}
	for _, m := range []uint32{f.OldMode, f.NewMode} {
		if m != 0 && m&0o170000 != 0o100000 {
			return nil, &patchError{Line: start + 1, Code: vfs.CodeNotSupported,
				Msg: fmt.Sprintf("mode %o: only regular files can be patched (no symlinks or submodules)", m)}
		}
	}
	switch f.Kind {
	case patchAdd:
		f.Path = newName
		var b strings.Builder
		for _, c := range f.Chunks {
			if c.OldCount != 0 {
				return bad("an added file's hunk has old lines")
			}
			for _, l := range c.Lines {
				b.WriteString(l.Text)
			}
		}
		f.Content, f.Chunks = b.String(), nil
	case patchDelete:
		f.Path = oldName
		if newName != "" && newName != oldName {
			return bad("a deleted file renamed")
		}
	default:
		f.Path = oldName
		if newName != oldName {
			if !renamed {
				return bad("the old and new names differ (%q, %q) without rename headers", oldName, newName)
			}
			f.MoveTo = newName
		}
	}
	if f.Path == "" {
		return bad("cannot tell the file's name")
	}
	return f, nil
}

func parseRange(s string) (start, count int, err error) {
	a, b, hasCount := strings.Cut(s, ",")
	if start, err = strconv.Atoi(a); err != nil || start < 0 {
		return 0, 0, fmt.Errorf("bad start %q", a)
	}
	count = 1
	if hasCount {
		if count, err = strconv.Atoi(b); err != nil || count < 0 {
			return 0, 0, fmt.Errorf("bad count %q", b)
		}
	}
	if count > maxPatchLen || start > maxPatchLen {
		return 0, 0, fmt.Errorf("range %q too large", s)
	}
	return start, count, nil
}

func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
	if err != nil {
		return 0, fmt.Errorf("bad mode %q", s)
	}
	return uint32(m), nil
}

// headerName reads the name of a "--- " or "+++ " line: "" for /dev/null,
// otherwise the (possibly quoted) path without its a/ or b/ prefix; a tab and
// what follows (a diff -u timestamp) end an unquoted name.
func headerName(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		s, _, _ = strings.Cut(s, "\t")
		s = strings.TrimRight(s, " \r")
	}
	if s == "/dev/null" {
		return "", nil
	}
	return unquotePath(s)
}

// unquotePath unquotes a C-quoted path (git's core.quotePath form) and strips
// an a/ or b/ prefix.
func unquotePath(s string) (string, error) {
	u, err := unquoteRaw(s)
	return stripPrefix(u), err
}

// unquoteRaw unquotes a C-quoted path; an unquoted one is returned as it is.
func unquoteRaw(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		u, rest, err := cUnquote(s)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(rest) != "" {
			return "", fmt.Errorf("text after the quoted name %q", clip(s, 80))
		}
		s = u
	}
	return s, nil
}

func stripPrefix(s string) string {
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		return s[2:]
	}
	return s
}

// splitGitNames splits the names of a "diff --git" line. Unquoted names with
// spaces are split where the two halves name the same file (as git does when
// there is no ---/+++ or rename line to tell).
func splitGitNames(s string) (oldName, newName string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		a, rest, err := cUnquote(s)
		if err != nil || !strings.HasPrefix(rest, " ") {
			return "", "", false
		}
		b, err := unquotePath(rest[1:])
		if err != nil {
			return "", "", false
		}
		return stripPrefix(a), b, true
	}
	if i := strings.Index(s, ` "`); i >= 0 {
		b, err := unquotePath(s[i+1:])
		if err == nil {
			return stripPrefix(s[:i]), b, true
		}
	}
	if len(s)%2 == 1 {
		n := len(s) / 2
		if s[n] == ' ' && stripPrefix(s[:n]) == stripPrefix(s[n+1:]) {
			return stripPrefix(s[:n]), stripPrefix(s[n+1:]), true
		}
	}
	return "", "", false
}

// cUnquote reads a C-quoted string at the start of s (git's quoting: \a \b \t
// \n \v \f \r \" \\ and three-digit octal escapes) and returns it and the rest.
func cUnquote(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), s[i+1:], nil
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch c := s[i]; c {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'v':
			b.WriteByte('\v')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case '"', '\\':
			b.WriteByte(c)
		case '0', '1', '2', '3':
			if i+2 >= len(s) {
				return "", "", fmt.Errorf("bad octal escape in %q", clip(s, 80))
			}
			v, err := strconv.ParseUint(s[i:i+3], 8, 8)
			if err != nil {
				return "", "", fmt.Errorf("bad octal escape in %q", clip(s, 80))
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", "", fmt.Errorf("bad escape \\%c in %q", c, clip(s, 80))
		}
	}
	return "", "", fmt.Errorf("unterminated quoted name %q", clip(s, 80))
}
