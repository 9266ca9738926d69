package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
	"golang.org/x/sys/unix"
)

// physicalImpls returns capfs's physical backend with the openat2 resolver (if
// this kernel offers it), with the portable one, and two dir.Dirs over the first:
// one with default options (policy.AllowAll, which skips per-path decisions) and
// one with policy.Defaults(), a custom policy, so every call resolves its path
// (Backend.Resolve) and then acts on the canonical location.
func physicalImpls() []HostImpl {
	openat2 := physical.WithResolver(physical.ResolverOpenat2)
	portable := physical.WithResolver(physical.ResolverPortable)
	impls := []HostImpl{{Name: PhysicalPortable, New: physicalNew(portable)}}
	if fsys, err := physical.New(os.TempDir(), openat2); err == nil {
		fsys.Close()
		impls = []HostImpl{
			{Name: PhysicalOpenat2, New: physicalNew(openat2)},
			impls[0],
			{Name: PhysicalDir, Layered: true, New: physicalDirNew(openat2)},
			{Name: PhysicalDirPolicy, Layered: true, New: physicalDirNew(openat2, dir.WithPolicy(policy.Defaults()))},
			{Name: PhysicalDirReadOnly, Layered: true, ReadOnly: true, New: physicalDirOver(openat2, func(b vfs.Backend) (vfs.Backend, error) { return vfs.ReadOnly(b), nil })},
			{Name: PhysicalDirSub, Layered: true, New: physicalDirOver(openat2, namespaceSub)},
			{Name: PhysicalFused, Layered: true, New: func(root string) (HostTarget, error) {
				fsys, err := physical.New(root, openat2)
				if err != nil {
					return nil, err
				}
				return fusedTarget{physicalTarget{BackendTarget{B: fsys}, fsys}, policy.Defaults()}, nil
			}},
		}
	}
	return impls
}

// physicalDirNew serves root through a dir.Dir with dopts over the physical
// backend with opt.
func physicalDirNew(opt physical.Option, dopts ...dir.Option) func(root string) (HostTarget, error) {
	return func(root string) (HostTarget, error) {
		fsys, err := physical.New(root, opt)
		if err != nil {
			return nil, err
		}
		d, _ := dir.New(fsys, dopts...)
		return physicalDirTarget{DirTarget{D: d}, fsys}, nil
	}
}

// physicalDirOver serves root through a dir.Dir with the default policy over
// wrap of the physical backend with opt: a wrapper every call and listing
// passes through, to be measured beside the unwrapped Dir.
func physicalDirOver(opt physical.Option, wrap func(vfs.Backend) (vfs.Backend, error)) func(root string) (HostTarget, error) {
	return func(root string) (HostTarget, error) {
		fsys, err := physical.New(root, opt)
		if err != nil {
			return nil, err
		}
		b, err := wrap(fsys)
		if err != nil {
			fsys.Close()
			return nil, err
		}
		d, _ := dir.New(b, dir.WithPolicy(policy.Defaults()))
		return physicalDirTarget{DirTarget{D: d}, fsys}, nil
	}
}

// namespaceSub mounts b in a Namespace and returns the Namespace's Sub at
// the mount point: b's own Sub, as a Namespace hands it out.
func namespaceSub(b vfs.Backend) (vfs.Backend, error) {
	ns := vfs.NewNamespace()
	at := vfs.MustParse("host")
	if err := ns.Mount(at, b, vfs.MountOptions{}); err != nil {
		return nil, err
	}
	return ns.Sub(context.Background(), at)
}

func physicalNew(opts ...physical.Option) func(root string) (HostTarget, error) {
	return func(root string) (HostTarget, error) {
		fsys, err := physical.New(root, opts...)
		if err != nil {
			return nil, err
		}
		return physicalTarget{BackendTarget{B: fsys}, fsys}, nil
	}
}

// physicalTarget drives the physical backend through the vfs.Backend SPI, parsing
// each path as a guest path first, as every layer above does.
type physicalTarget struct {
	BackendTarget
	fsys *physical.FS
}

func (t physicalTarget) Rename(from, to string) error {
	p, err := vfs.ParseGuest(from)
	if err != nil {
		return err
	}
	q, err := vfs.ParseGuest(to)
	if err != nil {
		return err
	}
	return t.fsys.Rename(context.Background(), p, q, 0)
}

func (t physicalTarget) Close() error { return t.fsys.Close() }

// physicalDirTarget drives a dir.Dir (default options) over the physical backend.
type physicalDirTarget struct {
	DirTarget
	fsys *physical.FS
}

func (t physicalDirTarget) Rename(from, to string) error {
	return t.D.Move(context.Background(), from, to)
}

func (t physicalDirTarget) Close() error { return t.fsys.Close() }

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return time.Duration(ts.Nano())
}

// TempFS describes the filesystem holding os.TempDir, where the host-directory
// workloads run: its type and whether it lives in memory.
func TempFS() string {
	var st unix.Statfs_t
	if err := unix.Statfs(os.TempDir(), &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs (memory)"
	case unix.EXT4_SUPER_MAGIC:
		return "ext2/3/4 (disk)"
	case unix.XFS_SUPER_MAGIC:
		return "xfs (disk)"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs (disk)"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("filesystem type %#x", st.Type)
}

// fusedTarget is the physical backend deciding on canonical paths the fused way:
// ResolveOpen and ResolveStat resolve once, the policy (policy.Defaults()) decides
// on the canonical path and on the guest's, and the call goes on from that
// resolution. It is what a Dir with a policy costs below its own bookkeeping when
// it uses them, on the two workloads a Dir is measured on.
type fusedTarget struct {
	physicalTarget
	pol *policy.Engine
}

// decide asks the policy about op on the canonical path and the guest's.
func (t fusedTarget) decide(op policy.Op, guest string, loc vfs.Location) error {
	for _, p := range []string{loc.Path.String(), guest} {
		if d := t.pol.Decide(context.Background(), &policy.Request{Op: op, Path: p, GuestPath: guest, Size: -1}); d.Effect != policy.Allow {
			return vfs.NewError(vfs.CodePermission, string(op), loc.Path, d.Reason)
		}
	}
	return nil
}

func (t fusedTarget) Open(name string) (io.ReadCloser, error) {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return nil, err
	}
	f, _, err := t.fsys.ResolveOpen(context.Background(), p, func(loc vfs.Location) error {
		return t.decide(policy.OpRead, name, loc)
	})
	return f, err
}

func (t fusedTarget) Stat(name string) (int64, error) {
	p, err := vfs.ParseGuest(name)
	if err != nil {
		return 0, err
	}
	loc, info, err := t.fsys.ResolveStat(context.Background(), p, true)
	if err != nil {
		return 0, err
	}
	if err := t.decide(policy.OpStat, name, loc); err != nil {
		return 0, err
	}
	if !loc.Found {
		return 0, vfs.NewError(vfs.CodeNotFound, "stat", p, "")
	}
	return info.Size, nil
}
