package mcpserver

import (
	"fmt"
	"strings"

	"github.com/capfs/capfs/vfs"
)

// apply_patch reads two formats, told apart by their first line.
//
// The "*** Begin Patch" format (the one coding agents are trained on):
//
//	*** Begin Patch
//	*** Add File: path/new.txt
//	+every line of the new file, each prefixed with +
//	*** Delete File: path/old.txt
//	*** Update File: path/file.go
//	*** Move to: path/renamed.go        (optional)
//	@@ func main() {                     (optional line to find first)
//	 unchanged line
//	-removed line
//	+added line
//	\ No newline at end of file          (optional: the line above has no newline)
//	*** End of File                      (optional: the chunk ends the file)
//	*** End Patch
//
// and unified diffs as git diff writes them (unidiff.go). Both parse to the same
// []patchFile, applied by applyChunks (patchapply.go).

// patchKind is what a file section of a patch does.
type patchKind int

const (
	patchAdd patchKind = iota
	patchDelete
	patchUpdate
)

func (k patchKind) String() string {
	switch k {
	case patchAdd:
		return "Add File"
	case patchDelete:
		return "Delete File"
	}
	return "Update File"
}

// patchFile is one file section of a parsed patch.
type patchFile struct {
	Kind    patchKind
	Path    string
	MoveTo  string       // Update only; "" when the file keeps its name
	Content string       // Add only: the new file's bytes
	Chunks  []patchChunk // Update; the hunks of a unified diff's Delete (checked, not needed)
	// Unified is set for a section of a unified diff: its hunks carry line
	// numbers, and a Delete's hunks must remove the whole file.
	Unified bool
	// OldMode and NewMode are the git modes a unified diff's headers give (old
	// mode, new mode, new file mode, deleted file mode); 0 when not given.
	OldMode, NewMode uint32
}

// hunkLine is one line of a hunk: Op is ' ' (unchanged), '-' (removed) or '+'
// (added). Text is the line's bytes with its line end ("\n", or "\r\n" when the
// patch carries the CR), or without one when a "\ No newline at end of file"
// marker follows it.
type hunkLine struct {
	Op   byte
	Text string
}

// patchChunk is one hunk of an update: its old side (the ' ' and '-' lines) is
// replaced by its new side (the ' ' and '+' lines).
type patchChunk struct {
	Context []string // "@@ text" anchors, in order, each searched for before the hunk
	Lines   []hunkLine
	// Soft is how many of the last Lines are empty lines of a "*** Begin Patch"
	// hunk written without their leading space: they are unchanged blank lines
	// if the hunk matches with them, separators otherwise.
	Soft int
	EOF  bool // "*** End of File": the old side must end the file
	// Numbered is set for a unified diff's hunk, whose header gives where its
	// old side starts (OldStart, 1-based; 0 for an empty old side at the top)
	// and how long each side is.
	Numbered                               bool
	OldStart, OldCount, NewStart, NewCount int
}

// oldLines returns the texts of the ' ' and '-' lines of ls.
func oldLines(ls []hunkLine) []string {
	var out []string
	for _, l := range ls {
		if l.Op != '+' {
			out = append(out, l.Text)
		}
	}
	return out
}

// patchError is a parse error with its 1-based line number. Code is the error
// code the tool reports (invalid_path, the code of a malformed patch, when empty;
// not_supported for what the engine does not do, such as binary patches).
type patchError struct {
	Line int
	Msg  string
	Code vfs.Code
}

func (e *patchError) Error() string { return fmt.Sprintf("patch line %d: %s", e.Line, e.Msg) }

const (
	beginPatch  = "*** Begin Patch"
	endPatch    = "*** End Patch"
	addFile     = "*** Add File: "
	deleteFile  = "*** Delete File: "
	updateFile  = "*** Update File: "
	moveTo      = "*** Move to: "
	endOfFile   = "*** End of File"
	noNewline   = `\ No newline at end of file`
	maxPatchLen = 16 << 20
)

// parsePatch parses a patch in either format: a "*** Begin Patch" patch when its
// first non-blank line (after an optional heredoc line such as "<<'EOF'") is
// "*** Begin Patch", else a unified diff when it has a "diff --git" line or a
// "--- " line followed by a "+++ " line. The result is deterministic: the same
// text always parses to the same files.
func parsePatch(text string) ([]patchFile, error) {
	if len(text) > maxPatchLen {
		return nil, &patchError{Line: 1, Msg: fmt.Sprintf("patch is larger than %d bytes", maxPatchLen)}
	}
	if !looksBeginPatch(text) && looksUnified(text) {
		return parseUnified(text)
	}
	return parseBeginPatch(text)
}

// looksBeginPatch reports whether the first non-blank line of text, or the one
// after a heredoc or Markdown fence line, is "*** Begin Patch".
func looksBeginPatch(text string) bool {
	seen := 0
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		if t == beginPatch {
			return true
		}
		if seen > 0 || !(strings.HasPrefix(t, "<<") || strings.HasPrefix(t, "```")) {
			return false
		}
		seen++
	}
	return false
}

// parseBeginPatch parses the "*** Begin Patch" format. It is strict about
// structure (one Begin, one End, known headers, prefixed lines) and lenient about
// what agents commonly add: surrounding blank lines, a heredoc wrapper ("<<'EOF'"
// ... "EOF") or a Markdown fence ("```" ... "```") around the patch, a bare "@@", blank lines between sections and
// hunks, and blank unchanged lines written without their leading space.
//
// Line ends: when the "*** Begin Patch" line ends with CR, the whole patch came
// with CRLF line ends and one CR is removed from the end of every line; otherwise
// a CR before a line's newline belongs to the line (as in a diff of a CRLF file).
func parseBeginPatch(text string) ([]patchFile, error) {
	lines := strings.Split(text, "\n")
	lo, hi, err := patchBounds(lines)
	if err != nil {
		return nil, err
	}
	var files []patchFile
	i := lo + 1
	end := hi - 1
	for i < end {
		line := lines[i]
		var f patchFile
		switch {
		case strings.HasPrefix(line, addFile):
			f, i, err = parseAddFile(lines, i, end)
		case strings.HasPrefix(line, deleteFile):
			f = patchFile{Kind: patchDelete, Path: strings.TrimSpace(line[len(deleteFile):])}
			if f.Path == "" {
				err = &patchError{Line: i + 1, Msg: "Delete File without a path"}
			}
			i++
		case strings.HasPrefix(line, updateFile):
			f, i, err = parseUpdateFile(lines, i, end)
		case strings.TrimSpace(line) == "":
			i++ // blank lines between sections
			continue
		default:
			return nil, &patchError{Line: i + 1, Msg: fmt.Sprintf("expected *** Add File:, *** Delete File: or *** Update File:, got %q", clip(line, 80))}
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, &patchError{Line: lo + 1, Msg: "the patch changes no file"}
	}
	return files, nil
}

// patchBounds finds the "*** Begin Patch" line (lo) and the line after "***
// End Patch" (hi) in lines, past blank lines and a wrapper around them, and
// takes the CR off every line between when the Begin line has one.
func patchBounds(lines []string) (lo, hi int, err error) {
	lo, hi = 0, len(lines)
	for lo < hi && strings.TrimSpace(lines[lo]) == "" {
		lo++
	}
	for hi > lo && strings.TrimSpace(lines[hi-1]) == "" {
		hi--
	}
	lo, hi = unwrapPatch(lines, lo, hi)
	if lo >= hi || strings.TrimSpace(lines[lo]) != beginPatch {
		return lo, hi, &patchError{Line: lo + 1, Msg: "the patch must start with " + beginPatch + " (or be a unified diff, as git diff writes it)"}
	}
	if strings.HasSuffix(lines[lo], "\r") {
		for i := lo; i < hi; i++ {
			lines[i] = strings.TrimSuffix(lines[i], "\r")
		}
	}
	if strings.TrimSpace(lines[hi-1]) != endPatch || hi-1 == lo {
		return lo, hi, &patchError{Line: hi, Msg: "the patch must end with " + endPatch}
	}
	return lo, hi, nil
}

// unwrapPatch drops a heredoc wrapper ("<<'EOF'" ... "EOF") or a Markdown
// fence ("```" ... "```") around lines[lo:hi].
func unwrapPatch(lines []string, lo, hi int) (int, int) {
	if hi-lo < 2 {
		return lo, hi
	}
	first, last := strings.TrimSpace(lines[lo]), strings.TrimSpace(lines[hi-1])
	heredoc := strings.HasPrefix(first, "<<") && last == strings.Trim(strings.TrimPrefix(first, "<<"), `'"`)
	fence := strings.HasPrefix(first, "```") && last == "```"
	if heredoc || fence {
		return lo + 1, hi - 1
	}
	return lo, hi
}

// parseAddFile parses the Add File section whose header is lines[i], up to
// the next header (or end), and returns the index of the line after it.
func parseAddFile(lines []string, i, end int) (patchFile, int, error) {
	f := patchFile{Kind: patchAdd, Path: strings.TrimSpace(lines[i][len(addFile):])}
	if f.Path == "" {
		return f, i, &patchError{Line: i + 1, Msg: "Add File without a path"}
	}
	var b strings.Builder
	for i++; i < end && !strings.HasPrefix(lines[i], "*** "); i++ {
		if err := addFileLine(&b, lines, i, end); err != nil {
			return f, i, err
		}
	}
	f.Content = b.String()
	return f, i, nil
}

// addFileLine adds lines[i] of an Add File section to the contents b: a +
// line, a no-newline marker after one, or a blank line before the next
// section.
func addFileLine(b *strings.Builder, lines []string, i, end int) error {
	switch l := lines[i]; {
	case strings.HasPrefix(l, "+"):
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			return &patchError{Line: i + 1, Msg: "a line after " + noNewline}
		}
		b.WriteString(l[1:] + "\n")
	case strings.HasPrefix(l, `\`):
		s := b.String()
		if !strings.HasSuffix(s, "\n") {
			return &patchError{Line: i + 1, Msg: "a no-newline marker must follow a + line"}
		}
		b.Reset()
		b.WriteString(s[:len(s)-1])
	case strings.TrimSpace(l) == "" && blankToHeader(lines, i, end):
		// Blank lines between this section and the next.
	default:
		return &patchError{Line: i + 1, Msg: "every line of an added file must start with +"}
	}
	return nil
}

// parseUpdateFile parses the Update File section whose header is lines[i]
// (with its Move to line and hunks), up to the next header (or end), and
// returns the index of the line after it.
func parseUpdateFile(lines []string, i, end int) (patchFile, int, error) {
	f := patchFile{Kind: patchUpdate, Path: strings.TrimSpace(lines[i][len(updateFile):])}
	if f.Path == "" {
		return f, i, &patchError{Line: i + 1, Msg: "Update File without a path"}
	}
	i++
	if i < end && strings.HasPrefix(lines[i], moveTo) {
		f.MoveTo = strings.TrimSpace(lines[i][len(moveTo):])
		if f.MoveTo == "" {
			return f, i, &patchError{Line: i + 1, Msg: "Move to without a path"}
		}
		i++
	}
	var err error
	if f.Chunks, i, err = parseChunks(lines, i, end); err != nil {
		return f, i, err
	}
	if len(f.Chunks) == 0 && f.MoveTo == "" {
		return f, i, &patchError{Line: i + 1, Msg: "Update File " + f.Path + " has no hunks"}
	}
	return f, i, nil
}

// blankToHeader reports whether lines[i:end] are blank up to the next "*** "
// line or end.
func blankToHeader(lines []string, i, end int) bool {
	for ; i < end && !strings.HasPrefix(lines[i], "*** "); i++ {
		if strings.TrimSpace(lines[i]) != "" {
			return false
		}
	}
	return true
}

// rawBlank reports whether a hunk line is an empty line without its prefix.
func rawBlank(line string) bool { return line == "" || line == "\r" }

// parseChunks parses the hunks of one Update File section, from line i up to the
// next file header (or end); it returns the index of the line after them.
func parseChunks(lines []string, i, end int) ([]patchChunk, int, error) {
	var p chunkParser
	for ; i < end; i++ {
		line := lines[i]
		var msg string
		switch {
		case strings.HasPrefix(line, "*** "):
			if strings.TrimSpace(line) != endOfFile {
				return p.finish(i)
			}
			msg = p.endOfFile()
		case line == "@@" || strings.HasPrefix(line, "@@ "):
			p.startHunk(line)
		case strings.HasPrefix(line, `\`):
			msg = p.noNewline()
		case rawBlank(line) || line[0] == ' ' || line[0] == '-' || line[0] == '+':
			msg = p.line(line)
		default:
			msg = fmt.Sprintf("a hunk line must start with ' ', '-', '+' or @@, got %q", clip(line, 80))
		}
		if msg != "" {
			return nil, i, &patchError{Line: i + 1, Msg: msg}
		}
	}
	return p.finish(i)
}

// chunkParser collects the hunks of one Update File section. Its methods
// return why a line is malformed, or "".
type chunkParser struct {
	chunks []patchChunk
	cur    *patchChunk // the hunk being read, nil between hunks
}

// flush ends the current hunk.
func (p *chunkParser) flush() {
	p.chunks = append(p.chunks, *p.cur)
	p.cur = nil
}

// empty reports whether the current hunk has only blank lines written
// without their prefix (which may just separate hunks).
func (p *chunkParser) empty() bool { return len(p.cur.Lines) == p.cur.Soft }

// finish ends the section at line i (a file header, or end) and returns its
// hunks and i.
func (p *chunkParser) finish(i int) ([]patchChunk, int, error) {
	if p.cur != nil {
		if p.empty() {
			return nil, i, &patchError{Line: i + 1, Msg: "a @@ hunk without lines"}
		}
		p.flush()
	}
	return p.chunks, i, nil
}

// endOfFile ends the current hunk, anchored at the end of the file.
func (p *chunkParser) endOfFile() string {
	if p.cur == nil || p.empty() {
		return endOfFile + " outside a hunk"
	}
	p.cur.EOF = true
	p.flush()
	return ""
}

// startHunk starts a hunk at a @@ line, with the context it names.
func (p *chunkParser) startHunk(line string) {
	if p.cur != nil && len(p.cur.Lines) > p.cur.Soft {
		p.flush()
	}
	if p.cur == nil {
		p.cur = &patchChunk{}
	}
	p.cur.Lines, p.cur.Soft = nil, 0 // blank lines before a @@ only separate hunks
	if ctx := strings.TrimPrefix(line[2:], " "); ctx != "" {
		p.cur.Context = append(p.cur.Context, ctx)
	}
}

// noNewline marks the hunk's last line as having no newline.
func (p *chunkParser) noNewline() string {
	if p.cur == nil || len(p.cur.Lines) == 0 {
		return "a no-newline marker must follow a hunk line"
	}
	last := &p.cur.Lines[len(p.cur.Lines)-1]
	if !strings.HasSuffix(last.Text, "\n") {
		return "two no-newline markers for one line"
	}
	last.Text = last.Text[:len(last.Text)-1]
	p.cur.Soft = 0
	return ""
}

// line adds a ' ', '-' or '+' line, or a blank unchanged line written
// without its space, to the hunk; the first hunk may omit its @@.
func (p *chunkParser) line(line string) string {
	if p.cur == nil && rawBlank(line) {
		return "" // a blank line between hunks or sections
	}
	if p.cur == nil {
		if len(p.chunks) > 0 {
			return "a new hunk must start with @@"
		}
		p.cur = &patchChunk{} // the first hunk may omit its @@
	}
	l := hunkLine{Op: ' ', Text: line + "\n"}
	if rawBlank(line) {
		p.cur.Soft++
	} else {
		l = hunkLine{Op: line[0], Text: line[1:] + "\n"}
		p.cur.Soft = 0
	}
	if err := checkAfterMarker(p.cur.Lines, l.Op); err != "" {
		return err
	}
	p.cur.Lines = append(p.cur.Lines, l)
	return ""
}

// checkAfterMarker returns why a line with op cannot follow ls (a line of the
// same side after one marked as having no newline), or "".
func checkAfterMarker(ls []hunkLine, op byte) string {
	for _, p := range ls {
		if strings.HasSuffix(p.Text, "\n") {
			continue
		}
		if p.Op == ' ' || op == ' ' || p.Op == op {
			return "a line after one marked " + noNewline
		}
	}
	return ""
}

// formatPatch renders files in the "*** Begin Patch" form parseBeginPatch reads
// back to the same value. Line numbers of unified hunks, modes and the
// Unified flag have no place in it and are left out.
func formatPatch(files []patchFile) string {
	var b strings.Builder
	b.WriteString(beginPatch + "\n")
	line := func(prefix, text string) {
		b.WriteString(prefix + strings.TrimSuffix(text, "\n") + "\n")
		if !strings.HasSuffix(text, "\n") {
			b.WriteString(noNewline + "\n")
		}
	}
	for _, f := range files {
		fmt.Fprintf(&b, "*** %s: %s\n", f.Kind, f.Path)
		switch f.Kind {
		case patchAdd:
			for _, l := range splitLines(f.Content) {
				line("+", l)
			}
		case patchUpdate:
			if f.MoveTo != "" {
				b.WriteString(moveTo + f.MoveTo + "\n")
			}
			for _, c := range f.Chunks {
				if len(c.Context) == 0 {
					b.WriteString("@@\n")
				}
				for _, x := range c.Context {
					b.WriteString("@@ " + x + "\n")
				}
				for k, l := range c.Lines {
					if k >= len(c.Lines)-c.Soft {
						line("", l.Text)
					} else {
						line(string(l.Op), l.Text)
					}
				}
				if c.EOF {
					b.WriteString(endOfFile + "\n")
				}
			}
		}
	}
	b.WriteString(endPatch + "\n")
	return b.String()
}
