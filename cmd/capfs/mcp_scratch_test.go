package main

import (
	"strings"
	"testing"
)

// TestMCPScratchPersists: capfs mcp's tmp keeps what an agent wrote across
// sessions on the same project (one SQLite file per project), and
// --ephemeral-scratch gives a memory tmp that starts empty and leaves the
// persistent one alone.
func TestMCPScratchPersists(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cs := mcpClient(t, root)
	if text, isErr, _ := mcpCall(t, cs, "write", map[string]any{"path": "tmp/notes.md", "content": "remember this"}); isErr {
		t.Fatalf("write: %s", text)
	}
	cs.Close()

	cs = mcpClient(t, root)
	text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "tmp/notes.md"})
	if isErr || !strings.Contains(text, "remember this") {
		t.Errorf("second session: read tmp/notes.md: %v %q", isErr, text)
	}
	mounts, _, _ := mcpCall(t, cs, "mounts", map[string]any{})
	cs.Close()
	if !strings.Contains(mounts, "sqlite") {
		t.Errorf("mounts does not show tmp as a SQLite scratch:\n%s", mounts)
	}

	eph := mcpClient(t, root, "--ephemeral-scratch")
	text, isErr, _ = mcpCall(t, eph, "read", map[string]any{"path": "tmp/notes.md"})
	if !isErr {
		t.Errorf("--ephemeral-scratch: tmp/notes.md readable (%q); want an empty memory tmp", text)
	}
	if text, isErr, _ := mcpCall(t, eph, "write", map[string]any{"path": "tmp/other.md", "content": "x"}); isErr {
		t.Fatalf("--ephemeral-scratch write: %s", text)
	}
	eph.Close()

	// Another project has its own scratch.
	other := mcpClient(t, t.TempDir())
	defer other.Close()
	if text, isErr, _ := mcpCall(t, other, "read", map[string]any{"path": "tmp/notes.md"}); !isErr {
		t.Errorf("another project's session reads this one's scratch: %q", text)
	}
}
