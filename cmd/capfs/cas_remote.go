package main

import (
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/backends/cas/remote"
)

// This file, cmd_cas_push.go and cmd_cas_pull.go are the only ones of the
// command that import package remote (and with it gRPC): the library packages
// capfs, vfs and dir never do.

type casRemoteOptions struct {
	env      environ // where $CAPFS_CAS_REMOTE is read
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
		target = ro.env.env("CAPFS_CAS_REMOTE")
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
