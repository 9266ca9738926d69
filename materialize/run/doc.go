// Package run holds the parts of a sandboxed run on Dirs: for now the lazy
// work tree ([StartLazy]: a FUSE copy-on-write layer over a Dir, whose upper
// directory holds the changes and whose first sight of each entry is its
// base) and its view ([ViewPolicy], [GitView]).
package run
