package archive

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/capfs/capfs/vfs"
)

// Reason says why an entry was filtered (left out) or an archive refused. The
// values are stable strings, meant for reports and tests.
type Reason string

// The reasons an entry is filtered.
const (
	ReasonEmpty       Reason = "empty-name"        // the name is empty (or only "." and "/")
	ReasonTraversal   Reason = "traversal"         // a ".." component
	ReasonAbsolute    Reason = "absolute"          // a leading "/"
	ReasonDrive       Reason = "drive"             // a drive or UNC prefix ("C:", "C:\", "//host")
	ReasonBackslash   Reason = "backslash"         // a "\" (a separator on Windows)
	ReasonControl     Reason = "control-character" // NUL, a C0 or C1 control character or DEL
	ReasonEncoding    Reason = "encoding"          // not valid UTF-8
	ReasonLongName    Reason = "long-name"         // a component over 255 bytes, or a path over 4096
	ReasonDepth       Reason = "depth"             // more components than Limits.MaxDepth
	ReasonSymlink     Reason = "symlink"           // a symlink entry (links are refused unless Options.Links)
	ReasonHardlink    Reason = "hardlink"          // a hard-link entry (refused unless Options.Links)
	ReasonLinkTarget  Reason = "link-target"       // a link whose target is absolute, leaves the destination or is not in the archive
	ReasonDevice      Reason = "device"            // a character or block device, a FIFO or a socket
	ReasonSparse      Reason = "sparse"            // a GNU or PAX sparse file
	ReasonEncrypted   Reason = "encrypted"         // an encrypted zip entry
	ReasonUnsupported Reason = "unsupported"       // an entry type or compression method this package does not extract
	ReasonCollision   Reason = "collision"         // the name equals, or folds (case, Unicode normalization) to, an earlier entry's
	ReasonThroughLink Reason = "through-link"      // the name lies beneath a symlink or hard-link entry, or a non-directory
	ReasonExists      Reason = "exists"            // the destination already has this name (and Options.Overwrite is off, or the types differ)
	ReasonDestLink    Reason = "destination-link"  // a directory on the way in the destination is a symlink
	ReasonPolicy      Reason = "policy"            // the destination Dir's policy refused it (Target.Check)
)

// Name limits that are not settable: they are what Linux and most filesystems
// accept.
const (
	MaxComponentBytes = 255  // bytes in one path component
	MaxPathBytes      = 4096 // bytes in a whole cleaned path
)

// SanitizeName turns an entry name as stored in an archive into the relative,
// slash-separated path it will be extracted to, or says why it cannot be
// extracted. It is strict and purely lexical:
//
//   - the name must be valid UTF-8 without NUL, C0/C1 control characters or DEL,
//     and without "\" (a Windows separator: "a\..\..\x" must not become a climb
//     on another system);
//   - a leading "/" (absolute), a drive letter prefix ("C:", "c:/x") or "//"
//     (UNC) is refused, never stripped: an archive that names them is hostile or
//     broken, and silently re-rooting it would hide that;
//   - any ".." component is refused, even one that would stay inside ("a/../b");
//   - "." components and repeated or trailing slashes are removed ("./a//b/" is
//     "a/b"); isDir reports a trailing slash;
//   - each component is at most MaxComponentBytes, the path MaxPathBytes, and it
//     has at most maxDepth components (0: no limit).
//
// The result, when reason is "", is accepted by vfs.ParseGuest and names a path
// strictly below the destination (never "." itself, which is ReasonEmpty).
func SanitizeName(raw string, maxDepth int) (clean string, isDir bool, reason Reason) {
	if r := rawProblem(raw); r != "" {
		return "", false, r
	}
	isDir = strings.HasSuffix(raw, "/")
	clean, r := joinElems(raw, maxDepth)
	if r != "" {
		return "", false, r
	}
	if hasDrive(clean) {
		return "", false, ReasonDrive // "./C:x" is "C:x" once cleaned
	}
	if _, err := vfs.ParseGuest(clean); err != nil {
		// Defence in depth: every rule of ParseGuest is one of the rules above.
		return "", false, ReasonEncoding
	}
	return clean, isDir, ""
}

// rawProblem is the rule raw breaks as a whole ("" for none): empty, not
// UTF-8, a control character or backslash, a drive letter, UNC or absolute.
func rawProblem(raw string) Reason {
	switch {
	case raw == "":
		return ReasonEmpty
	case !utf8.ValidString(raw):
		return ReasonEncoding
	case strings.ContainsFunc(raw, isControl):
		return ReasonControl
	case strings.ContainsRune(raw, '\\'):
		return ReasonBackslash
	case hasDrive(raw), strings.HasPrefix(raw, "//"):
		return ReasonDrive
	case raw[0] == '/':
		return ReasonAbsolute
	}
	return ""
}

// hasDrive reports whether s starts with a drive letter ("C:").
func hasDrive(s string) bool {
	return len(s) >= 2 && s[1] == ':' && isLetter(s[0])
}

// joinElems joins raw's components without "." and empty ones, refusing
// "..", a component longer than MaxComponentBytes, more than maxDepth
// components (0: no limit), a path longer than MaxPathBytes, and nothing.
func joinElems(raw string, maxDepth int) (string, Reason) {
	var b strings.Builder
	b.Grow(len(raw))
	depth := 0
	for elem := range strings.SplitSeq(raw, "/") {
		switch elem {
		case "", ".":
			continue
		case "..":
			return "", ReasonTraversal
		}
		if len(elem) > MaxComponentBytes {
			return "", ReasonLongName
		}
		depth++
		if maxDepth > 0 && depth > maxDepth {
			return "", ReasonDepth
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(elem)
	}
	if b.Len() == 0 {
		return "", ReasonEmpty
	}
	if b.Len() > MaxPathBytes {
		return "", ReasonLongName
	}
	return b.String(), ""
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
}

// foldKey is the key two names collide on: NFC-normalized, then case-folded
// (full Unicode case folding, so "STRASSE" and "straße" collide, as do "é" in
// its composed and decomposed forms), then NFC again.
func foldKey(name string) string {
	return norm.NFC.String(cases.Fold().String(norm.NFC.String(name)))
}

// printable returns s with control characters and invalid UTF-8 escaped, for
// reports: an archive's raw names are hostile text.
func printable(s string) string {
	const max = 512
	if len(s) > max {
		s = s[:max] + "..."
	}
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || isControl(r) {
			for _, c := range []byte(s[i : i+n]) {
				b.WriteString(`\x`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&15])
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
