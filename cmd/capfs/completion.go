package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// completeGuestPath completes a namespace path argument from the namespace
// itself: the entries of the directory typed so far, directories with a
// trailing "/". It opens the session the command would (the same --mount,
// --config and policy flags) and records nothing in the audit log. Names the
// policy refuses are not offered.
func completeGuestPath(o *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		saved, mounts := o.auditFile, o.mounts
		o.auditFile = "off"
		// Cobra's completion parses the flags twice: repeated flags repeat.
		o.mounts = nil
		for _, m := range mounts {
			if !slices.Contains(o.mounts, m) {
				o.mounts = append(o.mounts, m)
			}
		}
		defer func() { o.auditFile, o.mounts = saved, mounts }()
		s, err := o.open(cmd.Context(), "complete")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer s.Close()
		dirPart, prefix := "", toComplete
		if i := strings.LastIndexByte(toComplete, '/'); i >= 0 {
			dirPart, prefix = toComplete[:i+1], toComplete[i+1:]
		}
		list := dirPart
		if list == "" {
			list = "/"
		}
		entries, err := s.Root.ReadDir(cmd.Context(), list)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			c := dirPart + e.Name()
			if e.IsDir() {
				c += "/"
			}
			out = append(out, c)
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}
