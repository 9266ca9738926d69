// Package treediff is the one tree diff of capfs. It compares two trees into a
// list of [Change] values, pairs deleted and added files into renames, and
// writes changes as git's unified diff.
//
// The CLI's "capfs diff", gitree's [github.com/capfs/capfs/backends/gitree.Diff]
// and the MCP server's edit previews all use it:
//
//   - [Compare] walks two trees, each a [Tree]. [Backend] makes a [vfs.Backend]
//     a Tree, and [Backends] compares two backends.
//   - [Renames] pairs deletions with additions, as "git diff -M" does.
//   - [Unified] writes changes as "git diff" does. [WriteHunks] writes the @@
//     hunks of two texts, for callers that write their own headers.
//
// The package reads only through [vfs.Backend]: it knows no capability layer.
package treediff
