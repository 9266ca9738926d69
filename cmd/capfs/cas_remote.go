package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/backends/cas/remote"
)

// This file is the only one of the command that imports package remote (and
// with it gRPC): the library packages capfs, vfs and dir never do.

type casRemoteOptions struct {
	remote   string
	instance string
	as       string
	maxBytes string // pull only: --max-download
}

func (ro *casRemoteOptions) addFlags(c *cobra.Command, asHelp string) {
	c.Flags().StringVar(&ro.remote, "remote", "", "REAPI server HOST:PORT (grpc://HOST:PORT); default $CAPFS_CAS_REMOTE")
	c.Flags().StringVar(&ro.instance, "instance", "", "REAPI instance name")
	c.Flags().StringVar(&ro.as, "as", "", asHelp)
}

// target returns the name the result is saved under: --as, else ref when it is
// a name, else "" (a digest stays unnamed).
func (ro *casRemoteOptions) target(ref string, isDigest bool) (string, error) {
	if ro.as != "" {
		if !cas.ValidRootName(ro.as) {
			return "", usageErrorf("--as %q: use 1-128 of A-Z a-z 0-9 . _ - (not starting with . or -)", ro.as)
		}
		return ro.as, nil
	}
	if isDigest {
		return "", nil
	}
	return ref, nil
}

func (ro *casRemoteOptions) dial() (*remote.Client, error) {
	target := ro.remote
	if target == "" {
		target = os.Getenv("CAPFS_CAS_REMOTE")
	}
	if target == "" {
		return nil, usageErrorf("no remote: give --remote HOST:PORT or set $CAPFS_CAS_REMOTE")
	}
	opts := remote.Options{Instance: ro.instance}
	if ro.maxBytes != "" {
		n, err := parseQuota(ro.maxBytes)
		if err != nil || n <= 0 {
			return nil, usageErrorf("--max-download %s: want a size such as 64GiB", ro.maxBytes)
		}
		opts.MaxDownloadBytes = n
	}
	c, err := remote.Dial(target, opts)
	if err != nil {
		return nil, usageError(err)
	}
	return c, nil
}

// checkRef refuses an argument that is neither a digest nor a root name.
func checkRef(ref string) (cas.Digest, bool, error) {
	if d, err := cas.ParseDigest(ref); err == nil {
		return d, true, nil
	}
	if !cas.ValidRootName(ref) {
		return cas.Digest{}, false, usageErrorf("%q is neither a digest (HASH/SIZE) nor a snapshot name", ref)
	}
	return cas.Digest{}, false, nil
}

// begin checks ref (a digest, or a snapshot name), chooses the name the
// transfer saves (see target) and opens the local store, which the caller
// closes.
func (ro *casRemoteOptions) begin(co *casOptions, ref string) (d cas.Digest, isDigest bool, name string, st *cas.Store, err error) {
	if d, isDigest, err = checkRef(ref); err != nil {
		return
	}
	if name, err = ro.target(ref, isDigest); err != nil {
		return
	}
	st, err = co.open()
	return
}

func newCASPushCmd(co *casOptions) *cobra.Command {
	ro := &casRemoteOptions{}
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

func newCASPullCmd(co *casOptions) *cobra.Command {
	ro := &casRemoteOptions{}
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
