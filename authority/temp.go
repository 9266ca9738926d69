package authority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TempBackend is the storage of a temporary workspace.
type TempBackend int

const (
	// TempMemory (the default) keeps the workspace in the process's memory,
	// bounded by the quota; it disappears with the process.
	TempMemory TempBackend = iota
	// TempPhysical keeps it in a private 0700 directory under the authority's
	// temp base (WithTempBase), so sandboxed processes can be given it.
	TempPhysical
	// TempSQLite keeps it in one SQLite file (backends/sqlite) in a private
	// 0700 directory under the temp base. It is off the process's heap, with a
	// quota over all its bytes, and reaped like TempPhysical.
	TempSQLite
)

// DefaultTempQuota is a temporary workspace's quota when TempOptions.Quota is 0.
const DefaultTempQuota int64 = 256 << 20

// TempOptions ask for a temporary workspace.
type TempOptions struct {
	Subject Subject
	Reason  string
	Backend TempBackend
	// Quota bounds the bytes the workspace holds (0: DefaultTempQuota). For
	// TempMemory and TempSQLite it is the backend's quota (every byte of every
	// file); for TempPhysical, an account kept by the workspace of every regular
	// file's size under each of its names and every symlink target's length
	// (directories are not charged), charged as files grow, so writes past it
	// fail with quota_exceeded.
	Quota int64
	// TTL, if positive, makes the grant expire (the files stay until Close).
	TTL time.Duration
	// Access is the grant's access (nil: every access).
	Access []Access
}

// TempWorkspace is a temporary workspace: a temp root registered with the
// authority, granted to one subject, and removed by Close.
type TempWorkspace struct {
	a     *Authority
	name  string
	grant Grant
	host  string    // TempPhysical, TempSQLite: its directory
	lock  *os.File  // TempPhysical, TempSQLite: the lock that marks it live
	db    io.Closer // the open backend to close (TempSQLite's scratch file, TempPhysical's directory)
	once  sync.Once
	err   error
}

// WithTempBase sets the directory under which TempPhysical workspaces are
// made (default: os.TempDir()/capfs-temp-<uid>, created 0700).
func WithTempBase(path string) Option { return func(a *Authority) { a.tempBase = path } }

func (a *Authority) tempDir() (string, error) {
	base := a.tempBase
	if base == "" {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("capfs-temp-%d", os.Getuid()))
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	fi, err := os.Lstat(base)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("authority: temp base is not a private directory (mode %v): %w", fi.Mode(), fs.ErrPermission)
	}
	return base, nil
}

// CreateTempWorkspace makes a private scratch root, grants it to opts.Subject,
// and returns the grant's Dir and the workspace.
//
// The root is of kind temp, owned by opts.Subject. The [TempWorkspace]'s Close
// revokes the grant, unregisters the root and removes its files. The cleanup
// owner is whoever holds the TempWorkspace. A host that crashes leaves
// [TempPhysical] directories behind; [ReapTemp] (run at start-up) removes those
// whose owner is gone.
//
// A TempPhysical workspace is a directory with mode 0700, made under the temp
// base. Beside it is a lock file the owning process holds locked (flock) until
// Close. The lock, not a timestamp, tells ReapTemp the owner is alive.
func (a *Authority) CreateTempWorkspace(ctx context.Context, opts TempOptions) (*dir.Dir, *TempWorkspace, error) {
	if err := opts.Subject.Validate(); err != nil {
		return nil, nil, err
	}
	quota := opts.Quota
	if quota <= 0 {
		quota = DefaultTempQuota
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	w := &TempWorkspace{a: a}
	var b vfs.Backend
	switch opts.Backend {
	case TempMemory:
		b = memory.New(memory.WithQuota(quota))
	case TempPhysical, TempSQLite:
		base, err := a.tempDir()
		if err != nil {
			return nil, nil, err
		}
		host := filepath.Join(base, "ws-"+id)
		lock, err := lockNew(host + ".lock")
		if err != nil {
			return nil, nil, err
		}
		if err := os.Mkdir(host, 0o700); err != nil {
			unlock(lock, true)
			return nil, nil, err
		}
		w.host, w.lock = host, lock
		if opts.Backend == TempPhysical {
			var pb *physical.FS
			pb, err = physical.New(host, physical.WithMaxFileSize(quota))
			if err == nil {
				q := newQuotaFS(pb, quota)
				w.db, b = q, q
			}
		} else {
			var db *sqlite.FS
			db, err = sqlite.Open(filepath.Join(host, "scratch.db"), sqlite.WithQuota(quota), sqlite.WithSynchronous(sqlite.SyncOff))
			if err == nil {
				w.db, b = db, db
			}
		}
		if err != nil {
			w.removeFiles()
			return nil, nil, err
		}
	default:
		return nil, nil, invalid("unknown temp backend %d", opts.Backend)
	}
	desc := RootDescriptor{Kind: KindTemp, ID: id, Owner: opts.Subject.ID, DisplayName: "temp workspace"}
	if err := a.RegisterRoot(desc, b); err != nil {
		w.removeFiles()
		return nil, nil, err
	}
	w.name = string(KindTemp) + ":" + id
	reason := opts.Reason
	if strings.TrimSpace(reason) == "" {
		reason = "temporary workspace"
	}
	d, g, err := a.Grant(ctx, GrantRequest{Subject: opts.Subject, Root: w.name, Access: opts.Access, Reason: reason, Source: SourceCore, TTL: opts.TTL})
	if err != nil {
		a.Unregister(w.name) //nolint:errcheck // just registered
		w.removeFiles()
		return nil, nil, err
	}
	w.grant = g
	return d, w, nil
}

// Grant returns the workspace's grant record.
func (w *TempWorkspace) Grant() Grant { return w.grant }

// Root returns the workspace's root name ("temp:<id>").
func (w *TempWorkspace) Root() string { return w.name }

// Close revokes the workspace's grant (and every other grant over it),
// unregisters its root and removes its files. It is idempotent.
func (w *TempWorkspace) Close() error {
	w.once.Do(func() {
		_, err := w.a.Unregister(w.name)
		w.err = errors.Join(err, w.removeFiles())
	})
	return w.err
}

func (w *TempWorkspace) removeFiles() error {
	if w.db != nil {
		w.db.Close()
	}
	if w.host == "" {
		return nil
	}
	err := os.RemoveAll(w.host)
	unlock(w.lock, err == nil)
	return err
}

// ReapTemp removes the [TempPhysical] and [TempSQLite] workspaces under base
// whose owner is gone, and returns how many. base "" is the default temp base.
// An owner is gone when no process holds the workspace's lock. Hosts call it at
// start-up. Workspaces of live processes, this one's included, are left alone.
func ReapTemp(base string) (int, error) {
	a := &Authority{tempBase: base}
	dirName, err := a.tempDir()
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir(dirName)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "ws-") || strings.HasSuffix(name, ".lock") {
			continue
		}
		host := filepath.Join(dirName, name)
		lock, err := lockExisting(host + ".lock")
		if err != nil {
			continue // held by a live owner (or unreadable): not ours to reap
		}
		if err := os.RemoveAll(host); err != nil {
			errs = append(errs, err)
			unlock(lock, false)
			continue
		}
		unlock(lock, true)
		n++
	}
	return n, errors.Join(errs...)
}
