package mountkind

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

// Memory mounts an empty in-memory tree, gone when capfs exits:
// memory:[,quota=SIZE]. It is the one [Traits.Ephemeral] kind.
var Memory = Register(&Kind{
	Name:    "memory",
	Usage:   "memory:[,quota=SIZE]",
	Help:    "an empty in-memory tree (gone when capfs exits)",
	Traits:  Traits{Ephemeral: true},
	Options: "ro, rw or quota=SIZE",
	Option:  memoryOption,
	Flag:    memoryFlag,
	Config:  memoryConfig,
	Open:    openMemory,
})

// memoryOption takes ",quota=SIZE".
func memoryOption(spec *Spec, opt string) (bool, error) {
	v, ok := strings.CutPrefix(opt, "quota=")
	if !ok {
		return false, nil
	}
	q, err := ParseQuota(v)
	if err != nil {
		return false, err
	}
	spec.Quota = q
	return true, nil
}

// memoryFlag refuses an argument: --mount PATH=memory: takes none.
func memoryFlag(_ *Spec, arg, _ string) error {
	if arg != "" {
		return errors.New("memory takes no argument: PATH=memory:[,quota=SIZE]")
	}
	return nil
}

// memoryConfig takes a configuration file's memory mount: a quota, no
// source or rev.
func memoryConfig(spec *Spec, c Config, _ string) error {
	if c.Source != "" || c.Rev != "" {
		return errors.New("memory takes no source or rev")
	}
	if c.Quota != "" {
		q, err := ParseQuota(c.Quota)
		if err != nil {
			return fmt.Errorf("quota = %q: %v", c.Quota, err)
		}
		spec.Quota = q
	}
	return nil
}

// openMemory opens an empty tree with spec's quota, else env's.
func openMemory(_ context.Context, spec *Spec, env Env) (vfs.Backend, error) {
	if spec.Quota == 0 {
		spec.Quota = env.MemoryQuota
	}
	return newMemory(spec.Quota), nil
}

// newMemory is a memory backend with quota bytes (negative: no limit). The
// quota bounds every file too: growing one past it fails with quota_exceeded.
func newMemory(quota int64) *memory.FS {
	if quota < 0 {
		return memory.New()
	}
	return memory.New(memory.WithQuota(quota))
}
