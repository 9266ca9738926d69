//go:build linux

package materialize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// stateVersion is the version of the state MarshalState writes.
const stateVersion = 1

// savedState is a kept checkout as MarshalState records it.
type savedState struct {
	Version  int                  `json:"version"`
	Path     string               `json:"path"`
	Dev      uint64               `json:"dev"`
	Ino      uint64               `json:"ino"`
	BTime    int64                `json:"btime,omitempty"` // creation time, where the filesystem keeps one
	Created  time.Time            `json:"created"`
	Entries  map[string]Entry     `json:"entries"`
	Stat     map[string]savedStat `json:"stat,omitempty"`
	ReadOnly bool                 `json:"read_only,omitempty"`
}

type savedStat struct {
	Dev   uint64 `json:"d"`
	Ino   int64  `json:"i"`
	Size  int64  `json:"s"`
	MTime int64  `json:"m"`
	CTime int64  `json:"c"`
	Mode  uint32 `json:"o"`
	Racy  bool   `json:"r,omitempty"`
}

// MarshalState records what a later process needs to sync this checkout (see
// Reopen): the checkout's host path and identity (device and inode), and the
// Manifest with its stat cache. It is host-only data: keep it where the
// sandbox cannot write (never inside the checkout), since Reopen trusts its
// manifest as the base every change is compared with. A bound checkout has
// nothing to reopen (read_only).
func (t *Tree) MarshalState() ([]byte, error) {
	const op = "save"
	if err := t.Live(op); err != nil {
		return nil, err
	}
	if !t.created {
		return nil, vfs.NewError(vfs.CodeReadOnly, op, vfs.Root, "a bound checkout has no state to save")
	}
	var st unix.Stat_t
	if err := unix.Fstat(t.rootFd, &st); err != nil {
		return nil, vfs.Errno(op, vfs.Root, err)
	}
	s := savedState{
		Version: stateVersion, Path: t.path, Dev: st.Dev, Ino: st.Ino, BTime: birthTime(t.rootFd),
		Created: t.manifest.Created, Entries: t.manifest.Entries, ReadOnly: t.opts.ReadOnly,
		Stat: make(map[string]savedStat, len(t.manifest.stat)),
	}
	for p, k := range t.manifest.stat {
		s.Stat[p] = savedStat{k.dev, k.ino, k.size, k.mtime, k.ctime, k.mode, k.racy}
	}
	return json.Marshal(&s)
}

// StatePath returns the checkout path recorded in state (from MarshalState), for
// a caller listing kept checkouts; "" when state cannot be read.
func StatePath(state []byte) string {
	var s savedState
	if json.Unmarshal(state, &s) != nil || s.Version != stateVersion {
		return ""
	}
	return s.Path
}

// Reopen returns the Tree of a kept checkout from the state MarshalState
// recorded, with src as its source (the same subtree the checkout was made
// from, reached again through a Dir: its policy, audit and checks apply as in
// the first process). A sync-back (syncback.Run) then brings the checkout's changes back as it
// would have, Diff lists them, and Close removes the checkout once every change
// is applied (it stays when some are not, or after Keep).
//
// Reopen refuses (not_found, or invalid_path) a checkout that is gone, is not a
// directory, is reached through a symlink, is not the directory recorded (its
// device, inode or, where the filesystem records one, creation time differ: a
// directory put in its place, which on a tmpfs may reuse the inode number), does not belong to
// this user or is open to others (mode bits beyond 0700).
func Reopen(ctx context.Context, src *dir.Dir, state []byte) (*Tree, error) {
	const op = "reopen"
	if src == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "nil source Dir")
	}
	s, err := parseState(op, state)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, vfs.Errno(op, vfs.Root, err)
	}
	fd, err := openKept(op, s)
	if err != nil {
		return nil, err
	}
	m, err := s.manifest(op)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	t := &Tree{
		src: src, opts: Options{ReadOnly: s.ReadOnly}, path: s.Path, rootFd: fd,
		strategy: StrategyCopy, created: true, manifest: m,
	}
	return t, nil
}

// parseState decodes a state MarshalState recorded, of this version.
func parseState(op string, state []byte) (*savedState, error) {
	var s savedState
	if err := json.Unmarshal(state, &s); err != nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "unreadable checkout state: "+err.Error())
	}
	if s.Version != stateVersion || s.Path == "" || s.Entries == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, fmt.Sprintf("checkout state of version %d: want %d", s.Version, stateVersion))
	}
	return &s, nil
}

// openKept opens the kept checkout s records, without following a symlink,
// and returns its handle once it is the directory recorded, this user's and
// closed to others.
func openKept(op string, s *savedState) (int, error) {
	fd, err := unix.Open(s.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, vfs.NewError(vfs.CodeNotFound, op, vfs.Root, "the kept checkout is gone")
		}
		return -1, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "the kept checkout cannot be opened as a directory: "+err.Error())
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, vfs.Errno(op, vfs.Root, err)
	}
	if err := keptMismatch(fd, &st, s); err != nil {
		unix.Close(fd)
		return -1, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, err.Error())
	}
	return fd, nil
}

// keptMismatch says why the directory open at fd (whose stat is st) is not
// the kept checkout s records, nil when it is: another directory, another
// user's, or open to others.
func keptMismatch(fd int, st *unix.Stat_t, s *savedState) error {
	switch {
	case st.Dev != s.Dev || st.Ino != s.Ino || (s.BTime != 0 && birthTime(fd) != s.BTime):
		return errors.New("the directory at the kept checkout's path is not the one recorded")
	case int(st.Uid) != os.Getuid():
		return errors.New("the kept checkout belongs to another user")
	case st.Mode&0o077 != 0:
		return errors.New("the kept checkout is open to other users")
	}
	return nil
}

// manifest rebuilds the checkout's Manifest from s, refusing a path that is
// not a valid relative one.
func (s *savedState) manifest(op string) (*Manifest, error) {
	m := &Manifest{Entries: s.Entries, Created: s.Created, stat: make(map[string]statKey, len(s.Stat))}
	for p, k := range s.Stat {
		m.stat[p] = statKey{k.Dev, k.Ino, k.Size, k.MTime, k.CTime, k.Mode, k.Racy}
	}
	for p := range m.Entries {
		if !fs.ValidPath(p) || p == "." {
			return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "checkout state names an invalid path")
		}
	}
	return m, nil
}

// Discard removes the kept checkout state describes (as Close would, after the
// same checks as Reopen), without a source: for a host dropping changes it
// will not apply.
func Discard(state []byte) error {
	var s savedState
	if err := json.Unmarshal(state, &s); err != nil || s.Version != stateVersion || s.Path == "" {
		return vfs.NewError(vfs.CodeInvalidPath, "discard", vfs.Root, "unreadable checkout state")
	}
	fd, err := unix.Open(s.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone already
		}
		return vfs.NewError(vfs.CodeInvalidPath, "discard", vfs.Root, "the kept checkout cannot be opened as a directory: "+err.Error())
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	bt := birthTime(fd)
	unix.Close(fd)
	if err != nil {
		return vfs.Errno("discard", vfs.Root, err)
	}
	if st.Dev != s.Dev || st.Ino != s.Ino || (s.BTime != 0 && bt != s.BTime) || int(st.Uid) != os.Getuid() {
		return vfs.NewError(vfs.CodeInvalidPath, "discard", vfs.Root, "the directory at the kept checkout's path is not the one recorded")
	}
	if err := hostfs.RemoveTree(s.Path); err != nil {
		return vfs.Errno("discard", vfs.Root, err)
	}
	return nil
}

// birthTime is the creation time of the file open at fd, in nanoseconds, or 0
// where the filesystem does not record one.
func birthTime(fd int) int64 {
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
}
