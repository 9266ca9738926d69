//lint:file-ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lockedBuffer is a bytes.Buffer a child process writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rootsClient starts capfs mcp in work with args and a client offering roots,
// and waits until the server has taken the client's roots (the mounts tool
// shows want); it returns the session, the mounts tool's text and the server's
// stderr.
func rootsClient(t *testing.T, work string, args []string, want string, roots ...*mcp.Root) (*mcp.ClientSession, string, *lockedBuffer) {
	t.Helper()
	srv := startCapfs(t, work, nil, args...)
	stderr := srv.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "capfs-test", Version: "v0"}, nil)
	client.AddRoots(roots...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	// Roots are a feature of the session protocols (2025-11-25 and before);
	// the sessionless 2026-07-28 deprecates them.
	cs, err := client.Connect(ctx, srv.transport(), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var mounts string
	for range 100 {
		mounts, _, _ = mcpCall(t, cs, "mounts", map[string]any{})
		if want == "" || strings.Contains(mounts, want) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cs, mounts, stderr
}

// TestMCPRoots: with --roots, a root inside a mounted host directory becomes
// a view of it under roots/; without the flag roots are not asked for.
func TestMCPRoots(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	proj := filepath.Join(work, "proj")
	writeTree(t, proj, map[string]string{"hello.txt": "from a root\n"})
	for _, withFlag := range []bool{true, false} {
		args := []string{"mcp", "-m", "project=physical:" + proj, "-m", "scratch=memory:"}
		want := ""
		if withFlag {
			args, want = append(args, "--roots"), `"/roots/proj"`
		}
		cs, mounts, _ := rootsClient(t, work, args, want,
			&mcp.Root{URI: "file://" + proj, Name: "project"}, &mcp.Root{URI: "https://example.com/x", Name: "not a directory"})
		if withFlag {
			if !strings.Contains(mounts, want) || strings.Contains(mounts, proj) || strings.Contains(mounts, "example.com") {
				t.Fatalf("mounts with --roots: %s", mounts)
			}
			text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": "roots/proj/hello.txt"})
			if isErr || !strings.Contains(text, "from a root") {
				t.Errorf("reading through the root: %q", text)
			}
		} else if strings.Contains(mounts, "roots") {
			t.Errorf("mounts without --roots: %s", mounts)
		}
		cs.Close()
	}
}

// TestMCPRootsOnlyNarrow: a client's root is a view of a directory the host
// mounted, never a new host directory (issue 26). file:/// and a directory
// outside every mount are refused (and said so on stderr); a root inside a
// mount shows that directory only; one that leads out of its mount through a
// symlink is refused; one inside a read-only mount (named by its real path,
// the mount by a symlink) stays read-only; and the policy's rules for the
// mount's paths hold through the view.
func TestMCPRootsOnlyNarrow(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	proj, docs, outside := filepath.Join(work, "proj"), filepath.Join(work, "docs"), filepath.Join(work, "outside")
	writeTree(t, proj, map[string]string{
		"top.txt":             "above the root\n",
		"sub/inside.txt":      "inside the root\n",
		"sub/vault/note.txt":  "vaulted\n",
		"sub/plain/note2.txt": "plain\n",
	})
	writeTree(t, docs, map[string]string{"d/file.txt": "a read-only doc\n"})
	writeTree(t, outside, map[string]string{"secret.txt": "not mounted\n"})
	if err := os.Symlink(outside, filepath.Join(proj, "sub", "escape")); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(work, "policy.toml")
	rules := "default = \"allow\"\n\n[[rules]]\nname = \"vault\"\neffect = \"deny\"\npaths = [\"project/sub/vault\", \"project/sub/vault/**\"]\nreason = \"the vault\"\n"
	if err := os.WriteFile(pol, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	// docs is mounted through a symlink to it; the client names its real path.
	docsLink := filepath.Join(work, "docs-link")
	if err := os.Symlink(docs, docsLink); err != nil {
		t.Fatal(err)
	}
	args := []string{"--policy", pol, "mcp", "--roots", "-m", "project=physical:" + proj, "-m", "docs=physical:" + docsLink + ",ro"}
	cs, mounts, stderr := rootsClient(t, work, args, `"/roots/sub"`,
		&mcp.Root{URI: "file:///", Name: "everything"},
		&mcp.Root{URI: "file://" + outside, Name: "outside"},
		&mcp.Root{URI: "file://" + filepath.Join(proj, "sub", "escape"), Name: "escape"},
		&mcp.Root{URI: "file://" + proj + "/sub/../../outside", Name: "dotdot"},
		&mcp.Root{URI: "file://" + filepath.Join(docs, "d"), Name: "read-only docs"},
		&mcp.Root{URI: "file://" + filepath.Join(proj, "sub"), Name: "sub"},
	)
	defer cs.Close()
	if !strings.Contains(mounts, `"/roots/sub"`) || !strings.Contains(mounts, `"/roots/d"`) || !strings.Contains(mounts, "a view of /project/sub") {
		t.Fatalf("the roots inside mounts are not shown: %s", mounts)
	}
	for _, refused := range []string{`"/roots/root"`, `"/roots/outside"`, `"/roots/escape"`, `"/roots/outside-2"`} {
		if strings.Contains(mounts, refused) {
			t.Errorf("a root outside the mounts is mounted (%s): %s", refused, mounts)
		}
	}
	if strings.Contains(mounts, work) {
		t.Errorf("the mounts tool shows a host path: %s", mounts)
	}

	read := func(p string) (string, bool) {
		text, isErr, _ := mcpCall(t, cs, "read", map[string]any{"path": p})
		return text, isErr
	}
	if text, isErr := read("roots/sub/inside.txt"); isErr || !strings.Contains(text, "inside the root") {
		t.Errorf("reading inside the root: %q", text)
	}
	for _, p := range []string{"roots/sub/../top.txt", "roots/sub/escape/secret.txt", "roots/root/etc/hostname", "roots/outside/secret.txt", "roots/sub/vault/note.txt"} {
		if text, isErr := read(p); !isErr || strings.Contains(text, "above the root") || strings.Contains(text, "not mounted") || strings.Contains(text, "vaulted") {
			t.Errorf("read %s through the roots: %q (error %v)", p, text, isErr)
		}
	}
	if text, _, _ := mcpCall(t, cs, "list", map[string]any{"path": "roots/sub"}); !strings.Contains(text, "inside.txt") || strings.Contains(text, "top.txt") {
		t.Errorf("list roots/sub: %q", text)
	}

	// Writing: through the view of a read-write mount it lands in the
	// mount's directory; through the view of a read-only one it is refused.
	if text, isErr, _ := mcpCall(t, cs, "write", map[string]any{"path": "roots/sub/new.txt", "content": "new\n"}); isErr {
		t.Errorf("writing through the root of a read-write mount: %q", text)
	} else if got, err := os.ReadFile(filepath.Join(proj, "sub", "new.txt")); err != nil || string(got) != "new\n" {
		t.Errorf("the write through the root: %q, %v", got, err)
	}
	if text, isErr, _ := mcpCall(t, cs, "write", map[string]any{"path": "roots/d/new.txt", "content": "new\n"}); !isErr {
		t.Errorf("writing through the root of a read-only mount succeeded: %q", text)
	}
	if _, err := os.Stat(filepath.Join(docs, "d", "new.txt")); err == nil {
		t.Error("a file was written into the read-only mount's directory")
	}
	if !strings.Contains(mounts, `"/roots/d"`) || !mountShownReadOnly(mounts, "/roots/d") {
		t.Errorf("the root of a read-only mount is not shown read-only: %s", mounts)
	}

	cs.Close()
	log := stderr.String()
	for _, name := range []string{"file:///", "file://" + outside, "escape"} {
		if !strings.Contains(log, name) || !strings.Contains(log, "refused") {
			t.Errorf("stderr does not say the root %s was refused:\n%s", name, log)
		}
	}
}

// mountShownReadOnly reports whether the mounts tool's text shows the mount at p
// read-only.
func mountShownReadOnly(mounts, p string) bool {
	i := strings.Index(mounts, `"`+p+`"`)
	if i < 0 {
		return false
	}
	rest := mounts[i:]
	if j := strings.Index(rest, "}"); j >= 0 {
		rest = rest[:j]
	}
	return strings.Contains(strings.ReplaceAll(rest, " ", ""), `"read_only":true`)
}
