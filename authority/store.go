package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// storeVersion is the version of the store file's format.
const storeVersion = 1

// storeFile is the JSON document WithStore keeps.
type storeFile struct {
	Version int     `json:"version"`
	Grants  []Grant `json:"grants"`
}

// Open returns an [Authority] whose grant records persist in the JSON file path.
//
// The file is created with mode 0600 if missing; its directory must exist.
// Every change to a record (a grant made, revoked, expired, pruned) rewrites the
// file atomically before the call that made it returns. The new file is written
// in the same directory, fsync'ed and renamed over it, and the directory is
// fsync'ed. So a host that dies keeps every decision it returned.
//
// On opening, the records are read back. Revoked and expired grants stay ended:
// an id that was revoked can never be used again. Active grants whose expiry
// passed while the host was down are recorded as expired. An active grant has no
// Dir until the host registers its root again and calls [Authority.Restore].
// Roots are not persisted: the host registers them at each start.
//
// A file that cannot be read or parsed is an error (nothing is overwritten).
func Open(path string, opts ...Option) (*Authority, error) {
	a := New(opts...)
	a.store = path
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		a.dirty = true
		return a, a.saveLocked()
	case err != nil:
		return nil, fmt.Errorf("authority: store: %w", err)
	}
	var f storeFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("authority: store %s: %v: %w", filepath.Base(path), err, fs.ErrInvalid)
	}
	if f.Version != storeVersion {
		return nil, fmt.Errorf("authority: store version %d, want %d: %w", f.Version, storeVersion, fs.ErrInvalid)
	}
	now := a.clock()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range f.Grants {
		if rec.ID == "" || a.grants[rec.ID] != nil {
			return nil, fmt.Errorf("authority: store: bad or repeated grant id %q: %w", rec.ID, fs.ErrInvalid)
		}
		var set accessSet
		for _, x := range rec.Access {
			if !x.Valid() {
				return nil, fmt.Errorf("authority: store: grant %s: unknown access %q: %w", rec.ID, x, fs.ErrInvalid)
			}
			set |= x.bit()
		}
		a.seq++
		g := &grant{
			a: a, seq: a.seq, rec: rec, set: set, expires: rec.Expires,
			ruleAllow: "grant:" + rec.ID, ruleAccess: "grant:" + rec.ID + ":access", ruleExpired: "grant:" + rec.ID + ":expired",
		}
		g.rec.Access = set.list()
		switch rec.Status {
		case Active:
			if g.dueAt(now) {
				g.endLocked(now, Expired)
			}
		case Revoked, Expired:
			g.ended.Store(true)
		default:
			return nil, fmt.Errorf("authority: store: grant %s: unknown status %q: %w", rec.ID, rec.Status, fs.ErrInvalid)
		}
		a.grants[rec.ID] = g
	}
	return a, a.saveLocked()
}

// StoreErr returns the last error writing the store (nil if the last write
// succeeded, or without a store). Grant and Revoke return it themselves;
// changes made by timers, sweeps and listings report it only here.
func (a *Authority) StoreErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.storeErr
}

// saveLocked writes the store if a record changed. a.mu held.
func (a *Authority) saveLocked() error {
	if a.store == "" || !a.dirty {
		return nil
	}
	gs := make([]*grant, 0, len(a.grants))
	for _, g := range a.grants {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(x, y *grant) int {
		switch {
		case x.seq < y.seq:
			return -1
		case x.seq > y.seq:
			return 1
		}
		return 0
	})
	f := storeFile{Version: storeVersion, Grants: make([]Grant, len(gs))}
	for i, g := range gs {
		f.Grants[i] = g.snapshot()
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = writeAtomic(a.store, append(b, '\n'))
	}
	a.storeErr = err
	if err != nil {
		return fmt.Errorf("authority: store: %w", err)
	}
	a.dirty = false
	return nil
}

// writeAtomic replaces file path with data: temp file, fsync, rename, fsync of
// the directory.
func writeAtomic(path string, data []byte) error {
	dirName := filepath.Dir(path)
	f, err := os.CreateTemp(dirName, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dirName); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Restore gives back the Dir of an active grant read from the store ([Open]),
// once its root is registered again under the same name.
//
// The Dir is made as [Authority.Grant] makes it: same subject, path, access,
// expiry and id. So audit events continue under the grant's id. The path is
// resolved and decided again, and must lead where it led when granted
// ([Grant].Resolved). A record without one takes where the path leads now.
//
// These errors wrap [fs.ErrPermission]:
//   - a path that leads elsewhere (a symlink put there since);
//   - a revoked or expired grant;
//   - a grant whose Dir already exists in this process (Restore once per start).
//
// An unknown id, or an unregistered root, wraps [fs.ErrNotExist].
func (a *Authority) Restore(ctx context.Context, id string) (*dir.Dir, Grant, error) {
	a.mu.Lock()
	g, ok := a.grants[id]
	if !ok {
		a.mu.Unlock()
		return nil, Grant{}, fmt.Errorf("authority: grant %q: %w", id, fs.ErrNotExist)
	}
	if now := a.clock(); g.rec.Status == Active && g.dueAt(now) {
		g.endLocked(now, Expired)
		a.saveLocked() //nolint:errcheck // recorded for StoreErr
	}
	if g.rec.Status != Active {
		a.mu.Unlock()
		return nil, Grant{}, fmt.Errorf("authority: grant %q is %s: %w", id, g.rec.Status, fs.ErrPermission)
	}
	if g.ctl != nil || g.restoring {
		a.mu.Unlock()
		return nil, Grant{}, fmt.Errorf("authority: grant %q already has its Dir: %w", id, fs.ErrPermission)
	}
	r, ok := a.roots[g.rec.Root]
	if !ok {
		a.mu.Unlock()
		return nil, Grant{}, fmt.Errorf("authority: root %q: %w", g.rec.Root, fs.ErrNotExist)
	}
	g.restoring = true
	g.root = r
	a.mu.Unlock()

	p, err := vfs.ParseGuest(g.rec.Path)
	var d *dir.Dir
	var loc string
	if err == nil {
		d, loc, err = a.build(ctx, g, r, p)
		if err == nil {
			if err = leadsTo(id, g.rec.Resolved, loc); err != nil {
				g.ctl.Revoke()
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g.restoring = false
	if err != nil {
		g.root = nil
		g.ctl = nil
		return nil, Grant{}, vfs.Reop(err, "Restore")
	}
	if g.rec.Resolved == "" {
		g.rec.Resolved = loc // a record written before Resolved was kept
		a.dirty = true
	}
	if g.rec.Status != Active || a.roots[g.rec.Root] != r {
		// Revoked, or the root unregistered, while the Dir was built.
		g.ctl.Revoke()
		return nil, Grant{}, fmt.Errorf("authority: grant %q ended while it was restored: %w", id, fs.ErrPermission)
	}
	g.dir = d
	if a.realClock && !g.expires.IsZero() {
		g.armTimer()
	}
	return d, g.snapshot(), nil
}
