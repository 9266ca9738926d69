//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunGrantsFileBounded: a grant file is an outside input, read no further
// than the grant-set limit and parsed by the one parser. /dev/zero (endless) and
// a file past the limit are refused as bad input, before anything runs; on the
// code before readGrantFile, /dev/zero was read until memory ran out.
func TestRunGrantsFileBounded(t *testing.T) {
	t.Parallel()
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"version":1,"grants":[]}`+strings.Repeat(" ", 5<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"/dev/zero", big} {
		r := runCapfsTimeout(t, t.TempDir(), nil, 2*time.Minute, "run", "--grants", file, "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--grants") {
			t.Errorf("--grants %s: exit %d, want %d naming --grants:\n%s", file, r.code, exitUsage, r.stderr)
		}
	}
}
