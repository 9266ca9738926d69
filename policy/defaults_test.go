package policy

import (
	"os"
	"strings"
	"testing"
)

// TestDefaultsDocumented checks that docs/policy-defaults.md lists every default
// persistence pattern with what executes or loads it.
func TestDefaultsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy-defaults.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range defaultPersistence {
		if e.loader == "" || e.group == "" {
			t.Errorf("%q: no group or loader", e.pattern)
		}
		row := "| `" + e.pattern + "` | " + e.loader + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/policy-defaults.md lacks the row %s", row)
		}
	}
}
