package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/backends/sqlite/sqlitetest"
	"github.com/capfs/capfs/vfs"
)

// TestAgentFSKindHostile mounts and imports every case of the generated
// AgentFS corpus: what the backend refuses (views, recursive ones included,
// triggers, sizes that disagree with the data) fails the mount and the
// import, which then writes nothing. Before the checks (8a35f16) the
// petabyte file imported zeros until the disk filled, and a recursive view
// made the mount never return.
func TestAgentFSKindHostile(t *testing.T) {
	defer func(d time.Duration) { sqlite.AgentFSOpenTimeout = d }(sqlite.AgentFSOpenTimeout)
	sqlite.AgentFSOpenTimeout = 20 * time.Second
	for _, c := range sqlitetest.AgentFS() {
		t.Run(c.Name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "agent.db")
			if err := sqlitetest.Apply(db, sqlitetest.AgentFSBase+c.SQL); err != nil {
				t.Fatal(err)
			}
			spec, err := parseMountFlag("agent=agentfs:"+db, "")
			if err != nil {
				t.Fatal(err)
			}
			m, err := openMount(spec, 0)
			if (err == nil) != (c.Want == sqlitetest.Opens) {
				t.Fatalf("mount: %v, want %s", err, c.Want)
			}
			if err == nil {
				m.Backend.(*sqlite.FS).Close()
			}
			file := filepath.Join(t.TempDir(), "s.db")
			cmd := newSQLiteCmd(&globalOptions{})
			cmd.SetArgs([]string{"import-agentfs", db, file})
			cmd.SetOut(new(bytes.Buffer))
			cmd.SetErr(new(bytes.Buffer))
			err = cmd.Execute()
			if (err == nil) != (c.Want == sqlitetest.Opens) {
				t.Fatalf("import: %v, want %s", err, c.Want)
			}
		})
	}
}

// TestImportAgentFSMaxBytes: --max-bytes bounds what import-agentfs writes.
func TestImportAgentFSMaxBytes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agent.db")
	if err := sqlitetest.Apply(db, sqlitetest.AgentFSBase); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag string
		ok   bool
	}{{"100", false}, {"1MiB", true}, {"none", true}, {"", true}} {
		file := filepath.Join(t.TempDir(), "s.db")
		cmd := newSQLiteCmd(&globalOptions{})
		args := []string{"import-agentfs", db, file}
		if tc.flag != "" {
			args = append(args, "--max-bytes", tc.flag)
		}
		cmd.SetArgs(args)
		cmd.SetOut(new(bytes.Buffer))
		cmd.SetErr(new(bytes.Buffer))
		err := cmd.Execute()
		if (err == nil) != tc.ok || (!tc.ok && vfs.CodeOf(err) != vfs.CodeQuota && !strings.Contains(err.Error(), "quota_exceeded")) {
			t.Fatalf("--max-bytes %q: %v, want ok %v", tc.flag, err, tc.ok)
		}
	}
}
