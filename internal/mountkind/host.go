package mountkind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// hostDir makes src absolute (relative to base, or to the current directory
// when base is "") and checks it is a directory.
func hostDir(src, base string) (string, error) {
	h := src
	if !filepath.IsAbs(h) && base != "" {
		h = filepath.Join(base, h)
	}
	h, err := filepath.Abs(h)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(h)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s: no such directory", src)
	case err != nil:
		return "", fmt.Errorf("%s: %v", src, cause(err))
	case !st.IsDir():
		return "", fmt.Errorf("%s: not a directory", src)
	}
	return h, nil
}

// hostFile makes the file arg absolute, relative to base (or the current
// directory when base is ""); an empty arg is the error missing.
func hostFile(arg, base, missing string) (string, error) {
	if arg == "" {
		return "", errors.New(missing)
	}
	h := arg
	if !filepath.IsAbs(h) && base != "" {
		h = filepath.Join(base, h)
	}
	return filepath.Abs(h)
}

// cause is the error a *fs.PathError (or similar) wraps, without the host
// path the wrapper adds, or err itself when it wraps nothing.
func cause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// setOpt records a kind's own setting k=v in spec.
func setOpt(spec *Spec, k, v string) {
	if spec.Opts == nil {
		spec.Opts = map[string]string{}
	}
	spec.Opts[k] = v
}
