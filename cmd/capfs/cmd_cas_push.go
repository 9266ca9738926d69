package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas/remote"
)

func newCASPushCmd(co *casOptions) *cobra.Command {
	ro := &casRemoteOptions{env: co.env}
	c := &cobra.Command{
		Use:   "push NAME|DIGEST --remote HOST:PORT",
		Short: "Upload a snapshot to a REAPI server (only the blobs it lacks); a name becomes an Action Cache entry",
		Long: `Upload the tree of a local snapshot (a name, or a root digest) to a Remote
Execution API server (bazel-remote, Buildbarn, BuildBuddy, NativeLink). The
server is asked which blobs it lacks (FindMissingBlobs) and only those are sent,
so pushing again also repairs what the server evicted. A name (or --as NAME) is
then stored on the server as an Action Cache entry whose output directory is the
tree, so "capfs cas pull NAME" on another machine finds it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref := args[0]
			d, isDigest, name, st, err := ro.begin(co, ref)
			if err != nil {
				return err
			}
			defer st.Close()
			if !isDigest {
				if d, err = st.Root(ref); err != nil {
					return failed(fmt.Errorf("no snapshot named %s in the local store", ref))
				}
			}
			client, err := ro.dial()
			if err != nil {
				return err
			}
			defer client.Close()
			var ts remote.TransferStats
			if name == "" {
				ts, err = client.Upload(ctx, st, d)
			} else {
				ts, err = client.SaveRoot(ctx, st, name, d)
			}
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %d blobs, %d missing on the server uploaded (%d bytes)\n",
				ref, d, ts.Blobs, ts.Missing, ts.Bytes)
			return nil
		},
	}
	ro.addFlags(c, "name the tree NAME on the server (default: the snapshot's own name; a digest stays unnamed)")
	return c
}
