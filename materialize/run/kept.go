//go:build linux

package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/capfs/capfs/internal/hostfile"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
)

// Kept is the record of a checkout kept past its run, for a later
// sync-back: what was not applied, the command that made it, the Tree's
// state.
//
// It is kept outside the checkout (which the sandbox wrote) and is
// host-private: it names host paths.
type Kept struct {
	ID      string          `json:"id"`
	Label   string          `json:"label"` // the sync journal's label ("" when the work tree is not written back)
	Work    string          `json:"work"`  // where the work tree came from (the caller's name: capfs run's namespace path)
	Command []string        `json:"command"`
	Status  int             `json:"status"`
	Created time.Time       `json:"created"`
	Reason  string          `json:"reason,omitempty"`
	Tree    json.RawMessage `json:"tree"` // materialize.Tree.MarshalState
}

// KeptID is the id of the checkout at host path p.
func KeptID(p string) string {
	return strings.TrimPrefix(filepath.Base(p), "capfs-checkout-")
}

// KeptDir returns the directory of kept-checkout records, "kept" in the
// state directory ($CAPFS_STATE_DIR/kept, else $XDG_STATE_HOME/capfs/kept,
// else ~/.local/state/capfs/kept), made 0700 and checked to be this user's
// own ([CheckPrivateDir]).
func KeptDir() (string, error) { return stateDir("kept") }

// Record keeps t past its run ([materialize.Tree.Keep]) and records it in
// [KeptDir] for a later sync-back: rec with its ID and Tree taken from t. It
// returns the record; with an error, t is kept all the same.
func Record(t *materialize.Tree, rec Kept) (Kept, error) {
	t.Keep()
	rec.ID = KeptID(t.Path())
	st, err := t.MarshalState()
	if err != nil {
		return rec, err
	}
	rec.Tree = st
	d, err := KeptDir()
	if err != nil {
		return rec, err
	}
	return rec, WriteKept(d, rec)
}

// WriteKept writes rec into directory d as <id>.json, atomically, mode 0600.
func WriteKept(d string, rec Kept) error {
	b, err := json.Marshal(&rec)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(d, ".rec-")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), filepath.Join(d, rec.ID+".json"))
}

// ReadKept lists the kept-checkout records of [KeptDir], oldest first, and
// returns the directory too. A record that cannot be read or names another
// id than its file is left out.
func ReadKept() ([]Kept, string, error) {
	d, err := KeptDir()
	if err != nil {
		return nil, "", err
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, d, err
	}
	var out []Kept
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, e.Name()))
		if err != nil {
			continue
		}
		var rec Kept
		if json.Unmarshal(b, &rec) != nil || rec.ID+".json" != e.Name() {
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, d, nil
}

// RemoveKept removes the record of kept checkout id (not the checkout).
func RemoveKept(id string) error {
	d, err := KeptDir()
	if err != nil {
		return err
	}
	return os.Remove(filepath.Join(d, id+".json"))
}

// LazyMountDir is where lazy mounts make their mount points by default:
// "mnt" in the state directory (private, and small, so that sweeping it for
// dead mounts costs little whatever the temporary directory holds), else
// [LazyBase].
func LazyMountDir() string {
	d, err := stateDir("mnt")
	if err != nil {
		return LazyBase()
	}
	return d
}

// stateDir returns directory name in capfs's state directory (the parent of
// [syncback.DefaultJournalDir]), made 0700 and checked to be private.
func stateDir(name string) (string, error) {
	j, err := syncback.DefaultJournalDir()
	if err != nil {
		return "", err
	}
	d := filepath.Join(filepath.Dir(j), name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if err := CheckPrivateDir(d); err != nil {
		return "", err
	}
	return d, nil
}

// CheckPrivateDir refuses a directory that is a symlink, is not owned by
// this user or is writable by others: a shared temporary directory could
// hold one planted by another user.
func CheckPrivateDir(d string) error { return hostfile.CheckPrivateDir(d) }
