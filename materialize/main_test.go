//go:build linux

package materialize_test

import (
	"os"
	"testing"

	"github.com/capfs/capfs/materialize/internal/mattest"
)

// TestMain keeps checkouts and the syncs' journals off the user's
// directories ([mattest.Main]).
func TestMain(m *testing.M) { os.Exit(mattest.Main(m)) }
