package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newMountsCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mounts",
		Short: "Show what is mounted where",
		Long: `List the namespace's mounts: the mount point, the kind of backend, whether it is
read-only, and its source as given (a host directory, or a repository and
revision; "." for the defaults, meaning the current directory), and a memory
mount's quota.`,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of mounts (path, kind, read_only, source, rev, quota, origin)")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		if asJSON {
			out := make([]jsonMount, 0, len(s.Mounts))
			for _, m := range s.Mounts {
				jm := jsonMount{Path: "/" + m.Path.Raw(), Kind: m.Kind, ReadOnly: m.ReadOnly, Source: m.Source, Origin: m.Origin}
				if m.Revision() {
					jm.Rev = m.Rev
				}
				if m.Ephemeral() {
					jm.Quota = formatQuota(m.Quota)
				}
				out = append(out, jm)
			}
			return writeJSON(cmd.OutOrStdout(), out)
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "PATH\tKIND\tMODE\tSOURCE")
		for _, m := range s.Mounts {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			src := m.Source
			if m.Revision() {
				src += "@" + m.Rev
			}
			if src == "" {
				src = "-"
			}
			if m.Ephemeral() {
				src += " (quota " + formatQuota(m.Quota) + ")"
			}
			fmt.Fprintf(w, "/%s\t%s\t%s\t%s\n", show(m.Path.Raw()), m.Kind, mode, show(src))
		}
		return w.Flush()
	})
	return cmd
}
