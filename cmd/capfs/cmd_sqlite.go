package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/backends/sqlite/sqlar"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
)

// newSQLiteCmd is "capfs sqlite": snapshot and restore of scratch files,
// AgentFS import, and SQLite Archive export and import through the namespace.
func newSQLiteCmd(o *globalOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "sqlite",
		Short: "Snapshot and restore persistent scratch files (sqlite:FILE mounts)",
		Long: `A sqlite:FILE mount keeps a scratch tree in one SQLite file. These commands take
a consistent copy of one (even while another capfs writes it) and put a copy back.`,
		Args: cobra.NoArgs,
	}
	snapshot := &cobra.Command{
		Use:   "snapshot FILE SNAPSHOT",
		Short: "Write a consistent point-in-time copy of scratch FILE to SNAPSHOT (which must not exist)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(o.env.abs(args[0])); err != nil {
				return usageErrorf("%s: %v", args[0], cause(err))
			}
			f, err := mountkind.OpenSQLite(o.env.abs(args[0]), sqlite.WithReadOnly())
			if err != nil {
				return failed(err)
			}
			defer f.Close()
			if err := f.Snapshot(context.Background(), o.env.abs(args[1])); err != nil {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot of %s written to %s\n", args[0], args[1])
			return nil
		},
	}
	restore := &cobra.Command{
		Use:   "restore SNAPSHOT FILE",
		Short: "Replace scratch FILE with SNAPSHOT, atomically (FILE must not be open)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := sqlite.Restore(o.env.abs(args[0]), o.env.abs(args[1])); err != nil {
				if errors.Is(err, sqlite.ErrLocked) {
					return failed(fmt.Errorf("%s is in use by another capfs; stop it first", args[1]))
				}
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s restored from %s\n", args[1], args[0])
			return nil
		},
	}
	var maxBytes string
	importAgentFS := &cobra.Command{
		Use:   "import-agentfs AGENT.db FILE [DIR]",
		Short: "Copy an AgentFS database's tree into scratch FILE (created if missing), under DIR (default: its root)",
		Long: `Copy an AgentFS database's tree into scratch FILE (created if missing), under DIR
(default: its root). The database is checked first (plain tables of the AgentFS
schema, every file's declared size equal to the data it stores). The import
writes at most --max-bytes of file data and symlink targets: by default the
size of AGENT.db, which a valid database cannot exceed.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			budget, err := importBudget(args[0], o.env.abs(args[0]), maxBytes)
			if err != nil {
				return err
			}
			a, err := sqlite.OpenAgentFS(o.env.abs(args[0]))
			if err != nil {
				return failed(mountkind.AgentFSError(args[0], err))
			}
			defer a.Close()
			f, err := mountkind.OpenSQLite(o.env.abs(args[1]))
			if err != nil {
				return failed(err)
			}
			at := vfs.Root
			if len(args) == 3 {
				if at, err = vfs.ParseGuest(args[2]); err != nil {
					return usageError(err)
				}
				if err := mkdirAllBackend(cmd.Context(), f, at); err != nil {
					f.Close()
					return failed(err)
				}
			}
			err = sqlite.Import(cmd.Context(), f, at, a, budget)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s into %s\n", args[0], args[1])
			return nil
		},
	}
	importAgentFS.Flags().StringVar(&maxBytes, "max-bytes", "", "the most file data and symlink targets to write (default: the size of AGENT.db; none: no limit)")
	var skipLinks bool
	exportSqlar := &cobra.Command{
		Use:   "export-sqlar PATH ARCHIVE",
		Short: "Write the namespace directory PATH to a new SQLite Archive (sqlite3 -A format)",
		Long: `Write the namespace directory PATH to a new SQLite Archive ARCHIVE, through the
capability (policy and audit apply). Symlinks are rows with sz -1, which capfs
imports but sqlite3 -Ax does not extract; --skip-symlinks leaves them out so
that sqlite3 -Ax extracts the whole archive.`,
		Args: cobra.ExactArgs(2),
	}
	exportSqlar.Flags().BoolVar(&skipLinks, "skip-symlinks", false, "leave symlinks out (for sqlite3 -Ax)")
	exportSqlar.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		d, err := s.Root.Sub(ctx, args[0])
		if err != nil {
			return err
		}
		mode := sqlar.SymlinkRows
		if skipLinks {
			mode = sqlar.SkipSymlinks
		}
		st, err := sqlar.Export(ctx, d.FS(), s.env.abs(args[1]), mode)
		if err != nil {
			return s.env.named(args[1], err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d files (%d bytes), %d directories, %d symlinks", args[1], st.Files, st.Bytes, st.Dirs, st.Symlinks)
		if st.SkippedSymlinks+st.Skipped > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "; left out %d symlinks and %d special files", st.SkippedSymlinks, st.Skipped)
		}
		fmt.Fprintln(cmd.OutOrStdout())
		return nil
	})
	importSqlar := &cobra.Command{
		Use:   "import-sqlar ARCHIVE PATH",
		Short: "Extract a SQLite Archive into the namespace directory PATH (all rows checked first; policy applies)",
		Args:  cobra.ExactArgs(2),
	}
	importSqlar.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		if err := s.Root.MkdirAll(ctx, args[1]); err != nil {
			return err
		}
		d, err := s.Root.Sub(ctx, args[1])
		if err != nil {
			return err
		}
		st, err := sqlar.Import(ctx, s.env.abs(args[0]), d)
		if err != nil {
			return s.env.named(args[0], err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d files (%d bytes), %d directories, %d symlinks\n", args[1], st.Files, st.Bytes, st.Dirs, st.Symlinks)
		return nil
	})
	c.AddCommand(snapshot, restore, importAgentFS, exportSqlar, importSqlar)
	return c
}

// importBudget is import-agentfs's byte budget: flag (a size, or none), else
// the size of the database file db (at host path file).
func importBudget(db, file, flag string) (int64, error) {
	if flag != "" {
		n, err := parseQuota(flag)
		if err != nil {
			return 0, usageErrorf("--max-bytes=%q: %v", flag, err)
		}
		return n, nil // -1 for none
	}
	st, err := os.Stat(file)
	if err != nil {
		return 0, usageErrorf("%s: %v", db, cause(err))
	}
	return max(st.Size(), 1), nil
}

// mkdirAllBackend creates directory p of b and its missing parents.
func mkdirAllBackend(ctx context.Context, b vfs.Backend, p vfs.Path) error {
	if p.IsRoot() {
		return nil
	}
	if info, err := b.Stat(ctx, p); err == nil {
		if info.Mode.IsDir() {
			return nil
		}
		return vfs.NewError(vfs.CodeNotDir, "mkdir", p, "")
	}
	if err := mkdirAllBackend(ctx, b, p.Dir()); err != nil {
		return err
	}
	return b.Mkdir(ctx, p.WithoutDirMark(), 0o755)
}
