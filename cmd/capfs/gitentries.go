package main

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync/atomic"

	"github.com/spf13/pflag"
)

// gitEntries is --git of snapshot save, snapshot restore and archive: what
// becomes of ".git" entries (git directories and gitdir files, at any depth).
// omit, the default, leaves them out, as git archive does, so what is saved
// restores and extracts anywhere (the policy refuses to write a git directory);
// keep stores them too.
type gitEntries struct {
	arg     string
	omitted atomic.Int64
}

// addGitFlag adds --git to f; verb says what keep does ("stores them").
func addGitFlag(f *pflag.FlagSet, g *gitEntries, verb string) {
	f.StringVar(&g.arg, "git", "omit", `".git" directories and files: omit (as git archive does) or keep (`+verb+`)`)
}

// exclude is the Exclude filter --git asks for: nil for keep.
func (g *gitEntries) exclude() (func(string, fs.FileMode) bool, error) {
	switch g.arg {
	case "keep":
		return nil, nil
	case "omit", "":
		return func(p string, _ fs.FileMode) bool {
			if path.Base(p) != ".git" {
				return false
			}
			g.omitted.Add(1)
			return true
		}, nil
	}
	return nil, usageErrorf("--git %s: want omit or keep", g.arg)
}

// report says on w what was left out, if anything: "capfs: WHAT: left out ...".
func (g *gitEntries) report(w io.Writer, what string) {
	switch n := g.omitted.Load(); {
	case n == 1:
		fmt.Fprintf(w, "capfs: %s: left out .git (--git keep includes it)\n", what)
	case n > 1:
		fmt.Fprintf(w, "capfs: %s: left out %d .git entries (--git keep includes them)\n", what, n)
	}
}
