package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
)

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
		src, err := mountkind.MountCAS(ctx, st, args[0])
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
	return vfs.Under(err, r.dest.Join(p))
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
