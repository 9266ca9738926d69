package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestRevisions runs the example and checks the lines that show each step: both
// revisions listed and read, the read-only refusal, the typed and unified diff,
// the overlay's pending changes, the commit in git's log, a clean fsck, the
// untouched work tree, and the commit read back by a fresh Open.
func TestRevisions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not on PATH: the example builds its repository with it")
	}
	var out bytes.Buffer
	if err := run(context.Background(), &out, t.TempDir()); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"ls /:              rev scratch work",
		"ls rev:            HEAD~1 main",
		"ls rev/HEAD~1/lib: util.go",
		`cat rev/HEAD~1/README.md: "# greeter\n\nSays hello.\n"`,
		`cat rev/main/README.md: "# greeter\n\nSays hello to the world.\n"`,
		"write into rev/main -> WriteFile rev/main/README.md: read_only",
		"modified  README.md\n  added     lib/doc.go\n  modified  lib/util.go\n",
		"| -Says hello.\n  | +Says hello to the world.\n",
		"| new file mode 100644\n",
		`| +const Name = "capfs"`,
		"ls work: README.md lib\n",
		"pending: modified  README.md\n  pending: added     lib/VERSION\n  pending: deleted   main.go\n",
		"Edit from the overlay\n    145c961 greet capfs\n    5ee07e2 first version\n",
		"$ git fsck --strict\n    (no output)\n",
		"main.go     | 3 ---",
		`work tree README.md (untouched): "# greeter\n\nSays hello to the world.\n"`,
		`fresh gitree.Open(main): ls README.md lib; README.md "# greeter\n\nSays hello to capfs.\n"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q\n--- output ---\n%s", want, s)
		}
	}
}
