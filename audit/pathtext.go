package audit

import (
	"strings"
	"unicode/utf8"

	"github.com/capfs/capfs/internal/termsafe"
)

// A text sink writes a path that is not UTF-8 in internal/termsafe's escaped
// form ("caf\xe9"), the one the CLI and the MCP server print, so that two
// names that differ in such a byte stay two (JSON itself would write U+FFFD
// for each). A name never holds a backslash (vfs.ValidName), so a path with
// one is escaped too, its backslashes doubled: a path as written holds a
// backslash exactly when it is escaped, and a reader undoes that (pathBytes).
// Every other path is written as it is, as before.

// pathText is the text a sink writes for the path s.
func pathText(s string) string {
	if !needsEscape(s) {
		return s
	}
	return termsafe.Escape(s)
}

// needsEscape reports whether pathText escapes s.
func needsEscape(s string) bool {
	return strings.IndexByte(s, '\\') >= 0 || !utf8.ValidString(s)
}

// pathBytes undoes pathText. A path with a backslash that does not unescape
// (one written before paths were escaped) is kept as written.
func pathBytes(t string) string {
	if strings.IndexByte(t, '\\') < 0 {
		return t
	}
	s, err := termsafe.Unescape(t)
	if err != nil {
		return t
	}
	return s
}

// textPaths is e with its paths as a text sink writes them.
func textPaths(e Event) Event {
	e.Path, e.Dest, e.GuestPath = pathText(e.Path), pathText(e.Dest), pathText(e.GuestPath)
	return e
}

// bytePaths undoes textPaths.
func bytePaths(e Event) Event {
	e.Path, e.Dest, e.GuestPath = pathBytes(e.Path), pathBytes(e.Dest), pathBytes(e.GuestPath)
	return e
}
