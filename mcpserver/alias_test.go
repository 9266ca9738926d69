package mcpserver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// TestPolicyAliasesThroughMCP: a rule holds under every name an agent can give a
// path through the tools (THREATS 52–55): links a host or an earlier sandboxed run
// left ("g -> .git", "up -> .."), links the agent tries to make, moves of a
// protected directory or its parent, and copies that would recreate a link to a
// protected place. Over memory and over the physical backend (openat2 and the
// portable resolver), with the default policy.
func TestPolicyAliasesThroughMCP(t *testing.T) {
	backends := map[string]func(t *testing.T) vfs.Backend{
		"memory": func(t *testing.T) vfs.Backend { return memory.New() },
		"physical-openat2": func(t *testing.T) vfs.Backend {
			return newPhys(t, physical.ResolverAuto)
		},
		"physical-portable": func(t *testing.T) vfs.Backend {
			return newPhys(t, physical.ResolverPortable)
		},
	}
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			host, _ := dir.New(b)
			populate(t, host, map[string]string{
				".git/config": "[core]\n", ".git/hooks/pre-commit.sample": "#!/bin/sh\n",
				".ssh/id_ed25519": "KEY", "src/main.go": "package main\n", "tree/a/f": "f",
			})
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			// Left behind by the host, or by a sandboxed run earlier.
			must(host.Symlink(aliasCtx, ".git", "g"))
			must(host.Symlink(aliasCtx, ".ssh", "keys"))
			must(host.Symlink(aliasCtx, "..", "src/up"))
			must(host.Symlink(aliasCtx, "../../.git/hooks", "tree/a/h"))
			guest, _ := dir.New(b, dir.WithPolicy(policy.Defaults()))
			cs := connect(t, guest, mcpserver.Options{})
			deny := func(tool string, args map[string]any) {
				t.Helper()
				failWith(t, cs, tool, args, string(vfs.CodePermission))
			}
			for _, p := range []string{"g/config", "g/hooks/pre-commit", "src/up/.git/config", "tree/a/h/post-checkout"} {
				deny("write", map[string]any{"path": p, "content": "PAYLOAD"})
				deny("append", map[string]any{"path": p, "content": "PAYLOAD"})
			}
			deny("edit", map[string]any{"path": "g/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = x"})
			deny("read", map[string]any{"path": "keys/id_ed25519"})
			deny("read", map[string]any{"path": "src/up/.ssh/id_ed25519"})
			deny("move", map[string]any{"source": ".git", "destination": "git"})
			deny("move", map[string]any{"source": "src/main.go", "destination": "g/hooks/pre-push"})
			deny("copy", map[string]any{"source": "tree", "destination": "tree2"})
			deny("copy", map[string]any{"source": "src/main.go", "destination": "g/hooks/pre-push"})
			deny("mkdir", map[string]any{"path": "g/hooks/x"})
			deny("remove", map[string]any{"path": "g/config"})
			deny("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: g/hooks/pre-push\n+#!/bin/sh\n*** End Patch\n"})
			got, err := host.ReadFile(aliasCtx, ".git/config")
			if err != nil || string(got) != "[core]\n" {
				t.Errorf(".git/config = %q, %v", got, err)
			}
			hooks, _ := host.List(aliasCtx, ".git/hooks")
			if len(hooks) != 1 {
				t.Errorf(".git/hooks = %v, want only the sample", hooks)
			}
			if _, err := host.Lstat(aliasCtx, "tree2"); err == nil {
				t.Error("a refused copy left tree2 behind")
			}
		})
	}
}

var aliasCtx = context.Background()

func newPhys(t *testing.T, mode physical.ResolverMode) vfs.Backend {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := physical.New(root, physical.WithResolver(mode))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
