package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo runs the demo and checks the lines that show each property: the
// refused write, the refused escape, the revocation, the untouched grant, and
// the audit trail recording the refusals.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"/: project, tmp",
		`Glob("**/*.go"): [lib/util.go main.go]`,
		"WriteFile main.go: read_only",
		"read-only? true  fs.ErrPermission? true",
		"path_outside_sandbox",
		`notes.txt: "draft 1\ndraft 2\n"`,
		"revoked? true",
		"the src grant is unaffected",
		"Dir is a capability",
		"write   denied   project/src/main.go          read_only",
		"read    denied   tmp/notes.txt                revoked",
		"read    failed   ../README.md                 path_outside_sandbox",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q\n--- output ---\n%s", want, s)
		}
	}
}
