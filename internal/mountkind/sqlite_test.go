package mountkind_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/internal/mountkind"
)

// OpenSQLite's advice keeps the sqlite package's sentinel, so a caller can
// still tell a file in use from a broken one (the MCP scratch falls back to
// memory only for the first).
func TestOpenSQLiteAdviceUnwraps(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.db")
	f, err := mountkind.OpenSQLite(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = mountkind.OpenSQLite(file)
	if !errors.Is(err, sqlite.ErrLocked) || !strings.Contains(err.Error(), "in use by another capfs") || strings.Contains(err.Error(), file) {
		t.Fatalf("second open: %v; want the advice, unwrapping to sqlite.ErrLocked, naming no host path", err)
	}
}
