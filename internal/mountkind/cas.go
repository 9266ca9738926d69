package mountkind

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/vfs"
)

// CAS mounts a content-addressed tree read-only: cas:DIGEST (HASH/SIZE of a
// root Directory) or cas:NAME (a named root, see "capfs cas snapshot"), from
// the store given by ",store=DIR", else $CAPFS_CAS_STORE, else the user cache
// directory's capfs/cas.
var CAS = Register(&Kind{
	Name:   "cas",
	Usage:  "cas:DIGEST|NAME[,store=DIR]",
	Help:   "a content-addressed snapshot, read-only (capfs snapshot)",
	Option: casOption,
	Parse:  parseCAS,
	Open:   openCAS,
})

// casOption takes ",store=DIR".
func casOption(spec *Spec, opt string) (bool, error) {
	v, ok := strings.CutPrefix(opt, "store=")
	if !ok {
		return false, nil
	}
	if v == "" {
		return false, errors.New("empty store directory")
	}
	setOpt(spec, "store", v)
	return true, nil
}

// openCAS mounts the tree spec.Source names in its store; the mount closes
// the store.
func openCAS(ctx context.Context, spec *Spec, env Env) (vfs.Backend, error) {
	st, err := OpenCASStore(spec.Opts["store"], env)
	if err != nil {
		return nil, err
	}
	f, err := MountCAS(ctx, st, spec.Source)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &casMount{FS: f, st: st}, nil
}

// parseCAS checks arg is a digest or a root name; a relative store is taken
// from base.
func parseCAS(spec *Spec, arg, base string) error {
	if arg == "" {
		return errors.New("cas needs a root digest or name")
	}
	if _, err := cas.ParseDigest(arg); err != nil && !cas.ValidRootName(arg) {
		return fmt.Errorf("%q is neither a digest (HASH/SIZE) nor a root name", arg)
	}
	spec.Source = arg
	if st := spec.Opts["store"]; st != "" && base != "" && !filepath.IsAbs(st) {
		spec.Opts["store"] = filepath.Join(base, st)
	}
	spec.ReadOnly = true
	return nil
}

// casMount is a mounted tree; the session closes its store at exit.
type casMount struct {
	*cas.FS
	st *cas.Store
}

// Close closes the store.
func (m *casMount) Close() error { return m.st.Close() }

// casStoreDir returns the store directory: dir, else $CAPFS_CAS_STORE, else
// the user cache directory's capfs/cas, as env reads them.
func casStoreDir(dir string, env Env) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if d := env.getenv("CAPFS_CAS_STORE"); d != "" {
		return d, nil
	}
	c, err := env.cacheDir()
	if err != nil {
		return "", fmt.Errorf("no CAS store: set $CAPFS_CAS_STORE or --store (%v)", err)
	}
	return filepath.Join(c, "capfs", "cas"), nil
}

// OpenCASStore opens the store at dir, else $CAPFS_CAS_STORE, else the user
// cache directory's capfs/cas, as env reads them.
func OpenCASStore(dir string, env Env) (*cas.Store, error) {
	d, err := casStoreDir(dir, env)
	if err != nil {
		return nil, err
	}
	return cas.OpenStore(d)
}

// resolveCASRoot maps a digest or a root name to a digest.
func resolveCASRoot(st *cas.Store, ref string) (cas.Digest, error) {
	if d, err := cas.ParseDigest(ref); err == nil {
		return d, nil
	}
	d, err := st.Root(ref)
	if err != nil {
		return cas.Digest{}, vfs.NewError(vfs.CodeNotFound, "mount", vfs.Path{}, "no snapshot named "+ref+" in the CAS store")
	}
	return d, nil
}

// MountCAS mounts the tree ref names in st: a digest or a root name.
func MountCAS(ctx context.Context, st *cas.Store, ref string) (*cas.FS, error) {
	d, err := resolveCASRoot(st, ref)
	if err != nil {
		return nil, err
	}
	return st.Mount(ctx, d, time.Time{})
}
