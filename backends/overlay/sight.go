package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/capfs/capfs/vfs"
)

// The base at first sight. A sync-back judges a change against what the
// process saw of the entry it changed (the checkout's manifest plays that
// part for a checkout, made before the process starts). The overlay reads
// nothing ahead, so it records that base as the process goes: the first
// time a lookup meets a lower entry (the lower's Lstat the lookup makes
// anyway), it keeps the entry's status (sightOf): no call is added. When
// the overlay first changes the entry (copy-up, removal, rename over it),
// the lower's status then is compared with the one kept: unchanged, the
// entry's contents read then are what the process saw; changed, the host
// changed it meanwhile, and the Base is the one seen (contents unknown
// unless hashed at sight: a conflict at sync-back, never an overwrite). A
// lookup that finds nothing keeps that too: an entry the host then makes
// there is new to the process, and gets no Base (at sync-back, "added in
// the source too", as in a checkout, which never held it).
//
// A status is trusted where an edit must change it: the entry was last
// changed more than sightRacy before the sight (an edit in the same clock
// tick as the last change could leave every field equal), as its change
// time says (which user space cannot set) or, on a backend that keeps none
// (memory, SQLite, git, CAS: written through capfs, which sets the
// modification time of what it writes, or immutable), its modification
// time. Otherwise (changed within the last second, or no time at all) a
// regular file of up to sightHashMax bytes is hashed at sight: few files
// are, and their next read comes from the cache.

// sightRacy is how long after its last change an entry's status is trusted
// to change at its next edit (a variable for tests).
var sightRacy = time.Second

// sightHashMax is the largest racy file hashed at sight; a larger one's
// status is trusted.
const sightHashMax = 64 << 20

// sight is what a lower entry was when the process first saw it.
type sight struct {
	mode         fs.FileMode // type and permission bits, as Lstat gives them
	size         int64
	id           uint64
	mtime, ctime time.Time
	digest       string // a racy regular file's contents, hashed at sight
	absent       bool   // the lookup found nothing
}

// absentSight is the sight of a name the lower did not hold.
var absentSight = &sight{absent: true}

// sightOf is the sight of an entry whose Lstat is info.
func sightOf(info vfs.Info) *sight {
	return &sight{mode: info.Mode, size: info.Size, id: info.ID, mtime: info.ModTime, ctime: info.ChangeTime}
}

// same reports whether info, a later Lstat of the entry, shows it unchanged.
func (s *sight) same(info vfs.Info) bool {
	return s.mode == info.Mode && s.size == info.Size && s.id == info.ID &&
		s.mtime.Equal(info.ModTime) && s.ctime.Equal(info.ChangeTime)
}

// racy reports whether the status of an entry seen at now cannot be
// trusted to show its next edit.
func (s *sight) racy(now time.Time) bool {
	last := s.ctime
	if s.mtime.After(last) {
		last = s.mtime
	}
	return last.IsZero() || now.Sub(last) < sightRacy
}

// base is the Base of the entry as it was seen: a file's digest and a
// symlink's target unknown (empty) unless hashed at sight.
func (s *sight) base() Base {
	b := Base{Type: s.mode.Type(), Mode: s.mode.Perm(), ModTime: s.mtime}
	if s.mode.IsRegular() {
		b.Size, b.Digest = s.size, s.digest
	}
	return b
}

// see records that the process saw the lower entry p, whose Lstat is info,
// unless it saw p before. A racy regular file is hashed (see above).
func (o *Overlay) see(ctx context.Context, p vfs.Path, info vfs.Info) {
	if _, ok := o.seen.Load(p.Raw()); ok {
		return
	}
	s := sightOf(info)
	if info.Mode.IsRegular() && info.Size <= sightHashMax && s.racy(time.Now()) {
		s.digest = o.hashLower(ctx, p)
	}
	o.seen.LoadOrStore(p.Raw(), s)
}

// hashLower is the digest of lower file p's contents, or "" when it cannot
// be read.
func (o *Overlay) hashLower(ctx context.Context, p vfs.Path) string {
	f, err := o.lower.OpenFile(ctx, p.Unresolved(), os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// seeAbsent records that the process found no lower entry at p, unless it
// saw p before.
func (o *Overlay) seeAbsent(p vfs.Path) {
	if _, ok := o.seen.Load(p.Raw()); !ok {
		o.seen.LoadOrStore(p.Raw(), absentSight)
	}
}

// sightAt is the sight of lower entry p, or nil if the process never saw it.
func (o *Overlay) sightAt(p vfs.Path) *sight {
	v, ok := o.seen.Load(p.Raw())
	if !ok {
		return nil
	}
	return v.(*sight)
}

// baseAt is the Base to record for lower entry p, whose Base as it is now
// is cur (info its Lstat, taken before cur was read): p as the process first
// saw it (cur when it never saw it before this change). ok is false when the
// process first found nothing there: p is new to it, and has no Base.
func (o *Overlay) baseAt(p vfs.Path, info vfs.Info, cur Base) (b Base, ok bool) {
	s := o.sightAt(p)
	switch {
	case s == nil:
		return cur, true
	case s.absent:
		return Base{}, false
	case !s.same(info):
		return s.base(), true
	case s.digest != "" && cur.Type.IsRegular():
		cur.Digest = s.digest // hashed at sight: what the process read
	}
	return cur, true
}

// setBase records Base cur of lower entry p (info its Lstat) as baseAt
// makes it, if it makes one. o.mu is held.
func (o *Overlay) setBase(p vfs.Path, info vfs.Info, cur Base) {
	if b, ok := o.baseAt(p, info, cur); ok {
		o.base[p.Raw()] = b
	}
}

// sawGone records, once the process made an entry at p where the lower shows
// nothing, the Base of the lower entry the process saw there, if any (the
// host removed it since): the new entry replaces it, and a sync-back finds
// the source's removal a conflict rather than adding it back. o.mu is held.
func (o *Overlay) sawGone(p vfs.Path) {
	if _, ok := o.base[p.Raw()]; ok || o.hidden(p) {
		return
	}
	if s := o.sightAt(p); s != nil && !s.absent {
		o.base[p.Raw()] = s.base()
	}
}

// unreadBase is a removed lower entry whose Base lacks its contents until the
// Bases are asked for (see deferBase).
type unreadBase struct {
	p vfs.Path
	s *sight
}

// deferBase records Base cur of lower entry p (info its Lstat, taken now)
// as baseAt makes it, reading nothing, when the process saw p before; false
// when it never did (the caller reads the contents now). A file or symlink
// unchanged since its sight, with no digest kept at sight, holds what the
// process saw: its digest or target is read when the Bases are asked for
// (readUnread), after the command, not at each removal. o.mu is held.
func (o *Overlay) deferBase(p vfs.Path, info vfs.Info, cur Base) bool {
	s := o.sightAt(p)
	if s == nil {
		return false
	}
	b, ok := o.baseAt(p, info, cur)
	if !ok {
		return true // absent at first sight: new to the process, no Base
	}
	o.base[p.Raw()] = b
	if s.same(info) && s.digest == "" && (info.Mode.IsRegular() || info.Mode&fs.ModeSymlink != 0) {
		o.unread[p.Raw()] = unreadBase{p: p, s: s}
	}
	return true
}

// readUnread completes the Bases deferBase left without contents. An entry
// whose lower status is still the one the process saw holds what it saw
// (see above): its digest or target is read, then its status taken again,
// and kept if unchanged. One the host changed meanwhile keeps none
// (contents unknown: a conflict at sync-back, never an overwrite). An entry
// the lower cannot answer for now (canceled, revoked) waits for the next
// call. o.mu is held.
func (o *Overlay) readUnread(ctx context.Context) {
	for raw, u := range o.unread {
		b := o.base[raw]
		var got string
		if b.Type&fs.ModeSymlink != 0 {
			got, _ = o.lower.Readlink(ctx, u.p.Unresolved())
		} else {
			got = o.hashLower(ctx, u.p)
		}
		info, err := o.lower.Lstat(ctx, u.p.Unresolved())
		if err != nil && notAnswer(err) != nil {
			continue
		}
		delete(o.unread, raw)
		if err != nil || got == "" && b.Type.IsRegular() || !u.s.same(info) {
			continue
		}
		if b.Type.IsRegular() {
			b.Digest = got
		} else {
			b.Target = got
		}
		o.base[raw] = b
	}
}
