package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

func newTreeCmd(o *globalOptions) *cobra.Command {
	var depth int
	var asJSON bool
	var color string
	cmd := &cobra.Command{
		Use:   "tree [PATH]",
		Short: "Draw the tree under a directory of the namespace",
		Long: `Draw the tree of entries under directory PATH (default "/"), like tree(1):
symlinks are shown with their targets and never followed, with a note in
brackets when the link leaves its mount (an absolute target is not shown),
dangles or loops; a summary line counts directories and files. Every entry is
listed; a directory that cannot be read is shown with its error (exit 1). A
host name no capfs path can hold (one containing a backslash) cannot be listed
or read: each is named on stderr with the reason. --depth N stops N levels below PATH (0: no limit); --json prints the tree as
nested JSON objects.`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().IntVarP(&depth, "depth", "L", 0, "descend at most N levels (0: no limit)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tree as JSON: an object per entry, with children for directories")
	cmd.Flags().StringVar(&color, "color", "auto", "colour directories and links: auto (on a terminal, unless NO_COLOR is set), always or never")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		if depth < 0 {
			return usageErrorf("tree: --depth %d: must be 0 or more", depth)
		}
		useColor, err := colorWanted(color, cmd.OutOrStdout())
		if err != nil {
			return usageErrorf("tree: --color %s: %v", color, err)
		}
		col := colors{on: useColor}
		root := "/"
		if len(args) == 1 {
			root = args[0]
		}
		type node struct {
			name     string
			line     string // the name as drawn, with a link's target
			dir      bool
			children []*node
			js       *jsonEntry
		}
		vr, _ := vfs.ParseGuest(root)
		top := &node{name: root, dir: true, js: &jsonEntry{Name: root, Path: displayPath(vr.String()), Type: "directory"}}
		stack := []*node{top} // stack[i] is the open directory at depth i
		var ndirs, nfiles int
		var walkErr error
		first, base := true, ""
		var skipped unaddressable
		defer skipped.report(cmd.ErrOrStderr(), "tree")
		err = s.Root.Walk(skipped.context(ctx, root), root, func(p string, d fs.DirEntry, err error) error {
			if first && err == nil {
				first, base = false, p
				skipped.at(p)
				return nil
			}
			if err != nil {
				if first {
					return err
				}
				if walkErr == nil {
					walkErr = err
				}
				if d == nil {
					return nil
				}
			}
			rel := p
			if base != "." {
				rel = strings.TrimPrefix(p, base+"/")
			}
			lvl := strings.Count(rel, "/") + 1
			if lvl > len(stack) {
				return nil
			}
			n := &node{name: d.Name(), dir: d.IsDir()}
			n.line = show(d.Name())
			var info fs.FileInfo
			if asJSON {
				info, _ = d.Info()
			}
			switch {
			case err != nil:
				n.line += " [" + show(errMessage(err)) + "]"
			case d.IsDir():
				n.line = col.dir(n.line)
			case d.Type()&fs.ModeSymlink != 0:
				t, abs, note := linkInfo(ctx, s.Root, p)
				n.line = col.link(n.line) + linkText(t, abs, note)
			}
			if asJSON {
				n.js = newJSONEntry(ctx, s.Root, p, d.Name(), info)
				if err != nil {
					n.js.Note = errMessage(err)
				}
			}
			stack = stack[:lvl]
			parent := stack[lvl-1]
			parent.children = append(parent.children, n)
			if asJSON {
				parent.js.Children = append(parent.js.Children, n.js)
			}
			if n.dir {
				ndirs++
				stack = append(stack, n)
				skipped.at(p) // Walk lists it next
				if err != nil {
					return fs.SkipDir
				}
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
		if asJSON {
			if err := writeJSON(w, top.js); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return walkErr
		}
		fmt.Fprintln(w, col.dir(show(root)))
		var draw func(n *node, prefix string)
		draw = func(n *node, prefix string) {
			for i, c := range n.children {
				branch, next := "├── ", "│   "
				if i == len(n.children)-1 {
					branch, next = "└── ", "    "
				}
				fmt.Fprintln(w, prefix+branch+c.line)
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
