package mcpserver

import (
	"fmt"
	"strconv"
	"strings"
)

// How apply_patch finds where a hunk goes (applyChunks). A file is a list of
// lines, each with its line end ("\n", "\r\n", or none for a last line without
// a newline); so is a hunk's old side.
//
//  1. Hunks of one file apply in order: each is searched for from the end of
//     the previous one.
//  2. A hunk's old side is compared with the file's lines at three levels, each
//     tried only when the one before matches nowhere:
//     exact (bytes and line ends equal);
//     line-end-insensitive ("\n", "\r\n" and a missing final newline are equal);
//     trailing-whitespace-insensitive (spaces and tabs before the line end are
//     ignored too). Leading whitespace always counts.
//  3. At the first level that matches somewhere: a unified diff's hunk goes where
//     its "@@ -l" header puts it, shifted by how far the file's previous hunk
//     landed from its own header, if it matches there (as git apply does); else
//     a hunk that matches in exactly one place goes there; one that matches in
//     several places is refused as ambiguous, naming the lines, and never
//     applied at the first one.
//  4. As in git apply, a unified hunk whose header starts at line 0 or 1 must
//     match at the top of the file and one without trailing unchanged lines must
//     match at its end. A hunk without any unchanged line (git diff -U0) is
//     placed by its line numbers instead, as git apply --unidiff-zero does
//     (plain git apply would move it to the end of the file), and must start
//     at the top only when its header says line 0. "*** End of File" anchors a
//     Begin Patch hunk at the end; a side whose last line is marked
//     "\ No newline at end of file" must end the file.
//  5. A Begin Patch "@@ text" line is found first: the first line at or after
//     the search start equal to text (exactly, then ignoring trailing, then
//     surrounding whitespace). The hunk must then start at that line (when it
//     repeats it as its first line) or after it, and before the next line equal
//     to it. A hunk with no old side goes right after its last @@ line, or at the
//     end of the file when it has none.
//  6. Blank lines ending a Begin Patch hunk written without their leading space
//     are unchanged lines if the hunk matches with them, separators otherwise.
//
// What is written: where the old side matched exactly, or a unified hunk with
// no old side goes by its line numbers, the new side is written as the patch
// gives it, byte for byte (git apply's result). Where it matched only after
// normalization (or a Begin Patch hunk adds lines to a non-empty file with
// nothing to match), unchanged lines keep the file's bytes and each added line gets the file's line
// end: CRLF when most of the file's lines end in CRLF, else LF. So a patch
// written with LF line ends keeps a CRLF file CRLF. When no hunk of the file has
// a no-newline marker, the file keeps its final-newline state: one that ended
// without a newline still does.

// hunkError is why a hunk does not apply.
type hunkError struct {
	Hunk       int   // 1-based
	Candidates []int // the 1-based lines an ambiguous hunk matches at (the first maxCandidates)
	Msg        string
}

// maxCandidates bounds the places an ambiguous hunk's search collects.
const maxCandidates = 10

func (e *hunkError) Error() string {
	if len(e.Candidates) > 0 {
		var ls []string
		for _, c := range e.Candidates {
			ls = append(ls, strconv.Itoa(c))
		}
		if len(e.Candidates) >= maxCandidates {
			ls = append(ls, "… (and maybe more)")
		}
		return fmt.Sprintf("hunk %d is ambiguous: it matches at lines %s; add unchanged lines around it to tell which", e.Hunk, strings.Join(ls, ", "))
	}
	return fmt.Sprintf("hunk %d: %s", e.Hunk, e.Msg)
}

// lineLevels are the comparisons of rule 2, in order.
var lineLevels = []func(string) string{
	func(s string) string { return s },
	stripEOL,
	func(s string) string { return strings.TrimRight(s, " \t\r\n") },
}

// anchorLevels are the comparisons of an @@ line (rule 5), whose text has no line end.
var anchorLevels = []func(string) string{
	stripEOL,
	func(s string) string { return strings.TrimRight(s, " \t\r\n") },
	strings.TrimSpace,
}

// stripEOL removes a line's "\n" or "\r\n".
func stripEOL(s string) string {
	if strings.HasSuffix(s, "\n") {
		s = s[:len(s)-1]
		s = strings.TrimSuffix(s, "\r")
	}
	return s
}

// fileStyle is the line end added lines get (see above).
func fileStyle(img []string) string {
	crlf, lf := 0, 0
	for _, l := range img {
		switch {
		case strings.HasSuffix(l, "\r\n"):
			crlf++
		case strings.HasSuffix(l, "\n"):
			lf++
		}
	}
	if crlf > lf {
		return "\r\n"
	}
	return "\n"
}

// applyChunks returns content with the chunks applied, following the rules
// above, or a *hunkError naming the first hunk that does not apply.
func applyChunks(content string, chunks []patchChunk) (string, error) {
	img := splitLines(content)
	style := fileStyle(img)
	var out []string
	pos, drift := 0, 0
	for n, c := range chunks {
		at, level, lines, err := placeChunk(img, c, pos, drift)
		if err != nil {
			err.Hunk = n + 1
			return "", err
		}
		old := len(oldLines(lines))
		if c.Numbered {
			drift = at - hintOf(c)
		}
		out = append(out, img[pos:at]...)
		verbatim := level == 0 && (old > 0 || len(img) == 0 || c.Numbered)
		out = appendHunk(out, img[at:], lines, verbatim, style)
		pos = at + old
	}
	out = append(out, img[pos:]...)
	return joinLines(out, style, content, marksNoNewline(chunks)), nil
}

// marksNoNewline reports whether a hunk marks a line as having no newline.
func marksNoNewline(chunks []patchChunk) bool {
	for _, c := range chunks {
		for _, l := range c.Lines {
			if !strings.HasSuffix(l.Text, "\n") {
				return true
			}
		}
	}
	return false
}

// placeChunk finds where chunk c goes in img, from pos and after its @@
// lines: the index, the level it matched at, and the lines placed (without
// the blank lines written without a prefix at its end, when it is found
// only without them).
func placeChunk(img []string, c patchChunk, pos, drift int) (int, int, []hunkLine, *hunkError) {
	from, limit := pos, len(img)+1 // the hunk starts in [from, limit)
	for _, a := range c.Context {
		at, next := findAnchor(img, a, from)
		if at < 0 {
			return 0, 0, nil, &hunkError{Msg: fmt.Sprintf("the @@ line %q was not found after line %d", clip(a, 120), from)}
		}
		from, limit = at, next
	}
	lines := c.Lines
	at, level, err := locate(img, c, lines, from, limit, drift)
	if err != nil && len(err.Candidates) == 0 && c.Soft > 0 {
		lines = lines[:len(lines)-c.Soft]
		at, level, err = locate(img, c, lines, from, limit, drift)
	}
	return at, level, lines, err
}

// appendHunk appends the new side of lines, placed at the start of img, to
// out: unchanged lines as the patch writes them when verbatim, else as img
// has them; added lines with the file's line end (style), unless verbatim or
// marked as having no newline.
func appendHunk(out, img []string, lines []hunkLine, verbatim bool, style string) []string {
	k := 0
	for _, l := range lines {
		switch l.Op {
		case ' ':
			if verbatim {
				out = append(out, l.Text)
			} else {
				out = append(out, img[k])
			}
			k++
		case '-':
			k++
		default:
			if verbatim || !strings.HasSuffix(l.Text, "\n") {
				out = append(out, l.Text)
			} else {
				out = append(out, stripEOL(l.Text)+style)
			}
		}
	}
	return out
}

// joinLines joins the result's lines, ending every line but the last with
// style; the last loses its line end when content had none and no hunk
// marked one (marked).
func joinLines(out []string, style, content string, marked bool) string {
	for k := 0; k+1 < len(out); k++ {
		if !strings.HasSuffix(out[k], "\n") {
			out[k] += style
		}
	}
	if !marked && len(out) > 0 && content != "" && !strings.HasSuffix(content, "\n") {
		out[len(out)-1] = stripEOL(out[len(out)-1])
	}
	return strings.Join(out, "")
}

// hintOf is the index where a numbered hunk's old side starts by its header.
func hintOf(c patchChunk) int {
	if c.OldCount == 0 {
		return c.OldStart // an insertion after line OldStart
	}
	return c.OldStart - 1
}

// findAnchor returns the index of the first line at or after from equal to a
// (rule 5) and the index of the next line equal to it at the same level (or
// len(img)+1); -1 if there is none.
func findAnchor(img []string, a string, from int) (int, int) {
	for _, norm := range anchorLevels {
		want := norm(a)
		at := -1
		for i := from; i < len(img); i++ {
			if norm(img[i]) == want {
				if at >= 0 {
					return at, i
				}
				at = i
			}
		}
		if at >= 0 {
			return at, len(img) + 1
		}
	}
	return -1, 0
}

// locate finds where lines' old side goes (rules 2-4): its index in img and the
// level it matched at.
func locate(img []string, c patchChunk, lines []hunkLine, from, limit, drift int) (int, int, *hunkError) {
	old := oldLines(lines)
	atTop, atEnd := hunkEnds(c, lines)
	if !c.Numbered && len(old) == 0 {
		at, err := insertionAt(img, c, from, atEnd)
		if err != nil {
			return 0, 0, err
		}
		return at, 0, nil
	}
	start, stop := from, min(limit, len(img)-len(old)+1) // candidate starts in [start, stop)
	if atTop {
		stop = min(stop, 1)
	}
	if atEnd {
		start = max(start, len(img)-len(old))
	}
	hint := -1
	if c.Numbered {
		hint = hintOf(c) + drift
	}
	for level, norm := range lineLevels {
		at, err := matchAt(img, old, norm, start, stop, hint)
		if err != nil {
			return 0, 0, err
		}
		if at >= 0 {
			return at, level, nil
		}
	}
	return 0, 0, notFound(c, old, from, limit, len(img), atTop, atEnd)
}

// hunkEnds reports whether lines must sit at the top of the file (a numbered
// hunk starting at line 1 with leading context, or at line 0 without any)
// and whether at its end (End of File, a numbered hunk without trailing
// context, or a side without a final newline).
func hunkEnds(c patchChunk, lines []hunkLine) (atTop, atEnd bool) {
	atEnd = c.EOF
	if c.Numbered {
		leading, trailing := 0, 0
		for k := 0; k < len(lines) && lines[k].Op == ' '; k++ {
			leading++
		}
		for k := len(lines) - 1; k >= 0 && lines[k].Op == ' '; k-- {
			trailing++
		}
		if leading+trailing == 0 {
			atTop = c.OldStart == 0 // no context: the line numbers say where (git apply --unidiff-zero)
		} else {
			atTop = c.OldStart <= 1
			atEnd = atEnd || trailing == 0
		}
	}
	for _, l := range lines {
		if !strings.HasSuffix(l.Text, "\n") {
			atEnd = true // a side without a final newline ends the file
		}
	}
	return atTop, atEnd
}

// insertionAt is where a Begin Patch insertion goes: after its @@ line (from),
// or at the end.
func insertionAt(img []string, c patchChunk, from int, atEnd bool) (int, *hunkError) {
	at := len(img)
	if len(c.Context) > 0 {
		at = from + 1
	}
	if at < from || (atEnd && at != len(img)) {
		return 0, &hunkError{Msg: "the lines to add have no place to go"}
	}
	return at, nil
}

// matchAt finds old in img at a start in [start, stop), comparing lines
// under norm: hint when old is there, else the only start where it is; -1
// when it is nowhere, and the candidates (1-based) when several match.
func matchAt(img, old []string, norm func(string) string, start, stop, hint int) (int, *hunkError) {
	match := func(i int) bool {
		for j, w := range old {
			if norm(img[i+j]) != norm(w) {
				return false
			}
		}
		return true
	}
	if hint >= start && hint < stop && match(hint) {
		return hint, nil
	}
	var cands []int
	for i := start; i < stop && len(cands) < maxCandidates; i++ {
		if match(i) {
			cands = append(cands, i)
		}
	}
	switch len(cands) {
	case 0:
		return -1, nil
	case 1:
		return cands[0], nil
	}
	for k := range cands {
		cands[k]++
	}
	return 0, &hunkError{Candidates: cands}
}

// notFound is the error of a hunk whose old lines are nowhere they may be
// (after line from, before the next @@ match at limit, at the top or end).
func notFound(c patchChunk, old []string, from, limit, n int, atTop, atEnd bool) *hunkError {
	where := fmt.Sprintf("after line %d", from)
	switch {
	case atTop && atEnd:
		where = "as the whole file"
	case atTop:
		where = "at the top of the file (its header starts at line " + strconv.Itoa(c.OldStart) + ")"
	case atEnd:
		where = "at the end of the file"
	}
	if limit <= n {
		where += fmt.Sprintf(" and before line %d (the next line equal to the @@ line)", limit+1)
	}
	return &hunkError{Msg: fmt.Sprintf("the lines to change were not found %s; expected:\n%s", where, clip(strings.Join(old, ""), 1000))}
}
