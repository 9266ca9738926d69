package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas/remote"
)

func newCASPullCmd(co *casOptions) *cobra.Command {
	ro := &casRemoteOptions{env: co.env}
	c := &cobra.Command{
		Use:   "pull NAME|DIGEST --remote HOST:PORT",
		Short: "Fetch a snapshot from a REAPI server into the local store; a name is saved locally too",
		Long: `Fetch a tree from a Remote Execution API server into the local store: a name
is looked up in the server's Action Cache (as "capfs cas push" stored it), a
digest is taken as the root Directory. Only the blobs the local store lacks are
fetched, each verified against its digest before it is stored. A name (or --as
NAME) is then saved in the local store, so --mount PATH=cas:NAME mounts it; a
tree pulled by digest alone is unnamed, and a garbage collection removes it once
its grace period is over. A pull brings at most --max-download bytes into the
store (default 16GiB): a tree that needs more is refused (quota_exceeded)
before its files are fetched, and no name is saved.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref := args[0]
			d, isDigest, name, st, err := ro.begin(co, ref)
			if err != nil {
				return err
			}
			defer st.Close()
			client, err := ro.dial()
			if err != nil {
				return err
			}
			defer client.Close()
			if !isDigest {
				if d, err = client.FetchRoot(ctx, ref); err != nil {
					if errors.Is(err, remote.ErrNoRoot) {
						return failed(fmt.Errorf("the server has no snapshot named %s", ref))
					}
					return failed(err)
				}
			}
			ts, err := client.Download(ctx, st, d)
			if err != nil {
				return failed(err)
			}
			if name != "" {
				if err := st.SaveRoot(name, d); err != nil {
					return failed(err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %d blobs, %d fetched (%d bytes)\n", ref, d, ts.Blobs, ts.Missing, ts.Bytes)
			return nil
		},
	}
	ro.addFlags(c, "save the tree as NAME in the local store (default: the name pulled; a digest stays unnamed)")
	c.Flags().StringVar(&ro.maxBytes, "max-download", "", "most bytes the pull brings into the store, e.g. 64GiB (default 16GiB)")
	return c
}
