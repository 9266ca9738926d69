package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
		useColor, err := colorWanted(s.env, color, cmd.OutOrStdout())
		if err != nil {
			return usageErrorf("tree: --color %s: %v", color, err)
		}
		root := "/"
		if len(args) == 1 {
			root = args[0]
		}
		return runTree(ctx, cmd, s, root, &treeWalker{col: colors{on: useColor}, asJSON: asJSON, depth: depth})
	})
	return cmd
}

// treeNode is an entry of the tree as drawn.
type treeNode struct {
	name     string
	line     string // the name as drawn, with a link's target
	dir      bool
	children []*treeNode
	js       *jsonEntry
}

// treeWalker builds the tree from a Walk: its options, and what the walk
// found so far.
type treeWalker struct {
	col     colors
	asJSON  bool
	depth   int
	ctx     context.Context
	s       *session
	stack   []*treeNode // stack[i] is the open directory at depth i
	ndirs   int
	nfiles  int
	walkErr error // the first entry that failed
	first   bool  // the walk's root is next
	base    string
	skipped *unaddressable
}

// runTree walks root and prints its tree (or JSON) to cmd's output.
func runTree(ctx context.Context, cmd *cobra.Command, s *session, root string, tw *treeWalker) error {
	vr, _ := vfs.ParseGuest(root)
	top := &treeNode{name: root, dir: true, js: &jsonEntry{Name: root, Path: displayPath(vr.String()), Type: "directory"}}
	var skipped unaddressable
	defer skipped.report(cmd.ErrOrStderr(), "tree")
	tw.ctx, tw.s, tw.stack, tw.first, tw.skipped = ctx, s, []*treeNode{top}, true, &skipped
	if err := s.Root.Walk(skipped.context(ctx, root), root, tw.visit); err != nil {
		return err
	}
	w := bufio.NewWriter(cmd.OutOrStdout())
	if tw.asJSON {
		if err := writeJSON(w, top.js); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return tw.walkErr
	}
	fmt.Fprintln(w, tw.col.dir(show(root)))
	drawTree(w, top, "")
	fmt.Fprintf(w, "\n%d %s, %d %s\n", tw.ndirs, plural(tw.ndirs, "directory", "directories"), tw.nfiles, plural(tw.nfiles, "file", "files"))
	if err := w.Flush(); err != nil {
		return err
	}
	return tw.walkErr
}

// drawTree draws n's children under prefix, as tree(1) does.
func drawTree(w io.Writer, n *treeNode, prefix string) {
	for i, c := range n.children {
		branch, next := "├── ", "│   "
		if i == len(n.children)-1 {
			branch, next = "└── ", "    "
		}
		fmt.Fprintln(w, prefix+branch+c.line)
		drawTree(w, c, prefix+next)
	}
}

// visit is the Walk's function: it adds p to the tree.
func (tw *treeWalker) visit(p string, d fs.DirEntry, err error) error {
	if tw.first && err == nil {
		tw.first, tw.base = false, p
		tw.skipped.at(p)
		return nil
	}
	if err != nil {
		if tw.first {
			return err
		}
		if tw.walkErr == nil {
			tw.walkErr = err
		}
		if d == nil {
			return nil
		}
	}
	rel := p
	if tw.base != "." {
		rel = strings.TrimPrefix(p, tw.base+"/")
	}
	lvl := strings.Count(rel, "/") + 1
	if lvl > len(tw.stack) {
		return nil
	}
	n := tw.node(p, d, err)
	tw.stack = tw.stack[:lvl]
	parent := tw.stack[lvl-1]
	parent.children = append(parent.children, n)
	if tw.asJSON {
		parent.js.Children = append(parent.js.Children, n.js)
	}
	if !n.dir {
		tw.nfiles++
		return nil
	}
	tw.ndirs++
	tw.stack = append(tw.stack, n)
	tw.skipped.at(p) // Walk lists it next
	if err != nil || (tw.depth > 0 && lvl >= tw.depth) {
		return fs.SkipDir
	}
	return nil
}

// node is the tree's entry for p (d; err when it failed).
func (tw *treeWalker) node(p string, d fs.DirEntry, err error) *treeNode {
	n := &treeNode{name: d.Name(), dir: d.IsDir()}
	n.line = show(d.Name())
	var info fs.FileInfo
	if tw.asJSON {
		info, _ = d.Info()
	}
	switch {
	case err != nil:
		n.line += " [" + show(errMessage(err)) + "]"
	case d.IsDir():
		n.line = tw.col.dir(n.line)
	case d.Type()&fs.ModeSymlink != 0:
		t, abs, note := linkInfo(tw.ctx, tw.s.Root, p)
		n.line = tw.col.link(n.line) + linkText(t, abs, note)
	}
	if tw.asJSON {
		n.js = newJSONEntry(tw.ctx, tw.s.Root, p, d.Name(), info)
		if err != nil {
			n.js.Note = errMessage(err)
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
