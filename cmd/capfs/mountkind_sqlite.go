package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/capfs/capfs/backends/sqlite"
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
