package main

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
)

func newCASSaveCmd(o *globalOptions, co *casOptions) *cobra.Command {
	var git gitEntries
	cmd := &cobra.Command{
		Use:   "save NAME PATH",
		Short: "Store namespace directory PATH and name it NAME; print its digest",
		Long: `Store namespace directory PATH and name it NAME; print its digest. ".git"
directories and files are left out, as git archive leaves them, so the snapshot
restores anywhere (a restore cannot write a git directory: the policy keeps git
read-only); --git keep stores them too.`,
		Args: exactArgs(2),
	}
	addGitFlag(cmd.Flags(), &git, "stores them; restore leaves them out unless --git keep")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		name, path := args[0], args[1]
		if !cas.ValidRootName(name) {
			return usageErrorf("snapshot name %q: use 1-128 of A-Z a-z 0-9 . _ - (not starting with . or -)", name)
		}
		exclude, err := git.exclude()
		if err != nil {
			return err
		}
		st, err := co.open()
		if err != nil {
			return err
		}
		defer st.Close()
		d, err := s.Root.Sub(ctx, path)
		if err != nil {
			return err
		}
		// The cache records trees as filtered: each --git has its own (and
		// none is the key of a cache written before --git, which kept .git).
		key := statCacheKey(s, path) + "\x00git=" + git.arg
		var skipped, denied atomic.Int64
		root, err := st.Snapshot(ctx, d.Backend(), cas.SnapshotOptions{Name: name, StatCache: key, Exclude: exclude,
			Skipped: func(string, fs.FileMode) { skipped.Add(1) },
			Denied:  func(string, error) { denied.Add(1) }})
		if err != nil {
			return err
		}
		if n := skipped.Load(); n > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "capfs: %d special files (FIFOs, sockets, devices) left out\n", n)
		}
		if n := denied.Load(); n > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "capfs: %d entries the policy keeps out of reach left out\n", n)
		}
		git.report(cmd.ErrOrStderr(), "snapshot save")
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", name, root)
		return nil
	})
	return cmd
}

// statCacheKey names the stat cache of a snapshot of namespace path: the path
// and every mount's kind and source, so a changed mount table never reuses
// another tree's records.
func statCacheKey(s *session, path string) string {
	var b strings.Builder
	b.WriteString("ns:" + path)
	for _, m := range s.Mounts {
		fmt.Fprintf(&b, "\x00%s=%s:%s@%s:%s", m.Path, m.Kind, m.Source, m.Rev, m.Host)
	}
	return b.String()
}
