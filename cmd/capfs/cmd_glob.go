package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newGlobCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "glob PATTERN",
		Short: "List the paths matching a pattern",
		Long: `Print the namespace paths matching PATTERN, sorted, one per line. The syntax is
doublestar's: "*" and "?" within one path element, "[a-z]" classes, "{a,b}"
alternatives, "**" any number of directories. Quote the pattern so the shell
leaves it alone: capfs glob 'project/**/*.go'. Entries the policy refuses are
left out. Exits 1 when nothing matches. --json prints a JSON array.`,
		Args: cobra.ExactArgs(1),
	}
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the matching paths")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		var skipped unaddressable
		defer skipped.report(cmd.ErrOrStderr(), "glob")
		matches, err := s.Root.Glob(skipped.context(ctx, ""), args[0])
		if err != nil {
			return err
		}
		w := bufio.NewWriter(cmd.OutOrStdout())
		if asJSON {
			if matches == nil {
				matches = []string{}
			}
			if err := writeJSON(w, matches); err != nil {
				return err
			}
		} else {
			for _, m := range matches {
				fmt.Fprintln(w, show(m))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if len(matches) == 0 {
			return exitStatus(exitFailed)
		}
		return nil
	})
	return cmd
}
