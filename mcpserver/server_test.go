package mcpserver_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/vfs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		m[tool.Name] = tool
	}
	return m
}

func names(m map[string]*mcp.Tool) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func sorted(a ...[]string) []string {
	var out []string
	for _, x := range a {
		out = append(out, x...)
	}
	sort.Strings(out)
	return out
}

func TestToolListAndAnnotations(t *testing.T) {
	f := newFixture(t, nil)
	tools := listTools(t, f.cs)
	if got, want := names(tools), sorted(mcpserver.ReadOnlyTools, mcpserver.WriteTools); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	for name, tool := range tools {
		a := tool.Annotations
		if a == nil {
			t.Fatalf("%s has no annotations", name)
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: OpenWorldHint must be false", name)
		}
		ro := slices.Contains(mcpserver.ReadOnlyTools, name)
		if a.ReadOnlyHint != ro {
			t.Errorf("%s: ReadOnlyHint %v, want %v", name, a.ReadOnlyHint, ro)
		}
		if a.DestructiveHint == nil {
			t.Errorf("%s: DestructiveHint unset (defaults to true)", name)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", name)
		}
	}
	destructive := map[string]bool{"write": true, "edit": true, "apply_patch": true, "move": true, "copy": true, "remove": true,
		"append": false, "mkdir": false}
	for name, want := range destructive {
		if got := *tools[name].Annotations.DestructiveHint; got != want {
			t.Errorf("%s: DestructiveHint %v, want %v", name, got, want)
		}
	}
	idem := map[string]bool{"write": true, "mkdir": true, "copy": true, "remove": true, "append": false, "edit": false,
		"apply_patch": false, "move": false}
	for name, want := range idem {
		if got := tools[name].Annotations.IdempotentHint; got != want {
			t.Errorf("%s: IdempotentHint %v, want %v", name, got, want)
		}
	}
	// The argument names agents already know are the schema's property names.
	for tool, args := range map[string][]string{
		"read":  {"path", "offset", "limit"},
		"edit":  {"path", "old_string", "new_string", "replace_all", "dry_run"},
		"grep":  {"pattern", "path", "glob", "output_mode", "-i", "-A", "-B", "-C", "head_limit"},
		"write": {"path", "content", "create_only"},
		"tree":  {"path", "depth", "exclude"},
	} {
		schema, _ := tools[tool].InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		for _, a := range args {
			if _, ok := props[a]; !ok {
				t.Errorf("%s: no argument %q in %v", tool, a, props)
			}
		}
	}
}

func TestReadOnlyDirRegistersNoMutatingTool(t *testing.T) {
	d, _ := dir.New(memory.New())
	populate(t, d, map[string]string{"a.txt": "hello\n"})
	for name, ro := range map[string]*dir.Dir{
		"ReadOnly()":        d.ReadOnly(),
		"read-only backend": mustDir(dir.New(vfs.ReadOnly(memory.New()))),
	} {
		t.Run(name, func(t *testing.T) {
			cs := connect(t, ro, mcpserver.Options{})
			tools := listTools(t, cs)
			if got, want := names(tools), sorted(mcpserver.ReadOnlyTools); !slices.Equal(got, want) {
				t.Fatalf("read-only tools %v, want %v", got, want)
			}
			for _, w := range mcpserver.WriteTools {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: w, Arguments: map[string]any{"path": "x", "content": "x"}})
				if err == nil && !res.IsError {
					t.Fatalf("%s is callable on a read-only Dir", w)
				}
			}
		})
	}
	// Reading still works through the read-only grant.
	cs := connect(t, d.ReadOnly(), mcpserver.Options{})
	mustContain(t, callTool(t, cs, "read", map[string]any{"path": "a.txt"}).text, "hello")
}

func mustDir(d *dir.Dir, _ *dir.Control) *dir.Dir { return d }

// everyToolCall is one valid call of every tool, for the revocation test.
var everyToolCall = map[string]map[string]any{
	"read":            {"path": "a.txt"},
	"read_many":       {"paths": []string{"a.txt"}},
	"list":            {"path": "."},
	"tree":            {},
	"glob":            {"pattern": "**"},
	"grep":            {"pattern": "a"},
	"tail":            {"path": "a.txt"},
	"read_media":      {"path": "a.txt"},
	"multi_edit":      {"path": "a.txt", "edits": []map[string]any{{"old_string": "hello", "new_string": "bye"}}},
	"stat":            {"path": "a.txt"},
	"mounts":          {},
	"help":            {},
	"write":           {"path": "b.txt", "content": "x"},
	"append":          {"path": "a.txt", "content": "x"},
	"edit":            {"path": "a.txt", "old_string": "hello", "new_string": "bye"},
	"apply_patch":     {"patch": "*** Begin Patch\n*** Add File: c.txt\n+c\n*** End Patch"},
	"mkdir":           {"path": "d"},
	"move":            {"source": "a.txt", "destination": "m.txt"},
	"copy":            {"source": "a.txt", "destination": "k.txt"},
	"remove":          {"path": "a.txt"},
	"extract_archive": {"path": "a.txt", "dest": "."},
}

func TestEveryToolHasARevocationCase(t *testing.T) {
	if got, want := len(everyToolCall), len(mcpserver.ReadOnlyTools)+len(mcpserver.WriteTools); got != want {
		t.Fatalf("everyToolCall covers %d tools, want %d", got, want)
	}
}

func TestRevocationMidSession(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "hello\n"})
	mustContain(t, f.ok("read", map[string]any{"path": "a.txt"}), "hello")
	f.ctl.Revoke()
	for name, args := range everyToolCall {
		r := f.fail(name, args, "revoked")
		mustContain(t, r.text, "revoked")
	}
	// Nothing was changed after the revocation: read the storage through a new Dir.
	fresh, _ := dir.New(f.backend)
	got, err := fresh.List(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a.txt"}) {
		t.Fatalf("after revocation the tree is %v, want [a.txt]", got)
	}
	data, _ := fresh.ReadFile(context.Background(), "a.txt")
	if string(data) != "hello\n" {
		t.Fatalf("a.txt changed after revocation: %q", data)
	}
}

func TestAuditEventsAreTagged(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	r1 := f.call("read", map[string]any{"path": "a.txt"})
	r2 := f.call("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+uno\n*** Update File: b.txt\n@@\n-two\n+dos\n*** End Patch"})
	if r1.isErr || r2.isErr {
		t.Fatalf("calls failed: %s / %s", r1.text, r2.text)
	}
	if r1.tag == "" || r2.tag == "" || r1.tag == r2.tag {
		t.Fatalf("request tags %q and %q: want two distinct tags", r1.tag, r2.tag)
	}
	if !strings.HasPrefix(r1.tag, "mcp:") || !strings.Contains(r1.tag, ":read#") {
		t.Fatalf("tag %q does not name the MCP call", r1.tag)
	}
	byTag := map[string][]string{}
	for _, e := range f.ring.Events() {
		if e.Tag == "" {
			t.Fatalf("untagged event: %+v", e)
		}
		byTag[e.Tag] = append(byTag[e.Tag], e.Op+" "+e.Path)
	}
	if len(byTag[r1.tag]) == 0 {
		t.Fatalf("no event tagged %q: %v", r1.tag, byTag)
	}
	// The patch read both files and wrote both, all under its one tag.
	ops := strings.Join(byTag[r2.tag], ",")
	for _, want := range []string{"read a.txt", "read b.txt", "write a.txt", "write b.txt"} {
		if !strings.Contains(ops, want) {
			t.Fatalf("patch events %q lack %q", ops, want)
		}
	}
	if len(byTag) != 2 {
		t.Fatalf("events carry %d tags, want 2: %v", len(byTag), byTag)
	}
}

func TestMountsAndHelp(t *testing.T) {
	d, _ := dir.New(memory.New())
	cs := connect(t, d, mcpserver.Options{Mounts: func() []mcpserver.MountInfo {
		return []mcpserver.MountInfo{{Path: "/", Backend: "memory"}, {Path: "/src", Backend: "host", Source: "project", ReadOnly: true}}
	}})
	out := callTool(t, cs, "mounts", map[string]any{}).text
	mustContain(t, out, `"path": "/src"`, `"read_only": true`, `"backend": "host"`)
	help := callTool(t, cs, "help", map[string]any{}).text
	mustContain(t, help, "path_outside_sandbox", "apply_patch", "invalid_argument", "/src  host, read-only")

	// Without a Mounts function, the root is described alone.
	cs2 := connect(t, d.ReadOnly(), mcpserver.Options{})
	mustContain(t, callTool(t, cs2, "mounts", map[string]any{}).text, `"path": "/"`, `"read_only": true`)
	mustContain(t, callTool(t, cs2, "help", map[string]any{}).text, "read-only")
}
