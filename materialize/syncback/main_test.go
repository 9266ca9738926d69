package syncback_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/capfs/capfs/internal/testenv"
	"github.com/capfs/capfs/materialize/syncback"
)

// TestMain makes checkouts under a directory of the run's own (unmounted and
// removed afterwards) and gives the tests' syncs a state directory of their own (their
// journals go there, not under the user's home), and removes it afterwards.
func TestMain(m *testing.M) {
	cleanup, err := testenv.PrivateTmp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(m)
	cleanup()
	os.Exit(code)
}

func run(m *testing.M) int {
	if os.Getenv(syncback.EnvStateDir) == "" {
		d, err := os.MkdirTemp("", "capfs-state-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(syncback.EnvStateDir, d)
		code := m.Run()
		os.RemoveAll(d)
		return code
	}
	return m.Run()
}
