//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/fuseexport"
	"github.com/capfs/capfs/vfs"
)

const mountLong = `Serve the namespace (or the subtree --work names) on the host directory
MOUNTPOINT through FUSE, until interrupted (Ctrl-C, SIGTERM), then unmount.

Every request a program makes in the mount is one call on a capfs Dir, with the
same policy, hooks and audit log as every other command: paths the policy hides
answer "No such file or directory", read-only mounts and write-protected paths
refuse changes (EROFS, EACCES), symlinks leading out of the exported tree and
FIFOs are absent, and creating them is refused. A listing shows "." and "..",
and no name the policy hides. A host name no capfs path can hold (one
containing a backslash) cannot be shown: each is named once on stderr. Nothing
is copied: files are read on first access.

A mount point left by a capfs that was killed (stat answers "Transport endpoint
is not connected") is detected and detached before mounting.

Needs /dev/fuse, and root or fusermount3 (package fuse3). See the fuseexport
package documentation for what a FUSE mount cannot give (coherence with other
routes beyond --cache, locks shared with other routes, extended attributes,
chown).`

func newMountCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mount MOUNTPOINT",
		Short: "Serve the namespace on a host directory through FUSE",
		Long:  mountLong,
		Example: `  capfs mount /mnt/capfs
  capfs --policy policy.toml mount --work project --ro /mnt/project`,
		Args: cobra.ExactArgs(1),
	}
	var work string
	var readOnly, allowOther, debug bool
	var cache time.Duration
	f := cmd.Flags()
	f.StringVarP(&work, "work", "w", "", `namespace path to export (default: the whole namespace)`)
	f.BoolVar(&readOnly, "ro", false, "export read-only")
	f.BoolVar(&allowOther, "allow-other", false, "let other users use the mount (root, or user_allow_other in /etc/fuse.conf)")
	f.DurationVar(&cache, "cache", time.Second, "how long the kernel may trust names and attributes without asking (0: no caching)")
	f.BoolVar(&debug, "debug", false, "log every FUSE request on stderr")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		var err error
		mp := filepath.Clean(s.env.abs(args[0]))
		if !filepath.IsAbs(mp) {
			return usageErrorf("mount point %s: the working directory is gone", args[0])
		}
		if err := fuseexport.Available(); err != nil {
			return err
		}
		d := s.Root
		var wp vfs.Path
		if work != "" {
			if wp, err = vfs.ParseGuest(work); err != nil {
				return usageErrorf("--work %s: %s", work, messageOrCode(err))
			}
			wp = wp.WithoutDirMark()
			if d, err = s.Root.Sub(ctx, "/"+wp.String()); err != nil {
				return err
			}
		}
		if readOnly {
			d = d.ReadOnly()
		}
		if fuseexport.CheckStale(mp) != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "capfs: %s is a stale FUSE mount (its server died); detaching it\n", mp)
			if err := fuseexport.ClearStale(mp); err != nil {
				return err
			}
		}
		stderr := cmd.ErrOrStderr()
		opts := fuseexport.Options{
			Mounts:     exportMounts(s, wp),
			AllowOther: allowOther,
			Debug:      debug,
			Unaddressable: func(dir vfs.Path, u vfs.Unaddressable) {
				fmt.Fprintf(stderr, "capfs mount: %s: skipped 1 name the capability cannot address (%s: %s); the mount does not show it\n",
					showPath(wp.Join(dir).String()), show(u.Name), u.Reason)
			},
		}
		if cache <= 0 {
			opts.EntryTimeout, opts.AttrTimeout, opts.NegativeTimeout = -1, -1, -1
		} else {
			opts.EntryTimeout, opts.AttrTimeout, opts.NegativeTimeout = cache, cache, cache
		}
		srv, err := fuseexport.Mount(mp, d, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "capfs: serving /%s on %s; Ctrl-C unmounts\n", wp.Raw(), mp)
		return srv.Serve(ctx)
	})
	return cmd
}

// exportMounts lists the session's mount points relative to the exported path
// wp (the mount serving wp itself as the root), so the FUSE server keeps the
// inode numbers of different backends apart.
func exportMounts(s *session, wp vfs.Path) []vfs.Path {
	var out []vfs.Path
	for _, m := range s.Mounts {
		if rel, ok := m.Path.TrimPrefix(wp); ok {
			out = append(out, rel)
		} else if _, ok := wp.TrimPrefix(m.Path); ok {
			out = append(out, vfs.Path{})
		}
	}
	return out
}
