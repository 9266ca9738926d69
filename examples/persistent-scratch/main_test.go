package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary play the agent the demo starts and kills.
func TestMain(m *testing.M) {
	if file := os.Getenv(childEnv); file != "" {
		agent(file)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDemo runs the demo end to end: write, snapshot, a killed agent process,
// reopen with every acknowledged write, a mess, and the rollback.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, os.Args[0]); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"session 1: wrote notes/plan.md; snapshot taken",
		"agent killed with SIGKILL after 5 acknowledged writes",
		"all 5 acknowledged writes survived the crash",
		`rolled back: notes/plan.md = "1. read the code\n2. refactor\n", oops.txt gone: true`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q\n--- output ---\n%s", want, s)
		}
	}
}
