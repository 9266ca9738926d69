package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGrepRacesSwaps plays, through a real capfs mcp and through capfs grep,
// with each resolver, the races a search's hinted opens (vfs.ExpectRegular)
// must survive, under a policy that denies reads of the project's vault/:
//
//   - a matching file exchanged, again and again, with a FIFO holding matching
//     bytes: every grep answers, and the FIFO is never read (its bytes are all
//     still in it afterwards);
//   - a directory exchanged with a symlink to the project's root:
//     sub/vault/note, listed while sub was real, then reaches vault/note, which
//     the policy denies, so the vault's line never appears; and a listing of
//     sub/vault (MCP list, which lists in one lookup, vfs.ResolveReadDir) is
//     decided where it leads, so the vault's names never appear either.
//
// Each call runs under a deadline, and the server is stopped at the end, so a
// grep that waited on the FIFO fails the test instead of hanging it.
func TestGrepRacesSwaps(t *testing.T) {
	eachResolver(t, func(t *testing.T, env []string) {
		root := filepath.Join(t.TempDir(), "project")
		writeTree(t, root, map[string]string{
			"a/file":         "needle plain\n",
			"vault/note":     "needle VAULT\n",
			"vault/key-name": "x\n",
			"sub/vault/note": "needle decoy\n",
			"sub/other":      "needle other\n",
		})
		const inFIFO = "needle FIFO\n"
		fifoLeft := testenv.HeldFIFO(t, filepath.Join(root, "a", "fifo"), inFIFO)
		if err := os.Symlink(".", filepath.Join(root, "rootlink")); err != nil {
			t.Fatal(err)
		}
		pol := filepath.Join(t.TempDir(), "policy.toml")
		rules := "default = \"allow\"\n\n[[rules]]\nname = \"vault\"\neffect = \"deny\"\nops = [\"read\", \"list\"]\npaths = [\"project/vault\", \"project/vault/**\"]\nreason = \"the vault\"\n"
		if err := os.WriteFile(pol, []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
		cs := mcpClientEnvArgs(t, root, env, "--policy", pol)
		defer cs.Close()

		// The rule holds before any race: the vault is refused by name.
		// The rule holds before any race: the vault is refused by name, and the
		// decoy directory lists.
		if text := mcpToolText(t, cs, "grep", map[string]any{"pattern": "needle", "path": "project/vault", "output_mode": "content"}); strings.Contains(text, "VAULT") {
			t.Fatalf("grep of the vault itself: %q", text)
		}
		if text := mcpToolText(t, cs, "list", map[string]any{"path": "project/vault"}); strings.Contains(text, "key-name") {
			t.Fatalf("list of the vault itself: %q", text)
		}
		if text := mcpToolText(t, cs, "list", map[string]any{"path": "project/sub/vault"}); !strings.Contains(text, "note") {
			t.Fatalf("list of the decoy: %q", text)
		}

		var texts []string
		testenv.Exchanging(t, root, [][2]string{{"a/file", "a/fifo"}, {"sub", "rootlink"}}, func() {
			for range 40 {
				texts = append(texts, mcpToolText(t, cs, "grep", map[string]any{"pattern": "needle", "path": "project", "output_mode": "content"}))
				texts = append(texts, mcpToolText(t, cs, "list", map[string]any{"path": "project/sub/vault"}))
			}
			for range 5 {
				r := runCapfsTimeout(t, root, env, 60*time.Second, "--policy", pol, "grep", "-r", "needle", ".")
				texts = append(texts, r.stdout)
			}
		})
		plain := 0
		for _, text := range texts {
			if strings.Contains(text, "VAULT") || strings.Contains(text, "FIFO") || strings.Contains(text, "key-name") {
				t.Errorf("a grep or list showed the vault or the FIFO: %q", text)
			}
			if strings.Contains(text, "needle plain") {
				plain++
			}
		}
		if plain == 0 {
			t.Errorf("no grep found the regular file under either name: %q", texts)
		}
		if got := fifoLeft(); got != inFIFO {
			t.Errorf("the FIFO holds %q after the race; want %q: something read it", got, inFIFO)
		}
	})
}

// mcpToolText calls an MCP tool under a deadline and returns its text.
func mcpToolText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v (a call that waits on a special file runs into the deadline)", name, args, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
