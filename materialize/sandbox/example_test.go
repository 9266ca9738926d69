//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/materialize/sandbox"
)

// labelWrapper is a custom wrapper: it runs before the sandbox and adds an
// environment variable the command sees inside.
type labelWrapper struct{}

func (labelWrapper) Name() string { return "label" }

func (labelWrapper) Wrap(_ context.Context, l *sandbox.Launch) (*sandbox.Launch, error) {
	l.Env = append(l.Env, "BUILD_LABEL=nightly")
	return l, nil
}

// A build in a checkout bound read-write at /work, with a reference tree
// read-only at /ref, through a custom wrapper and then bubblewrap.
func ExampleRunner_Run() {
	r := sandbox.Default()
	r.Wrappers = append([]sandbox.Wrapper{labelWrapper{}}, r.Wrappers...)
	r.Audit = audit.NewSlog(nil)
	res, err := r.Run(context.Background(), &sandbox.Launch{
		Path: "make",
		Args: []string{"-j2"},
		Mounts: []sandbox.Mount{
			{Source: "/dev/shm/capfs-checkout-1234", Target: "/work", Writable: true},
			{Source: "/srv/reference", Target: "/ref"},
		},
		Subject: "ci",
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "not run:", err) // e.g. no working sandbox here
		return
	}
	fmt.Printf("exit %d, sandboxed %v, handled by %v\n", res.ExitCode, res.Sandboxed, res.Wrappers)
	// A sandboxed run prints: exit 0, sandboxed true, handled by [label bubblewrap]
}
