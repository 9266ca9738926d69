package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
)

// TestAuditFollowsRotation has two sinks on one log, as a long capfs mcp and
// CLI commands beside it would: when the second rotates the file, the first's
// next event lands in the current file, not in a rotated one that rotation
// later removes.
func TestAuditFollowsRotation(t *testing.T) {
	old := auditRecheck
	auditRecheck = 0
	defer func() { auditRecheck = old }()
	d := t.TempDir()
	log := filepath.Join(d, "audit.jsonl")
	st := auditSettings{dest: log, maxSize: "1MiB", maxFiles: 1}
	long, closeLong, err := openAuditSink(st, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	long.Record(t.Context(), audit.Event{RequestID: "long-1", Op: "read", Outcome: audit.OK})
	busy, closeBusy, err := openAuditSink(st, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25000 { // about 3 MiB: the file rotates, and rotates again
		busy.Record(t.Context(), audit.Event{RequestID: strconv.Itoa(i), Op: "stat", Path: strings.Repeat("p", 60), Outcome: audit.OK})
	}
	if err := closeBusy(); err != nil {
		t.Fatal(err)
	}
	long.Record(t.Context(), audit.Event{RequestID: "long-2", Op: "read", Outcome: audit.OK})
	if err := closeLong(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range readAudit(t, log) {
		if e.RequestID == "long-2" {
			found = true
		}
	}
	if !found {
		t.Error("the long-running sink's event after the rotation is not in the current log")
	}
	files, _ := filepath.Glob(filepath.Join(d, "audit*"))
	if len(files) != 2 {
		t.Errorf("want the log and 1 rotated file, got %v", files)
	}
}
