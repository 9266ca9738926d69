package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// newSnapshotGroup is the snapshot commands (save, list, restore, diff) over
// the store co opens.
func newSnapshotGroup(o *globalOptions, co *casOptions) *cobra.Command {
	snap := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, list, restore and compare named snapshots",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	snap.AddCommand(newCASSaveCmd(o, co), newCASListCmd(co), newCASRestoreCmd(o, co), newCASDiffCmd(co))
	return snap
}

// newSnapshotCmd is "capfs snapshot": the same commands as "capfs cas
// snapshot", named as a user first looks for them.
func newSnapshotCmd(o *globalOptions) *cobra.Command {
	co := &casOptions{env: o.env}
	snap := newSnapshotGroup(o, co)
	snap.Short = "Save, list, restore and compare named snapshots of directories (capfs cas snapshot)"
	snap.Long = `Save, list, restore and compare named snapshots of namespace directories, kept
in the content-addressed store (the same commands as "capfs cas snapshot"; see
"capfs cas --help" for the store and its other commands).

  capfs snapshot save NAME PATH     store namespace directory PATH, name it NAME
  capfs snapshot list               list the named snapshots
  capfs snapshot restore NAME DEST  write snapshot NAME to namespace path DEST (new)
  capfs snapshot diff A B           what changed from A to B (names or digests)`
	snap.PersistentFlags().StringVar(&co.store, "store", "", casStoreHelp)
	return snap
}

func newCASListCmd(co *casOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the named snapshots: name, root digest, time saved",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := co.open()
			if err != nil {
				return err
			}
			defer st.Close()
			roots, err := st.Roots()
			if err != nil {
				return failed(err)
			}
			for _, r := range roots {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", r.Name, r.Digest, r.ModTime.UTC().Format(time.RFC3339))
			}
			return nil
		},
	}
}
