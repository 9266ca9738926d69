package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
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

type casOptions struct {
	store string
}

func (co *casOptions) open() (*cas.Store, error) {
	st, err := openCASStore(co.store)
	if err != nil {
		return nil, usageError(err)
	}
	return st, nil
}

func newCASCmd(o *globalOptions) *cobra.Command {
	co := &casOptions{}
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
	co := &casOptions{}
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
		root, err := st.Snapshot(ctx, d, cas.SnapshotOptions{Name: name, StatCache: key, Exclude: exclude,
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

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %d arguments, got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
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

func newCASRestoreCmd(o *globalOptions, co *casOptions) *cobra.Command {
	var git gitEntries
	cmd := &cobra.Command{
		Use:   "restore NAME DEST",
		Short: "Write snapshot NAME (or a digest) to namespace path DEST, which must not exist",
		Long: `Write snapshot NAME (or a digest) to namespace path DEST, which must not exist,
through the namespace: the policy decides every write. ".git" directories and
files a snapshot holds (saved with --git keep) are left out; --git keep writes
them, which the default policy refuses ("git is read-only here": the restore
stops there, exit 1) and a policy with allow_git_writes = true lets through but
for .git/config and hooks. Mount the snapshot (--mount PATH=cas:NAME) to read
its .git.`,
		Args: exactArgs(2),
	}
	addGitFlag(cmd.Flags(), &git, "writes them, where the policy allows git writes")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		exclude, err := git.exclude()
		if err != nil {
			return err
		}
		st, err := co.open()
		if err != nil {
			return err
		}
		defer st.Close()
		src, err := mountCAS(ctx, st, args[0])
		if err != nil {
			return err
		}
		if ok, err := s.Root.Exists(ctx, args[1]); err != nil {
			return err
		} else if ok {
			return vfs.NewError(vfs.CodeExists, "restore", vfs.Path{}, args[1]+" exists: restore writes a new directory")
		}
		dp, err := vfs.ParseGuest(args[1])
		if err != nil {
			return err
		}
		d, err := s.Root.CreateDir(ctx, args[1])
		if err != nil {
			return err
		}
		r := restorer{src: src, dest: dp, budget: cas.DefaultMaxEntries, exclude: exclude}
		n, err := r.into(ctx, vfs.Root, d)
		git.report(cmd.ErrOrStderr(), "snapshot restore")
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "restored %d entries of %s to %s\n", n, src.Root(), termsafe.Escape(args[1]))
		return nil
	})
	return cmd
}

// restorer copies a snapshot into a Dir, through it (so its policy decides
// every write). It writes at most budget entries (a tree can share one
// directory under many names) and leaves out those exclude names.
type restorer struct {
	src     *cas.FS
	dest    vfs.Path // the namespace path d is, for errors
	budget  int
	exclude func(string, fs.FileMode) bool
}

// at addresses err, from a call on the Dir at snapshot path p, by its
// namespace path.
func (r *restorer) at(err error, p vfs.Path) error {
	return readdressUnder(err, r.dest.Join(p))
}

// into copies directory p of the snapshot into d and returns the number of
// entries written.
func (r *restorer) into(ctx context.Context, p vfs.Path, d *dir.Dir) (int, error) {
	ents, err := r.src.ReadDir(ctx, p)
	if err != nil {
		return 0, err
	}
	if r.budget -= len(ents); r.budget < 0 {
		return 0, vfs.NewError(vfs.CodeQuota, "restore", p, fmt.Sprintf("the snapshot has more than %d entries", cas.DefaultMaxEntries))
	}
	n := 0
	for _, e := range ents {
		cp, err := p.Child(e.Name)
		if err != nil {
			return n, err
		}
		if r.exclude != nil && r.exclude(cp.String(), e.Type) {
			continue
		}
		switch e.Type {
		case fs.ModeDir:
			sub, err := d.CreateDir(ctx, e.Name)
			if err != nil {
				return n, r.at(err, p)
			}
			m, err := r.into(ctx, cp, sub)
			n += m
			if err != nil {
				return n, err
			}
		case fs.ModeSymlink:
			t, err := r.src.Readlink(ctx, cp)
			if err != nil {
				return n, err
			}
			if err := d.Symlink(ctx, t, e.Name); err != nil {
				return n, r.at(err, p)
			}
		default:
			if err := r.file(ctx, cp, d, e.Name); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

// file copies the snapshot's file p to name in d.
func (r *restorer) file(ctx context.Context, p vfs.Path, d *dir.Dir, name string) error {
	info, err := r.src.Lstat(ctx, p)
	if err != nil {
		return err
	}
	in, err := r.src.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := d.Open(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode.Perm())
	if err != nil {
		return r.at(err, p.Dir())
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return r.at(err, p.Dir())
}

func newCASDiffCmd(co *casOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "List what changed from snapshot A to B: A added, D deleted, M modified, T type changed",
		Long: `List what changed from snapshot A to snapshot B (each a name or a digest), one
line per entry: "A path" added, "D path" deleted, "M path" content, executable
bit or link target changed, "T path" type changed. A directory added or deleted
is one line ending in "/". Subtrees with equal digests are not read. Exits 0
whether or not they differ.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := co.open()
			if err != nil {
				return err
			}
			defer st.Close()
			a, err := mountCAS(ctx, st, args[0])
			if err != nil {
				return failed(err)
			}
			b, err := mountCAS(ctx, st, args[1])
			if err != nil {
				return failed(err)
			}
			return failed(casDiff(ctx, a, b, vfs.Root, func(code byte, p string) {
				fmt.Fprintf(cmd.OutOrStdout(), "%c %s\n", code, termsafe.Escape(p))
			}))
		},
	}
}

// casDiff reports the differences between directory p of a and of b.
func casDiff(ctx context.Context, a, b *cas.FS, p vfs.Path, emit func(code byte, path string)) error {
	ea, err := a.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	eb, err := b.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	show := func(cp vfs.Path, t fs.FileMode) string {
		if t == fs.ModeDir {
			return cp.String() + "/"
		}
		return cp.String()
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j >= len(eb) || i < len(ea) && ea[i].Name < eb[j].Name:
			cp, _ := p.Child(ea[i].Name)
			emit('D', show(cp, ea[i].Type))
			i++
		case i >= len(ea) || eb[j].Name < ea[i].Name:
			cp, _ := p.Child(eb[j].Name)
			emit('A', show(cp, eb[j].Type))
			j++
		default:
			cp, err := p.Child(ea[i].Name)
			if err != nil {
				return err
			}
			ia, err := a.Lstat(ctx, cp)
			if err != nil {
				return err
			}
			ib, err := b.Lstat(ctx, cp)
			if err != nil {
				return err
			}
			switch {
			case ia.Mode.Type() != ib.Mode.Type():
				emit('T', cp.String())
			case ia.Mode.IsDir():
				if ia.Sys.(*cas.Entry).Digest != ib.Sys.(*cas.Entry).Digest {
					if err := casDiff(ctx, a, b, cp, emit); err != nil {
						return err
					}
				}
			case ia.Mode&fs.ModeSymlink != 0:
				ta, _ := a.Readlink(ctx, cp)
				tb, _ := b.Readlink(ctx, cp)
				if ta != tb {
					emit('M', cp.String())
				}
			default:
				if ia.Mode != ib.Mode || ia.Sys.(*cas.Entry).Digest != ib.Sys.(*cas.Entry).Digest {
					emit('M', cp.String())
				}
			}
			i++
			j++
		}
	}
	return nil
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
