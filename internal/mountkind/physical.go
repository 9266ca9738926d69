package mountkind

import (
	"context"
	"errors"
	"fmt"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// Physical mounts a host directory, read-write unless ",ro":
// physical:HOSTDIR. It is the one [Traits.WorkTree] kind.
var Physical = Register(&Kind{
	Name:   "physical",
	Usage:  "physical:HOSTDIR",
	Help:   "a host directory (read-write unless ,ro)",
	Traits: Traits{WorkTree: true},
	Flag:   physicalFlag,
	Config: physicalConfig,
	Open:   openPhysical,
})

// physicalFlag takes the host directory of --mount PATH=physical:HOSTDIR.
func physicalFlag(spec *Spec, arg, base string) error {
	if arg == "" {
		return errors.New("physical needs a host directory: PATH=physical:HOSTDIR")
	}
	spec.Source = arg
	return setHostDir(spec, base)
}

// physicalConfig takes a configuration file's physical mount: a source,
// relative to base, and no rev.
func physicalConfig(spec *Spec, c Config, base string) error {
	if c.Source == "" {
		return errors.New("physical needs source")
	}
	if c.Rev != "" {
		return errors.New("rev applies to git mounts only")
	}
	return setHostDir(spec, base)
}

// setHostDir sets spec.Host to the directory spec.Source names.
func setHostDir(spec *Spec, base string) error {
	h, err := hostDir(spec.Source, base)
	if err != nil {
		return err
	}
	spec.Host = h
	return nil
}

// openPhysical opens spec.Host with the resolver [physicalResolver] chooses.
func openPhysical(_ context.Context, spec *Spec, env Env) (vfs.Backend, error) {
	mode, err := physicalResolver(env)
	if err != nil {
		return nil, err
	}
	b, err := physical.New(spec.Host, physical.WithResolver(mode))
	if err != nil {
		return nil, vfs.Readdress(err, "open", spec.Source, "")
	}
	return b, nil
}

// physicalResolver is the path resolver of physical mounts: the environment
// variable CAPFS_PHYSICAL_RESOLVER in env, "auto" (the default: openat2
// where the kernel has it), "openat2" (fail without it) or "portable" (the
// component walk every kernel has). The tests play each attack through both
// resolvers with it.
func physicalResolver(env Env) (physical.ResolverMode, error) {
	switch v := env.getenv("CAPFS_PHYSICAL_RESOLVER"); v {
	case "", "auto":
		return physical.ResolverAuto, nil
	case "openat2":
		return physical.ResolverOpenat2, nil
	case "portable":
		return physical.ResolverPortable, nil
	default:
		return 0, fmt.Errorf("CAPFS_PHYSICAL_RESOLVER=%q: want auto, openat2 or portable", v)
	}
}
