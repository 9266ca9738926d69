package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"
)

func newTreeCmd(o *globalOptions) *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:   "tree [PATH]",
		Short: "Draw the tree under a directory of the namespace",
		Long: `Draw the tree of entries under directory PATH (default "/"), like tree(1):
symlinks are shown with their targets and never followed, entries the policy
refuses are left out, and a summary line counts directories and files. --depth N
stops N levels below PATH (0: no limit).`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().IntVarP(&depth, "depth", "L", 0, "descend at most N levels (0: no limit)")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		if depth < 0 {
			return usageErrorf("--depth %d: must be 0 or more", depth)
		}
		root := "/"
		if len(args) == 1 {
			root = args[0]
		}
		type node struct {
			name     string
			target   string
			dir      bool
			children []*node
		}
		top := &node{name: root, dir: true}
		stack := []*node{top} // stack[i] is the open directory at depth i
		var ndirs, nfiles int
		var walkErr error
		first, base := true, ""
		err := s.Root.Walk(ctx, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if walkErr == nil {
					walkErr = err
				}
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if first {
				first, base = false, p
				return nil
			}
			rel := p
			if base != "." {
				rel = strings.TrimPrefix(p, base+"/")
			}
			lvl := strings.Count(rel, "/") + 1
			n := &node{name: d.Name(), dir: d.IsDir()}
			if d.Type()&fs.ModeSymlink != 0 {
				if t, err := s.Root.Readlink(ctx, p); err == nil {
					n.target = t
				}
			}
			stack = stack[:lvl]
			stack[lvl-1].children = append(stack[lvl-1].children, n)
			if n.dir {
				ndirs++
				stack = append(stack, n)
				if depth > 0 && lvl >= depth {
					return fs.SkipDir
				}
			} else {
				nfiles++
			}
			return nil
		})
		if err != nil {
			return err
		}
		w := bufio.NewWriter(cmd.OutOrStdout())
		fmt.Fprintln(w, show(root))
		var draw func(n *node, prefix string)
		draw = func(n *node, prefix string) {
			for i, c := range n.children {
				branch, next := "├── ", "│   "
				if i == len(n.children)-1 {
					branch, next = "└── ", "    "
				}
				line := show(c.name)
				if c.target != "" {
					line += " -> " + show(c.target)
				}
				fmt.Fprintln(w, prefix+branch+line)
				draw(c, prefix+next)
			}
		}
		draw(top, "")
		fmt.Fprintf(w, "\n%d %s, %d %s\n", ndirs, plural(ndirs, "directory", "directories"), nfiles, plural(nfiles, "file", "files"))
		if err := w.Flush(); err != nil {
			return err
		}
		return walkErr
	})
	return cmd
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
