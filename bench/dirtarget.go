package bench

import (
	"context"
	"io"
	"os"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
)

// DirTarget drives a dir.Dir: every call is a full enforcement pass (revocation,
// path validation, attenuation, the default policy, hooks, audit).
type DirTarget struct{ D *dir.Dir }

func newDirTarget() Target {
	d, _ := dir.New(memory.New())
	return DirTarget{D: d}
}

func newDirPolicyTarget() Target {
	d, _ := dir.New(memory.New(), dir.WithPolicy(policy.Defaults()))
	return DirTarget{D: d}
}

// Create implements Target.
func (t DirTarget) Create(name string) (io.WriteCloser, error) {
	return t.D.Open(context.Background(), name, createFlags, 0o644)
}

// Append implements Target.
func (t DirTarget) Append(name string) (io.WriteCloser, error) {
	return t.D.Open(context.Background(), name, appendFlags, 0o644)
}

// Open implements Target.
func (t DirTarget) Open(name string) (io.ReadCloser, error) {
	return t.D.Open(context.Background(), name, os.O_RDONLY, 0)
}

// Stat implements Target.
func (t DirTarget) Stat(name string) (int64, error) {
	fi, err := t.D.Stat(context.Background(), name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// ReadDir implements Target.
func (t DirTarget) ReadDir(name string) (int, error) {
	ents, err := t.D.ReadDir(context.Background(), name)
	return len(ents), err
}

// Mkdir implements Target.
func (t DirTarget) Mkdir(name string) error {
	_, err := t.D.CreateDir(context.Background(), name)
	return err
}
