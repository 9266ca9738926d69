package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// structured calls a tool that must succeed and returns its structuredContent
// decoded.
func structured(t *testing.T, f *fixture, name string, args any) map[string]any {
	t.Helper()
	res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s %v: %v %+v", name, args, err, res)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRawNamesThroughMCP: names that are not UTF-8 are listed in the escaped
// form ("caf\xe9") in text and in structuredContent, the same form names them
// in a path argument, and two that differ in such a byte never show the same:
// in a listing, in an error's text and in its _meta path. Before, the policy
// refused them, and JSON made each byte U+FFFD.
func TestRawNamesThroughMCP(t *testing.T) {
	f := newFixture(t, map[string]string{"d/caf\xe9": "latin\n", "d/caf\xe8": "other\n", ".env": "SECRET=1\n"}, dir.WithPolicy(policy.Defaults()))
	list := f.ok("list", map[string]any{"path": "d"})
	mustContain(t, list, `[FILE] caf\xe9  6 bytes`, `[FILE] caf\xe8  6 bytes`)
	out := structured(t, f, "list", map[string]any{"path": "d"})
	var names []string
	for _, e := range out["entries"].([]any) {
		names = append(names, e.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != `caf\xe8,caf\xe9` {
		t.Errorf("structured names %q; want the escaped forms", names)
	}
	// The escaped form, sent back, names the file.
	mustContain(t, f.ok("read", map[string]any{"path": `d/caf\xe9`}), "latin")
	mustContain(t, f.ok("read", map[string]any{"path": `d/caf\xe8`}), "other")
	if st := structured(t, f, "stat", map[string]any{"path": `d/caf\xe9`}); st["path"] != `d/caf\xe9` {
		t.Errorf("stat path %q", st["path"])
	}
	f.ok("write", map[string]any{"path": `d/n\xff`, "content": "new\n"})
	if b, err := vfstest.ReadFile(context.Background(), f.backend, vfs.MustParse("d/n\xff")); err != nil || string(b) != "new\n" {
		t.Errorf("the backend holds d/n\\xff as %q, %v", b, err)
	}
	f.ok("move", map[string]any{"source": `d/n\xff`, "destination": `d/m\xfe`})
	mustContain(t, f.ok("read_many", map[string]any{"paths": []string{`d/m\xfe`}}), "new")
	// Errors: two missing names apart, in the text and in _meta.
	a := f.fail("read", map[string]any{"path": `d/caf\xe7`}, "not_found")
	b := f.fail("read", map[string]any{"path": `d/caf\xe6`}, "not_found")
	if !strings.Contains(a.text, `d/caf\xe7`) || !strings.Contains(b.text, `d/caf\xe6`) || a.path != `d/caf\xe7` || b.path != `d/caf\xe6` {
		t.Errorf("errors: %q %q, paths %q %q", a.text, b.text, a.path, b.path)
	}
	// A path with a backslash that is no escaped form is refused as before.
	f.fail("read", map[string]any{"path": `d\caf`}, "invalid_path")
	// What an escaped form spells is parsed and decided as any path: a
	// climb, a NUL and a secret are refused as when written plainly.
	f.fail("read", map[string]any{"path": `d\x2f\x2e\x2e\x2f\x2e\x2e\x2fx`}, "path_outside_sandbox")
	f.fail("read", map[string]any{"path": `d/a\x00b`}, "invalid_path")
	f.fail("read", map[string]any{"path": ".env"}, "fs_permission_denied")
	f.fail("read", map[string]any{"path": `\x2eenv`}, "fs_permission_denied")
}
