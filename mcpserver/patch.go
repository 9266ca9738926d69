package mcpserver

import (
	"fmt"
	"strings"
)

// The apply_patch format (the one coding agents are trained on):
//
//	*** Begin Patch
//	*** Add File: path/new.txt
//	+every line of the new file, each prefixed with +
//	*** Delete File: path/old.txt
//	*** Update File: path/file.go
//	*** Move to: path/renamed.go        (optional)
//	@@ func main() {                     (optional context line to find first)
//	 unchanged line
//	-removed line
//	+added line
//	*** End of File                      (optional: the chunk ends the file)
//	*** End Patch

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
	Kind   patchKind
	Path   string
	MoveTo string       // Update only; "" when the file keeps its name
	Lines  []string     // Add only: the new file's lines (without "\n")
	Chunks []patchChunk // Update only
}

// patchChunk is one "@@" hunk of an update: the lines it expects (Old) are
// replaced by New.
type patchChunk struct {
	Context []string // "@@ text" anchors, in order, each searched for before Old
	Old     []string
	New     []string
	EOF     bool // "*** End of File": Old must end the file
}

// patchError is a parse error with its 1-based line number.
type patchError struct {
	Line int
	Msg  string
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
	maxPatchLen = 16 << 20
)

// parsePatch parses the apply_patch format. It is strict about structure (one
// Begin, one End, known headers, prefixed lines) and lenient about what
// agents commonly add: surrounding blank lines, CRLF line ends, a heredoc wrapper
// ("<<'EOF'" ... "EOF") around the patch, and a bare "@@".
func parsePatch(text string) ([]patchFile, error) {
	if len(text) > maxPatchLen {
		return nil, &patchError{1, fmt.Sprintf("patch is larger than %d bytes", maxPatchLen)}
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	// Trim blank lines around, and a heredoc wrapper.
	lo, hi := 0, len(lines)
	for lo < hi && strings.TrimSpace(lines[lo]) == "" {
		lo++
	}
	for hi > lo && strings.TrimSpace(lines[hi-1]) == "" {
		hi--
	}
	if hi-lo >= 2 && strings.HasPrefix(strings.TrimSpace(lines[lo]), "<<") && strings.TrimSpace(lines[hi-1]) == strings.Trim(strings.TrimPrefix(strings.TrimSpace(lines[lo]), "<<"), `'"`) {
		lo++
		hi--
	}
	if lo >= hi || strings.TrimSpace(lines[lo]) != beginPatch {
		return nil, &patchError{lo + 1, "the patch must start with " + beginPatch}
	}
	if strings.TrimSpace(lines[hi-1]) != endPatch || hi-1 == lo {
		return nil, &patchError{hi, "the patch must end with " + endPatch}
	}
	var files []patchFile
	i := lo + 1
	end := hi - 1
	for i < end {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, addFile):
			f := patchFile{Kind: patchAdd, Path: strings.TrimSpace(line[len(addFile):])}
			if f.Path == "" {
				return nil, &patchError{i + 1, "Add File without a path"}
			}
			i++
			for i < end && !strings.HasPrefix(lines[i], "*** ") {
				if !strings.HasPrefix(lines[i], "+") {
					return nil, &patchError{i + 1, "every line of an added file must start with +"}
				}
				f.Lines = append(f.Lines, lines[i][1:])
				i++
			}
			files = append(files, f)
		case strings.HasPrefix(line, deleteFile):
			f := patchFile{Kind: patchDelete, Path: strings.TrimSpace(line[len(deleteFile):])}
			if f.Path == "" {
				return nil, &patchError{i + 1, "Delete File without a path"}
			}
			files = append(files, f)
			i++
		case strings.HasPrefix(line, updateFile):
			f := patchFile{Kind: patchUpdate, Path: strings.TrimSpace(line[len(updateFile):])}
			if f.Path == "" {
				return nil, &patchError{i + 1, "Update File without a path"}
			}
			i++
			if i < end && strings.HasPrefix(lines[i], moveTo) {
				f.MoveTo = strings.TrimSpace(lines[i][len(moveTo):])
				if f.MoveTo == "" {
					return nil, &patchError{i + 1, "Move to without a path"}
				}
				i++
			}
			var err error
			if f.Chunks, i, err = parseChunks(lines, i, end); err != nil {
				return nil, err
			}
			if len(f.Chunks) == 0 && f.MoveTo == "" {
				return nil, &patchError{i + 1, "Update File " + f.Path + " has no hunks"}
			}
			files = append(files, f)
		case strings.TrimSpace(line) == "":
			i++ // blank lines between sections
		default:
			return nil, &patchError{i + 1, fmt.Sprintf("expected *** Add File:, *** Delete File: or *** Update File:, got %q", clip(line, 80))}
		}
	}
	if len(files) == 0 {
		return nil, &patchError{lo + 1, "the patch changes no file"}
	}
	return files, nil
}

// parseChunks parses the hunks of one Update File section, from line i up to the
// next file header (or end); it returns the index of the line after them.
func parseChunks(lines []string, i, end int) ([]patchChunk, int, error) {
	var chunks []patchChunk
	var cur *patchChunk
	started := false // cur has change lines
	blanks := 0      // raw empty lines at the end of cur, dropped if the section ends
	finish := func() {
		if cur != nil && blanks > 0 && blanks < max(len(cur.Old), len(cur.New)) {
			cur.Old = nilIfEmpty(cur.Old[:len(cur.Old)-blanks])
			cur.New = nilIfEmpty(cur.New[:len(cur.New)-blanks])
		}
		blanks = 0
	}
	for i < end {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "*** "):
			if strings.TrimSpace(line) == endOfFile {
				if cur == nil || !started {
					return nil, i, &patchError{i + 1, endOfFile + " outside a hunk"}
				}
				cur.EOF = true
				chunks = append(chunks, *cur)
				cur, started, blanks = nil, false, 0
				i++
				continue
			}
			if cur != nil {
				if !started {
					return nil, i, &patchError{i + 1, "a @@ hunk without lines"}
				}
				finish()
				chunks = append(chunks, *cur)
			}
			return chunks, i, nil
		case line == "@@" || strings.HasPrefix(line, "@@ "):
			ctx := strings.TrimPrefix(strings.TrimPrefix(line, "@@"), " ")
			if cur != nil && started {
				chunks = append(chunks, *cur)
				cur, started, blanks = nil, false, 0
			}
			if cur == nil {
				cur = &patchChunk{}
			}
			if ctx != "" {
				cur.Context = append(cur.Context, ctx)
			}
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "-") || strings.HasPrefix(line, "+") || line == "":
			if cur == nil && line == "" {
				break // a blank line between hunks or sections
			}
			if cur == nil {
				if len(chunks) > 0 {
					return nil, i, &patchError{i + 1, "a new hunk must start with @@"}
				}
				cur = &patchChunk{} // the first hunk may omit its @@
			}
			started = true
			if line != "" {
				blanks = 0
			}
			switch {
			case line == "":
				// An empty line in a hunk is an unchanged empty line (unless it
				// only separates this section from the next).
				cur.Old = append(cur.Old, "")
				cur.New = append(cur.New, "")
				blanks++
			case line[0] == ' ':
				cur.Old = append(cur.Old, line[1:])
				cur.New = append(cur.New, line[1:])
			case line[0] == '-':
				cur.Old = append(cur.Old, line[1:])
			default:
				cur.New = append(cur.New, line[1:])
			}
		default:
			return nil, i, &patchError{i + 1, fmt.Sprintf("a hunk line must start with ' ', '-', '+' or @@, got %q", clip(line, 80))}
		}
		i++
	}
	if cur != nil {
		if !started {
			return nil, i, &patchError{i + 1, "a @@ hunk without lines"}
		}
		finish()
		chunks = append(chunks, *cur)
	}
	return chunks, i, nil
}

// formatPatch renders files in the canonical form parsePatch reads back to the
// same value.
func formatPatch(files []patchFile) string {
	var b strings.Builder
	b.WriteString(beginPatch + "\n")
	for _, f := range files {
		fmt.Fprintf(&b, "*** %s: %s\n", f.Kind, f.Path)
		switch f.Kind {
		case patchAdd:
			for _, l := range f.Lines {
				b.WriteString("+" + l + "\n")
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
				for _, l := range hunkLines(c) {
					b.WriteString(l + "\n")
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

// hunkLines turns a chunk's Old and New back into prefixed lines: a common prefix
// and suffix as context, the rest as removals then additions.
func hunkLines(c patchChunk) []string {
	pre := 0
	for pre < len(c.Old) && pre < len(c.New) && c.Old[pre] == c.New[pre] {
		pre++
	}
	suf := 0
	for suf < len(c.Old)-pre && suf < len(c.New)-pre && c.Old[len(c.Old)-1-suf] == c.New[len(c.New)-1-suf] {
		suf++
	}
	var out []string
	for _, l := range c.Old[:pre] {
		out = append(out, " "+l)
	}
	for _, l := range c.Old[pre : len(c.Old)-suf] {
		out = append(out, "-"+l)
	}
	for _, l := range c.New[pre : len(c.New)-suf] {
		out = append(out, "+"+l)
	}
	for _, l := range c.Old[len(c.Old)-suf:] {
		out = append(out, " "+l)
	}
	return out
}

// applyChunks returns content with the chunks applied in order, each found at or
// after the previous one's end. A chunk's context lines and Old lines are matched
// exactly first, then ignoring trailing whitespace, then ignoring surrounding
// whitespace. A chunk that cannot be found is an error naming it.
func applyChunks(content string, chunks []patchChunk) (string, error) {
	lines := strings.Split(content, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []string
	pos := 0
	for n, c := range chunks {
		for _, x := range c.Context {
			at := findSeq(lines, []string{x}, pos, false)
			if at < 0 {
				return "", fmt.Errorf("hunk %d: context line %q not found after line %d", n+1, clip(x, 120), pos)
			}
			out = append(out, lines[pos:at+1]...)
			pos = at + 1
		}
		if len(c.Old) == 0 {
			// Pure addition: after the context line if there was one, else at the end.
			at := pos
			if len(c.Context) == 0 {
				at = len(lines)
			}
			out = append(out, lines[pos:at]...)
			out = append(out, c.New...)
			pos = at
			continue
		}
		at := findSeq(lines, c.Old, pos, c.EOF)
		if at < 0 {
			return "", fmt.Errorf("hunk %d: the lines to change were not found after line %d; expected:\n%s",
				n+1, pos, clip(strings.Join(c.Old, "\n"), 1000))
		}
		out = append(out, lines[pos:at]...)
		out = append(out, c.New...)
		pos = at + len(c.Old)
	}
	out = append(out, lines[pos:]...)
	if len(out) == 0 {
		return "", nil
	}
	return strings.Join(out, "\n") + "\n", nil // patched files end with a newline
}

// findSeq returns the index at or after from where want occurs in lines, trying
// an exact match, then one ignoring trailing whitespace, then one ignoring
// surrounding whitespace; with atEOF, only a match ending the file counts.
func findSeq(lines, want []string, from int, atEOF bool) int {
	norms := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	}
	for _, norm := range norms {
		start, stop := from, len(lines)-len(want)
		if atEOF {
			start = max(from, stop)
		}
		for i := start; i <= stop; i++ {
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
	}
	return -1
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
