package mcpserver

import (
	"bytes"

	"github.com/capfs/capfs/internal/treediff"
)

// splitLines splits s into lines, each keeping its "\n"; a last line without
// one stays as it is.
func splitLines(s string) []string { return treediff.SplitLines(s) }

// unifiedDiff returns the unified diff (diff -u, 3 lines of context) from old to
// new under the names a/name and b/name; "" when they are equal. name is written
// as given: a caller showing a guest's name passes it escaped (esc). The hunks
// are [treediff.WriteHunks]'s, without function-name context.
func unifiedDiff(name, old, new string) string {
	if old == new {
		return ""
	}
	var b bytes.Buffer
	b.WriteString("--- a/" + name + "\n+++ b/" + name + "\n")
	treediff.WriteHunks(&b, splitLines(old), splitLines(new), false)
	return b.String()
}
