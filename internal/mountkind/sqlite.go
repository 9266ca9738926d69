package mountkind

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/vfs"
)

// SQLite mounts a persistent scratch file: sqlite:FILE, created when missing,
// with ",quota=SIZE" (what the guest may store; none by default) and
// ",sync=normal|full|off" ([sqlite.WithSynchronous]). A read-only mount
// (",ro") opens the file without taking its lock, so it can inspect a file
// another capfs is writing. It is the one [Traits.Persistent] kind.
var SQLite = Register(&Kind{
	Name:   "sqlite",
	Usage:  "sqlite:FILE[,quota=SIZE][,sync=normal|full|off]",
	Help:   "a scratch tree in one SQLite file, created when missing",
	Traits: Traits{Persistent: true},
	Option: sqliteOption,
	Parse:  parseSQLite,
	Open:   openSQLiteMount,
})

// openSQLiteMount opens the scratch file spec.Host with spec's options.
func openSQLiteMount(_ context.Context, spec *Spec, _ Env) (vfs.Backend, error) {
	opts, err := sqliteOptions(*spec)
	if err != nil {
		return nil, err
	}
	return OpenSQLite(spec.Host, opts...)
}

// sqliteOption takes ",quota=SIZE" and ",sync=MODE".
func sqliteOption(spec *Spec, opt string) (bool, error) {
	if v, ok := strings.CutPrefix(opt, "quota="); ok {
		if _, err := ParseQuota(v); err != nil {
			return false, fmt.Errorf("quota=%q: %v", v, err)
		}
		setOpt(spec, "quota", v)
		return true, nil
	}
	if v, ok := strings.CutPrefix(opt, "sync="); ok {
		if _, err := parseSync(v); err != nil {
			return false, err
		}
		setOpt(spec, "sync", v)
		return true, nil
	}
	return false, nil
}

// parseSQLite takes the file arg, whose directory must exist.
func parseSQLite(spec *Spec, arg, base string) error {
	h, err := hostFile(arg, base, "sqlite needs a file name")
	if err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Dir(h)); err != nil || !st.IsDir() {
		return fmt.Errorf("%s: its directory does not exist", arg)
	}
	spec.Source, spec.Host = arg, h
	return nil
}

// parseSync reads a ",sync=" mode.
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

// sqliteOptions turns a spec's options into [sqlite.Open] options.
func sqliteOptions(spec Spec) ([]sqlite.Option, error) {
	var opts []sqlite.Option
	if v := spec.Opts["quota"]; v != "" {
		q, err := ParseQuota(v)
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

// OpenSQLite opens a scratch file with the typed errors turned into messages
// that say what to do; errors.Is still finds the sqlite package's sentinel.
func OpenSQLite(file string, opts ...sqlite.Option) (*sqlite.FS, error) {
	f, err := sqlite.Open(file, opts...)
	if err == nil {
		return f, nil
	}
	if msg := sqliteAdvice(filepath.Base(file), err); msg != "" {
		return nil, &adviceError{msg: msg, err: err}
	}
	return nil, err
}

// sqliteAdvice says what to do about err, an error of opening scratch file
// name, or "".
func sqliteAdvice(name string, err error) string {
	switch {
	case errors.Is(err, sqlite.ErrLocked):
		return name + " is in use by another capfs (mount it with ,ro to read it meanwhile)"
	case errors.Is(err, sqlite.ErrForeign):
		return name + " is not a capfs scratch file"
	case errors.Is(err, sqlite.ErrNewerSchema):
		return fmt.Sprintf("%s was written by a newer capfs: %v", name, err)
	case errors.Is(err, sqlite.ErrCorrupt):
		return fmt.Sprintf("%s is corrupt (%v); restore a snapshot with capfs sqlite restore", name, err)
	}
	return ""
}

// adviceError is an error shown as advice that still unwraps to its cause.
type adviceError struct {
	msg string
	err error
}

func (e *adviceError) Error() string { return e.msg }
func (e *adviceError) Unwrap() error { return e.err }

// ScratchFile returns the persistent scratch file of the project at
// directory project: $XDG_DATA_HOME/capfs/scratch/NAME-HASH.db (else
// ~/.local/share/...) as env reads them, NAME the directory's base name and
// HASH the first 12 hex digits of the SHA-256 of its absolute path, so two
// checkouts never share one. The directory is created (0700).
func ScratchFile(project string, env Env) (string, error) {
	abs, err := filepath.Abs(project)
	if err != nil {
		return "", err
	}
	data := env.getenv("XDG_DATA_HOME")
	if data == "" || !filepath.IsAbs(data) {
		home, err := env.homeDir()
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
