package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/backends/sqlite/sqlar"
	"github.com/capfs/capfs/vfs"
)

// The sqlite kind mounts a persistent scratch file: sqlite:FILE, created when
// missing, with ",quota=SIZE" (what the guest may store; none by default) and
// ",sync=normal|full|off" (sqlite.WithSynchronous). A read-only mount (",ro")
// opens the file without taking its lock, so it can inspect a file another
// capfs is writing.
func init() {
	registerMountKind("sqlite", &mountKind{
		Usage: "sqlite:FILE[,quota=SIZE][,sync=normal|full|off]",
		Option: func(spec *mountSpec, opt string) (bool, error) {
			if v, ok := cutOpt(opt, "quota="); ok {
				if _, err := parseQuota(v); err != nil {
					return false, fmt.Errorf("quota=%q: %v", v, err)
				}
				setOpt(spec, "quota", v)
				return true, nil
			}
			if v, ok := cutOpt(opt, "sync="); ok {
				if _, err := parseSync(v); err != nil {
					return false, err
				}
				setOpt(spec, "sync", v)
				return true, nil
			}
			return false, nil
		},
		Parse: func(spec *mountSpec, arg, base string) error {
			if arg == "" {
				return errors.New("sqlite needs a file name")
			}
			h := arg
			if !filepath.IsAbs(h) && base != "" {
				h = filepath.Join(base, h)
			}
			h, err := filepath.Abs(h)
			if err != nil {
				return err
			}
			if st, err := os.Stat(filepath.Dir(h)); err != nil || !st.IsDir() {
				return fmt.Errorf("%s: its directory does not exist", arg)
			}
			spec.Source, spec.Host = arg, h
			return nil
		},
		Open: func(spec mountSpec) (vfs.Backend, error) {
			opts, err := sqliteOptions(spec)
			if err != nil {
				return nil, err
			}
			return openSQLite(spec.Host, opts...)
		},
	})
}

// The agentfs kind mounts an AgentFS database (schema 0.4) read-only:
// agentfs:FILE. "capfs sqlite import-agentfs" copies one into a scratch file.
func init() {
	registerMountKind("agentfs", &mountKind{
		Usage: "agentfs:FILE (read-only)",
		Parse: func(spec *mountSpec, arg, base string) error {
			if arg == "" {
				return errors.New("agentfs needs a database file")
			}
			h := arg
			if !filepath.IsAbs(h) && base != "" {
				h = filepath.Join(base, h)
			}
			h, err := filepath.Abs(h)
			if err != nil {
				return err
			}
			if st, err := os.Stat(h); err != nil || !st.Mode().IsRegular() {
				return fmt.Errorf("%s: no such file", arg)
			}
			spec.Source, spec.Host, spec.ReadOnly = arg, h, true
			return nil
		},
		Open: func(spec mountSpec) (vfs.Backend, error) {
			f, err := sqlite.OpenAgentFS(spec.Host)
			if err != nil {
				return nil, agentFSError(filepath.Base(spec.Host), err)
			}
			return f, nil
		},
	})
}

// agentFSError says why OpenAgentFS refused the database name.
func agentFSError(name string, err error) error {
	switch {
	case errors.Is(err, sqlite.ErrForeign):
		return fmt.Errorf("%s is not an AgentFS database", name)
	case errors.Is(err, sqlite.ErrCorrupt):
		why := strings.TrimPrefix(err.Error(), sqlite.ErrCorrupt.Error()+": ")
		return fmt.Errorf("%s is refused as an AgentFS database: %s", name, why)
	}
	return fmt.Errorf("%s: %w", name, err)
}

func setOpt(spec *mountSpec, k, v string) {
	if spec.Opts == nil {
		spec.Opts = map[string]string{}
	}
	spec.Opts[k] = v
}

func parseSync(v string) (sqlite.Synchronous, error) {
	switch strings.ToLower(v) {
	case "", "normal":
		return sqlite.SyncNormal, nil
	case "full":
		return sqlite.SyncFull, nil
	case "off":
		return sqlite.SyncOff, nil
	}
	return 0, fmt.Errorf("sync=%q: want normal, full or off", v)
}

// sqliteOptions turns a spec's options into sqlite.Open options.
func sqliteOptions(spec mountSpec) ([]sqlite.Option, error) {
	var opts []sqlite.Option
	if v := spec.Opts["quota"]; v != "" {
		q, err := parseQuota(v)
		if err != nil {
			return nil, err
		}
		if q > 0 {
			opts = append(opts, sqlite.WithQuota(q))
		}
	}
	s, err := parseSync(spec.Opts["sync"])
	if err != nil {
		return nil, err
	}
	opts = append(opts, sqlite.WithSynchronous(s))
	if spec.ReadOnly {
		opts = append(opts, sqlite.WithReadOnly())
	}
	return opts, nil
}

// openSQLite opens a scratch file with the typed errors turned into messages
// that say what to do.
func openSQLite(file string, opts ...sqlite.Option) (*sqlite.FS, error) {
	f, err := sqlite.Open(file, opts...)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, sqlite.ErrLocked):
		return nil, fmt.Errorf("%s is in use by another capfs (mount it with ,ro to read it meanwhile)", filepath.Base(file))
	case errors.Is(err, sqlite.ErrForeign):
		return nil, fmt.Errorf("%s is not a capfs scratch file", filepath.Base(file))
	case errors.Is(err, sqlite.ErrNewerSchema):
		return nil, fmt.Errorf("%s was written by a newer capfs: %v", filepath.Base(file), err)
	case errors.Is(err, sqlite.ErrCorrupt):
		return nil, fmt.Errorf("%s is corrupt (%v); restore a snapshot with capfs sqlite restore", filepath.Base(file), err)
	}
	return nil, err
}

// ScratchFileFor returns the persistent scratch file of the project at
// directory project: $XDG_DATA_HOME/capfs/scratch/NAME-HASH.db (else
// ~/.local/share/...), NAME the directory's base name and HASH the first 12 hex
// digits of the SHA-256 of its absolute path, so two checkouts never share one.
// The directory is created (0700).
func scratchFileFor(project string) (string, error) {
	abs, err := filepath.Abs(project)
	if err != nil {
		return "", err
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" || !filepath.IsAbs(data) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		data = filepath.Join(home, ".local", "share")
	}
	dir := filepath.Join(data, "capfs", "scratch")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r < ' ' {
			return '_'
		}
		return r
	}, filepath.Base(abs))
	return filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:])[:12]+".db"), nil
}

// mcpScratchMount is the MCP server's scratch mount at path (the default tmp):
// the persistent scratch file of the project at directory project
// (scratchFileFor), so an agent finds its notes again in its next session,
// unless ephemeral (then a memory mount, as before). quota bounds either (<= 0:
// none). When another capfs already holds the project's file (a second agent
// session on the same project), it falls back to a memory mount and says so on
// warn, rather than failing to start.
func mcpScratchMount(path vfs.Path, project string, quota int64, ephemeral bool, warn io.Writer) (*mounted, error) {
	memory := func() (*mounted, error) {
		return openMount(mountSpec{Path: path, Kind: kindMemory, Origin: "default"}, quota)
	}
	if ephemeral {
		return memory()
	}
	file, err := scratchFileFor(project)
	if err != nil {
		return nil, failed(fmt.Errorf("persistent scratch: %v", cause(err)))
	}
	var opts []sqlite.Option
	if quota > 0 {
		opts = append(opts, sqlite.WithQuota(quota))
	}
	f, err := sqlite.Open(file, opts...)
	if errors.Is(err, sqlite.ErrLocked) {
		fmt.Fprintf(warn, "capfs: the persistent scratch %s is in use by another capfs; %s is a memory scratch this session\n", file, displayPath(path.String()))
		return memory()
	}
	if err != nil {
		_, oerr := openSQLite(file, opts...)
		if oerr == nil {
			oerr = err
		}
		return nil, failed(fmt.Errorf("persistent scratch: %v", oerr))
	}
	return &mounted{
		mountSpec: mountSpec{Path: path, Kind: "sqlite", Source: file, Host: file, Origin: "default", Quota: quota},
		Backend:   f,
	}, nil
}

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
			if _, err := os.Stat(args[0]); err != nil {
				return usageErrorf("%s: %v", args[0], cause(err))
			}
			f, err := openSQLite(args[0], sqlite.WithReadOnly())
			if err != nil {
				return failed(err)
			}
			defer f.Close()
			if err := f.Snapshot(context.Background(), args[1]); err != nil {
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
			if err := sqlite.Restore(args[0], args[1]); err != nil {
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
			budget, err := importBudget(args[0], maxBytes)
			if err != nil {
				return err
			}
			a, err := sqlite.OpenAgentFS(args[0])
			if err != nil {
				return failed(agentFSError(args[0], err))
			}
			defer a.Close()
			f, err := openSQLite(args[1])
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
		st, err := sqlar.Export(ctx, d.FS(), args[1], mode)
		if err != nil {
			return err
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
		st, err := sqlar.Import(ctx, args[0], d)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d files (%d bytes), %d directories, %d symlinks\n", args[1], st.Files, st.Bytes, st.Dirs, st.Symlinks)
		return nil
	})
	c.AddCommand(snapshot, restore, importAgentFS, exportSqlar, importSqlar)
	return c
}

// importBudget is import-agentfs's byte budget: flag (a size, or none), else
// the size of the database file db.
func importBudget(db, flag string) (int64, error) {
	if flag != "" {
		n, err := parseQuota(flag)
		if err != nil {
			return 0, usageErrorf("--max-bytes=%q: %v", flag, err)
		}
		return n, nil // -1 for none
	}
	st, err := os.Stat(db)
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
