package main

import (
	"bufio"
	"context"
	"io/fs"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func newDiffCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Show the differences between two directories or two files",
		Long: `Print a git-style unified diff from A to B, two namespace paths that are both
directories or both files. For directories, paths in the diff are relative to A
and B ("diff --git a/main.go b/main.go"), every changed file, symlink and mode
is shown, and binary files are reported as differing. For two files, the diff
is headed with B's path. With the default mounts, "capfs diff ref/head project"
shows the uncommitted changes of the current directory (add --exclude '.git/**'
to leave the repository's own files out). Exits 0 whether or not the inputs
differ.`,
		Args: cobra.ExactArgs(2),
	}
	var excludes []string
	cmd.Flags().StringArrayVarP(&excludes, "exclude", "x", nil, "leave out changed paths (relative to A and B) matching this doublestar pattern (repeatable)")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		a, b := args[0], args[1]
		sa, err := s.Root.Stat(ctx, a)
		if err != nil {
			return err
		}
		sb, err := s.Root.Stat(ctx, b)
		if err != nil {
			return err
		}
		var ba, bb vfs.Backend
		switch {
		case sa.IsDir() && sb.IsDir():
			da, err := s.Root.Sub(ctx, a)
			if err != nil {
				return err
			}
			db, err := s.Root.Sub(ctx, b)
			if err != nil {
				return err
			}
			ba, bb = da.Backend(), db.Backend()
		case sa.IsDir():
			pa, _ := vfs.ParseGuest(a)
			return vfs.NewError(vfs.CodeIsDir, "diff", pa, "a directory, and "+b+" is not")
		case sb.IsDir():
			pb, _ := vfs.ParseGuest(b)
			return vfs.NewError(vfs.CodeIsDir, "diff", pb, "a directory, and "+a+" is not")
		default:
			vb, err := vfs.ParseGuest(b)
			if err != nil {
				return err
			}
			name := vb.String()
			if va, err := vfs.ParseGuest(a); err == nil && va.Base() == vb.Base() {
				name = vb.Base()
			}
			if ba, err = fileTree(ctx, s.Root, a, name, sa.Mode()); err != nil {
				return err
			}
			if bb, err = fileTree(ctx, s.Root, b, name, sb.Mode()); err != nil {
				return err
			}
		}
		for _, x := range excludes {
			if !doublestar.ValidatePattern(x) {
				return usageErrorf("--exclude %s: malformed pattern", x)
			}
		}
		changes, err := gitree.DiffBackends(ctx, ba, bb)
		if err != nil {
			return err
		}
		kept := changes[:0]
	next:
		for _, c := range changes {
			for _, x := range excludes {
				if ok, _ := doublestar.Match(x, c.Path); ok {
					continue next
				}
			}
			kept = append(kept, c)
		}
		changes = kept
		w := bufio.NewWriter(cmd.OutOrStdout())
		if err := gitree.UnifiedDiff(ctx, ba, bb, changes, w); err != nil {
			return err
		}
		return w.Flush()
	})
	return cmd
}

// fileTree returns a memory tree holding the contents of file p of d at name, with
// p's permission bits.
func fileTree(ctx context.Context, d *dir.Dir, p, name string, mode fs.FileMode) (vfs.Backend, error) {
	data, err := d.ReadFile(ctx, p)
	if err != nil {
		return nil, err
	}
	mem := memory.New()
	host, _ := dir.New(mem)
	np := vfs.MustParse(name)
	if !np.Dir().IsRoot() {
		if err := host.MkdirAll(ctx, np.Dir().String()); err != nil {
			return nil, err
		}
	}
	if err := host.WriteFile(ctx, name, data, mode.Perm()); err != nil {
		return nil, err
	}
	return mem, nil
}
