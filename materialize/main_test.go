package materialize_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/capfs/capfs/materialize"
)

// TestMain gives the tests' syncs a state directory of their own (their
// journals go there, not under the user's home), and removes it afterwards.
func TestMain(m *testing.M) {
	if os.Getenv(materialize.EnvStateDir) == "" {
		d, err := os.MkdirTemp("", "capfs-state-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(materialize.EnvStateDir, d)
		code := m.Run()
		os.RemoveAll(d)
		os.Exit(code)
	}
	os.Exit(m.Run())
}
