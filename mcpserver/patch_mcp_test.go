package mcpserver_test

import "testing"

// TestApplyPatchOverMCP drives apply_patch through the MCP protocol with both
// formats: a git diff with a rename, an LF patch on a CRLF file, an ambiguous
// hunk refused with conflict naming its lines, and a dry run.
func TestApplyPatchOverMCP(t *testing.T) {
	f := newFixture(t, map[string]string{"win.txt": "a\r\nb\r\nc\r\n", "twice.txt": "x\ny\nx\ny\n", "src/m.go": "package m\n"})
	diff := "diff --git a/src/m.go b/src/n.go\nsimilarity index 50%\nrename from src/m.go\nrename to src/n.go\n" +
		"index 1111111..2222222 100644\n--- a/src/m.go\n+++ b/src/n.go\n@@ -1 +1,2 @@\n package m\n+// n\n"
	out := f.ok("apply_patch", map[string]any{"patch": diff, "dry_run": true})
	mustContain(t, out, "+// n")
	if f.exists("src/n.go") || f.content("src/m.go") != "package m\n" {
		t.Fatal("a dry run changed files")
	}
	out = f.ok("apply_patch", map[string]any{"patch": diff})
	mustContain(t, out, "R src/m.go -> src/n.go")
	if f.exists("src/m.go") || f.content("src/n.go") != "package m\n// n\n" {
		t.Fatalf("after the git diff: m.go %v, n.go %q", f.exists("src/m.go"), f.content("src/n.go"))
	}
	f.ok("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: win.txt\n@@\n a\n-b\n+B\n+B2\n*** End Patch\n"})
	if got := f.content("win.txt"); got != "a\r\nB\r\nB2\r\nc\r\n" {
		t.Fatalf("CRLF file after an LF patch: %q", got)
	}
	r := f.fail("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: twice.txt\n@@\n-y\n+Y\n*** End Patch\n"}, "conflict")
	mustContain(t, r.text, "ambiguous", "lines 2, 4", "nothing was changed")
	if r.path != "twice.txt" || f.content("twice.txt") != "x\ny\nx\ny\n" {
		t.Fatalf("ambiguous hunk: path %q, file %q", r.path, f.content("twice.txt"))
	}
}
