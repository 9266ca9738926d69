package main

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

func newStatCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stat PATH",
		Short: "Show information on a path of the namespace",
		Long: `Show what PATH is (without following a final symlink): its type, size,
permission bits, modification time, link target, and the mount it lies in with
the mount's kind and whether it is read-only.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		p := args[0]
		info, err := s.Root.Lstat(ctx, p)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		vp, _ := vfs.ParseGuest(p)
		fmt.Fprintf(w, "path:     %s\n", showPath(vp.String()))
		fmt.Fprintf(w, "type:     %s\n", typeName(info.Mode()))
		fmt.Fprintf(w, "size:     %d\n", info.Size())
		fmt.Fprintf(w, "mode:     %s (%#o)\n", info.Mode(), info.Mode().Perm())
		fmt.Fprintf(w, "modified: %s\n", info.ModTime().Format("2006-01-02 15:04:05.000000000 -0700"))
		if info.Mode()&fs.ModeSymlink != 0 {
			t, err := s.Root.Readlink(ctx, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "target:   %s\n", show(t))
		}
		if m, _, ok := s.mountAt(vp); ok {
			fmt.Fprintf(w, "mount:    %s (%s%s)\n", showPath(m.Path.String()), m.Kind, roSuffix(m.ReadOnly))
		} else {
			fmt.Fprintf(w, "mount:    none (namespace directory, read-only)\n")
		}
		return nil
	})
	return cmd
}

func roSuffix(ro bool) string {
	if ro {
		return ", read-only"
	}
	return ", read-write"
}

// typeName names the type of a mode.
func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "other"
	}
}
