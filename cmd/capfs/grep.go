package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

// binarySniff is how many leading bytes are searched for a NUL to call a file
// binary (as git and grep do).
const binarySniff = 8000

func newGrepCmd(o *globalOptions) *cobra.Command {
	var ignoreCase, lineNumbers, filesOnly bool
	cmd := &cobra.Command{
		Use:   "grep [-i] [-n] [-l] REGEX [PATH]",
		Short: "Search file contents with a regular expression",
		Long: `Search the regular files under PATH (default "/", the whole namespace), or
the file PATH, for lines matching REGEX (Go regexp syntax, RE2). Each match is
printed as "path:line" ("path:number:line" with -n); with -l, only the names of
files that match. Binary files (a NUL byte in the first 8000 bytes), files the
policy refuses (secrets) and files over the read limit are skipped; symlinks are
not followed. Exits 0 when a line matched, 1 when none did or on an error.`,
		Args: cobra.RangeArgs(1, 2),
	}
	f := cmd.Flags()
	f.BoolVarP(&ignoreCase, "ignore-case", "i", false, "match case-insensitively")
	f.BoolVarP(&lineNumbers, "line-number", "n", false, "prefix each line with its number")
	f.BoolVarP(&filesOnly, "files-with-matches", "l", false, "print only the names of files with a match")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		expr := args[0]
		if ignoreCase {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return usageErrorf("grep: bad regular expression: %v", err)
		}
		root := "/"
		if len(args) == 2 {
			root = args[1]
		}
		w := bufio.NewWriter(cmd.OutOrStdout())
		defer w.Flush()
		matched := false
		var firstErr error
		first := true
		note := func(err error) {
			if firstErr == nil {
				firstErr = err
			}
		}
		err = s.Root.Walk(ctx, root, func(p string, d fs.DirEntry, err error) error {
			isRoot := first
			first = false
			if err != nil {
				if isRoot {
					return err
				}
				note(err)
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			data, err := s.Root.ReadFile(ctx, p)
			switch vfs.CodeOf(err) {
			case "":
			case vfs.CodePermission, vfs.CodeTooLarge, vfs.CodeNotRegular:
				return nil // denied, too large, or swapped for a special file: skip
			default:
				note(err)
				return nil
			}
			if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
				return nil
			}
			name := showPath(p)
			for n := 1; len(data) > 0; n++ {
				line := data
				if i := bytes.IndexByte(data, '\n'); i >= 0 {
					line, data = data[:i], data[i+1:]
				} else {
					data = nil
				}
				if !re.Match(line) {
					continue
				}
				matched = true
				if filesOnly {
					fmt.Fprintln(w, name)
					break
				}
				if lineNumbers {
					fmt.Fprintf(w, "%s:%d:%s\n", name, n, line)
				} else {
					fmt.Fprintf(w, "%s:%s\n", name, line)
				}
			}
			return ctx.Err()
		})
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
		if firstErr != nil {
			return firstErr
		}
		if !matched {
			return exitStatus(exitFailed)
		}
		return nil
	})
	return cmd
}
