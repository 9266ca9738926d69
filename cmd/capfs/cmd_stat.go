package main

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

func newStatCmd(o *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat PATH",
		Short: "Show information on a path of the namespace",
		Long: `Show what PATH is (without following a final symlink): its type, size,
permission bits, modification time, the mount it lies in with the mount's kind
and whether it is read-only, and for a symlink its target (an absolute target is
not shown) and what following it reaches: "leaves the mount" for a link capfs
never follows, "dangling", "loops", or the type of what it reaches. --json
prints the same as a JSON object.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object (name, path, type, mode, perm, size, mtime, target, link_note, reaches, mount)")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		p := args[0]
		info, err := s.Root.Lstat(ctx, p)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		vp, _ := vfs.ParseGuest(p)
		mount := "none (namespace directory, read-only)"
		var mj *jsonMount
		if m, _, ok := s.mountAt(vp); ok {
			mount = showPath(m.Path.String()) + " (" + m.Kind + roSuffix(m.ReadOnly) + ")"
			mj = &jsonMount{Path: displayPath(m.Path.String()), Kind: m.Kind, ReadOnly: m.ReadOnly}
		}
		reaches := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if st, err := s.Root.Stat(ctx, p); err == nil {
				reaches = typeName(st.Mode())
			}
		}
		if asJSON {
			e := newJSONEntry(ctx, s.Root, vp.String(), vp.Base(), info)
			return writeJSON(w, struct {
				*jsonEntry
				Reaches string     `json:"reaches,omitempty"`
				Mount   *jsonMount `json:"mount"`
			}{e, reaches, mj})
		}
		fmt.Fprintf(w, "path:     %s\n", showPath(vp.String()))
		fmt.Fprintf(w, "type:     %s\n", typeName(info.Mode()))
		fmt.Fprintf(w, "size:     %d\n", info.Size())
		fmt.Fprintf(w, "mode:     %s (%#o)\n", info.Mode(), info.Mode().Perm())
		fmt.Fprintf(w, "modified: %s\n", info.ModTime().Format("2006-01-02 15:04:05.000000000 -0700"))
		if info.Mode()&fs.ModeSymlink != 0 {
			t, abs, note := linkInfo(ctx, s.Root, vp.String())
			if abs {
				fmt.Fprintf(w, "target:   (absolute, not shown)\n")
			} else {
				fmt.Fprintf(w, "target:   %s\n", show(t))
			}
			if note == "" {
				note = reaches
			}
			fmt.Fprintf(w, "reaches:  %s\n", show(note))
		}
		fmt.Fprintf(w, "mount:    %s\n", mount)
		return nil
	})
	return cmd
}

type jsonMount struct {
	Path     string `json:"path"`
	Kind     string `json:"kind"`
	ReadOnly bool   `json:"read_only"`
	Source   string `json:"source,omitempty"`
	Rev      string `json:"rev,omitempty"`
	Quota    string `json:"quota,omitempty"`
	Origin   string `json:"origin,omitempty"`
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
