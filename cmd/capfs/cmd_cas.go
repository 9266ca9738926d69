package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/internal/termsafe"
)

const casLong = `Work with the content-addressed store: trees kept as REAPI Directory messages
and blobs named by SHA-256 digest (HASH/SIZE), as Bazel's remote caches keep them.

  capfs cas snapshot save NAME PATH     store namespace directory PATH, name it NAME
  capfs cas snapshot list               list the named snapshots
  capfs cas snapshot restore NAME DEST  write snapshot NAME to namespace path DEST (new)
  capfs cas snapshot diff A B           what changed from A to B (names or digests)
  capfs cas verify [--repair]           check every blob, and every tree a name reaches
  capfs cas gc [--grace 1h]             delete what no name reaches (older than grace)
  capfs cas push NAME|DIGEST --remote HOST:PORT   upload to a REAPI server (what it lacks)
  capfs cas pull NAME|DIGEST --remote HOST:PORT   fetch from a REAPI server into the store

A snapshot is mounted with --mount PATH=cas:NAME or PATH=cas:DIGEST (read-only).
The store is --store DIR, else $CAPFS_CAS_STORE, else the user cache directory's
capfs/cas. Snapshots read and write through the namespace, so the policy applies:
files it keeps out of reach are not stored, and a restore writes nothing the
policy refuses. "capfs snapshot ..." is "capfs cas snapshot ...".`

// casOptions are the flags of the cas commands, and the environ they run in.
type casOptions struct {
	env   environ
	store string
}

// open opens the store: --store (from the working directory), else as
// [mountkind.OpenCASStore] finds it in co.env.
func (co *casOptions) open() (*cas.Store, error) {
	st, err := mountkind.OpenCASStore(co.env.abs(co.store), co.env.kindEnv(0))
	if err != nil {
		return nil, usageError(co.env.named(co.store, err))
	}
	return st, nil
}

func newCASCmd(o *globalOptions) *cobra.Command {
	co := &casOptions{env: o.env}
	c := &cobra.Command{
		Use:   "cas",
		Short: "Content-addressed snapshots: save, list, restore, diff, verify, gc, push, pull",
		Long:  casLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	c.PersistentFlags().StringVar(&co.store, "store", "", casStoreHelp)
	c.AddCommand(newSnapshotGroup(o, co), newCASVerifyCmd(co), newCASGCCmd(co), newCASPushCmd(co), newCASPullCmd(co))
	return c
}

const casStoreHelp = "CAS store directory (default $CAPFS_CAS_STORE, else the user cache directory's capfs/cas)"

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %d arguments, got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

func newCASVerifyCmd(co *casOptions) *cobra.Command {
	repair := false
	c := &cobra.Command{
		Use:   "verify",
		Short: "Check every blob of the store and every tree a named snapshot reaches",
		Long: `Check every blob of the store (its bytes hash to its digest) and every tree
a named snapshot reaches (each directory and file present and intact). Prints
what it checked and each failure; exits 1 when anything failed. --repair
removes corrupt blobs, so the next snapshot holding the same content stores
it again.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := co.open()
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := st.Verify(cmd.Context(), repair)
			if err != nil {
				return failed(err)
			}
			out := cmd.OutOrStdout()
			for _, d := range rep.Corrupt {
				fmt.Fprintf(out, "corrupt blob %s\n", d.Hex())
			}
			for name, why := range rep.Broken {
				fmt.Fprintf(out, "broken snapshot %s: %s\n", name, termsafe.Escape(why))
			}
			fmt.Fprintf(out, "%d blobs, %d snapshots checked: %d corrupt blobs, %d broken snapshots\n",
				rep.Blobs, rep.Roots, len(rep.Corrupt), len(rep.Broken))
			if len(rep.Corrupt) > 0 || len(rep.Broken) > 0 {
				return &cliError{code: 1, err: errors.New("the store is damaged"), quiet: true}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&repair, "repair", false, "remove corrupt blobs")
	return c
}

func newCASGCCmd(co *casOptions) *cobra.Command {
	grace := time.Hour
	c := &cobra.Command{
		Use:   "gc",
		Short: "Delete blobs no named snapshot reaches and that were not used within --grace",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := co.open()
			if err != nil {
				return err
			}
			defer st.Close()
			gs, err := st.GC(cmd.Context(), grace)
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d roots, %d reachable blobs; deleted %d blobs (%d bytes), kept %d young ones\n",
				gs.Roots, gs.Reachable, gs.Deleted, gs.DeletedBytes, gs.Young)
			return nil
		},
	}
	c.Flags().DurationVar(&grace, "grace", time.Hour, "keep unreachable blobs written or used within this long")
	return c
}
