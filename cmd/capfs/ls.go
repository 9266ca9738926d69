package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func newLsCmd(o *globalOptions) *cobra.Command {
	var long bool
	cmd := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory of the namespace (default: its root)",
		Long: `List the entries of directory PATH (default "/", the namespace root), sorted by
name; directories end in "/". A file is listed by itself. With -l, each line
shows the type and permission bits, the size, the modification time, the name,
and a symlink's target; an entry whose metadata the policy hides (a secret) shows
"?" in place of them.`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long format: mode, size, modification time, name, link target")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		p := "/"
		if len(args) == 1 {
			p = args[0]
		}
		w := bufio.NewWriter(cmd.OutOrStdout())
		defer w.Flush()
		st, err := s.Root.Stat(ctx, p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			info, err := s.Root.Lstat(ctx, p)
			if err != nil {
				return err
			}
			return lsLine(ctx, w, s.Root, p, p, info, long)
		}
		entries, err := s.Root.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !long {
				name := show(e.Name())
				if e.IsDir() {
					name += "/"
				}
				if _, err := fmt.Fprintln(w, name); err != nil {
					return err
				}
				continue
			}
			info, err := e.Info()
			if vfs.CodeOf(err) == vfs.CodePermission {
				// The policy hides this entry's metadata (a secret): show the name only.
				if _, err := fmt.Fprintf(w, "%-10s %10s %16s %s\n", "?", "?", "?", show(e.Name())); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if err := lsLine(ctx, w, s.Root, path.Join(p, e.Name()), e.Name(), info, long); err != nil {
				return err
			}
		}
		return nil
	})
	return cmd
}

// lsLine writes one entry: its name (directories with a trailing "/"), or with long
// its mode, size, time, name and link target.
func lsLine(ctx context.Context, w io.Writer, d *dir.Dir, full, name string, info fs.FileInfo, long bool) error {
	name = show(name)
	if info.IsDir() {
		name += "/"
	}
	if !long {
		_, err := fmt.Fprintln(w, name)
		return err
	}
	target := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		t, err := d.Readlink(ctx, full)
		if err != nil {
			return err
		}
		target = " -> " + show(t)
	}
	_, err := fmt.Fprintf(w, "%s %10d %s %s%s\n", info.Mode(), info.Size(), info.ModTime().Format("2006-01-02 15:04"), name, target)
	return err
}
