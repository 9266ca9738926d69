package main

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
)

func newCASDiffCmd(co *casOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "List what changed from snapshot A to B: A added, D deleted, M modified, T type changed",
		Long: `List what changed from snapshot A to snapshot B (each a name or a digest), one
line per entry: "A path" added, "D path" deleted, "M path" content, executable
bit or link target changed, "T path" type changed. A directory added or deleted
is one line ending in "/". Subtrees with equal digests are not read. Exits 0
whether or not they differ.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := co.open()
			if err != nil {
				return err
			}
			defer st.Close()
			a, err := mountkind.MountCAS(ctx, st, args[0])
			if err != nil {
				return failed(err)
			}
			b, err := mountkind.MountCAS(ctx, st, args[1])
			if err != nil {
				return failed(err)
			}
			return failed(casDiff(ctx, a, b, vfs.Root, func(code byte, p string) {
				fmt.Fprintf(cmd.OutOrStdout(), "%c %s\n", code, termsafe.Escape(p))
			}))
		},
	}
}

// casDiff reports the differences between directory p of a and of b.
func casDiff(ctx context.Context, a, b *cas.FS, p vfs.Path, emit func(code byte, path string)) error {
	ea, err := a.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	eb, err := b.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	show := func(cp vfs.Path, t fs.FileMode) string {
		if t == fs.ModeDir {
			return cp.String() + "/"
		}
		return cp.String()
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j >= len(eb) || i < len(ea) && ea[i].Name < eb[j].Name:
			cp, _ := p.Child(ea[i].Name)
			emit('D', show(cp, ea[i].Type))
			i++
		case i >= len(ea) || eb[j].Name < ea[i].Name:
			cp, _ := p.Child(eb[j].Name)
			emit('A', show(cp, eb[j].Type))
			j++
		default:
			cp, err := p.Child(ea[i].Name)
			if err != nil {
				return err
			}
			ia, err := a.Lstat(ctx, cp)
			if err != nil {
				return err
			}
			ib, err := b.Lstat(ctx, cp)
			if err != nil {
				return err
			}
			switch {
			case ia.Mode.Type() != ib.Mode.Type():
				emit('T', cp.String())
			case ia.Mode.IsDir():
				if ia.Sys.(*cas.Entry).Digest != ib.Sys.(*cas.Entry).Digest {
					if err := casDiff(ctx, a, b, cp, emit); err != nil {
						return err
					}
				}
			case ia.Mode&fs.ModeSymlink != 0:
				ta, _ := a.Readlink(ctx, cp)
				tb, _ := b.Readlink(ctx, cp)
				if ta != tb {
					emit('M', cp.String())
				}
			default:
				if ia.Mode != ib.Mode || ia.Sys.(*cas.Entry).Digest != ib.Sys.(*cas.Entry).Digest {
					emit('M', cp.String())
				}
			}
			i++
			j++
		}
	}
	return nil
}
