package mountkind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/vfs"
)

// AgentFS mounts an AgentFS database (schema 0.4) read-only: agentfs:FILE.
// "capfs sqlite import-agentfs" copies one into a scratch file.
var AgentFS = Register(&Kind{
	Name:  "agentfs",
	Usage: "agentfs:FILE (read-only)",
	Help:  "an AgentFS database (capfs sqlite import-agentfs copies one to sqlite)",
	Parse: parseAgentFS,
	Open:  openAgentFS,
})

// openAgentFS opens the database spec.Host read-only.
func openAgentFS(_ context.Context, spec *Spec, _ Env) (vfs.Backend, error) {
	f, err := sqlite.OpenAgentFS(spec.Host)
	if err != nil {
		return nil, AgentFSError(filepath.Base(spec.Host), err)
	}
	return f, nil
}

// parseAgentFS takes the database file arg, which must exist.
func parseAgentFS(spec *Spec, arg, base string) error {
	h, err := hostFile(arg, base, "agentfs needs a database file")
	if err != nil {
		return err
	}
	if st, err := os.Stat(h); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%s: no such file", arg)
	}
	spec.Source, spec.Host, spec.ReadOnly = arg, h, true
	return nil
}

// AgentFSError says why [sqlite.OpenAgentFS] refused the database name.
func AgentFSError(name string, err error) error {
	switch {
	case errors.Is(err, sqlite.ErrForeign):
		return fmt.Errorf("%s is not an AgentFS database", name)
	case errors.Is(err, sqlite.ErrCorrupt):
		why := strings.TrimPrefix(err.Error(), sqlite.ErrCorrupt.Error()+": ")
		return fmt.Errorf("%s is refused as an AgentFS database: %s", name, why)
	}
	return fmt.Errorf("%s: %w", name, err)
}
