package memory

import (
	"context"
	"io/fs"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/capfs/capfs/vfs"
)

// fileInfo is an immutable status of a node: the fields fs.FileInfo shows (Sys
// is nil). It is 64 bytes, one size class and one cache line on the usual
// platforms, with a name of up to len(inline) bytes held inside it, so that
// checking a kept status against a Stat's name reads no other memory.
type fileInfo struct {
	name   string // in inline when it fits, else its own copy
	size   int64
	sec    int64 // modification time: Unix seconds
	mode   fs.FileMode
	nsec   int32 // modification time: nanoseconds
	inline [24]byte
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) Size() int64        { return i.size }
func (i *fileInfo) Mode() fs.FileMode  { return i.mode }
func (i *fileInfo) ModTime() time.Time { return time.Unix(i.sec, int64(i.nsec)) }
func (i *fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fileInfo) Sys() any           { return nil }
func (i *fileInfo) String() string     { return fs.FormatFileInfo(i) }

// newFileInfo returns a status with its own copy of name: name is usually part
// of a longer guest path, which the node must not keep alive.
func newFileInfo(name string, size int64, mode fs.FileMode, sec int64, nsec int32) *fileInfo {
	i := &fileInfo{size: size, mode: mode, sec: sec, nsec: nsec}
	if len(name) <= len(i.inline) && name != "" {
		// The bytes are written here, before anyone can see i, and never again.
		copy(i.inline[:], name)
		i.name = unsafe.String(&i.inline[0], len(name))
	} else {
		i.name = strings.Clone(name)
	}
	return i
}

// fileInfo returns n's status under the name name as an immutable fs.FileInfo.
// It takes no lock. The node keeps the last one it made and returns it again
// while it still describes n exactly (same name, size, mode and modification
// time, read as one consistent state): the comparison is by content, so no
// history of changes can make a stale status look current. A status once
// returned never changes; a later change to n makes the next call build a new
// one.
func (n *node) fileInfo(name string) *fileInfo {
	for spins := 0; ; spins++ {
		s := n.seq.Load()
		if s&1 == 0 {
			mode := n.typ | fs.FileMode(n.perm.Load())
			size := n.size.Load()
			sec, nsec := n.msec.Load(), n.mnsec.Load()
			if n.seq.Load() == s {
				if c := n.status.Load(); c != nil && c.size == size && c.mode == mode &&
					c.sec == sec && c.nsec == nsec && c.name == name {
					return c
				}
				c := newFileInfo(name, size, mode, sec, nsec)
				if len(name) <= len(c.inline) {
					// Kept: its 64 bytes are in the node's charge. A status
					// with a longer name holds a copy of it, which is not:
					// it is made afresh each time.
					n.status.Store(c)
				}
				return c
			}
		}
		if spins > 3 {
			runtime.Gosched() // a writer is mid-update; let it finish
		}
	}
}

// StatFileInfo is Stat (follow) or Lstat as an fs.FileInfo named name, or when
// name is "" by p's last element ("." for the root) as Stat's Info is: the same
// lookup, the same errors (Op "stat" or
// "lstat"), and a result that is the same snapshot Stat's Info would give
// (Name, Size, Mode, ModTime; Sys is nil). The result is immutable and may be
// shared: while nothing it shows changes, repeated calls return the same value
// and allocate nothing. It is how a dir.Dir answers Stat without building an
// Info it would only copy.
func (f *FS) StatFileInfo(ctx context.Context, p vfs.Path, follow bool, name string) (fs.FileInfo, error) {
	op := "lstat"
	if follow {
		op = "stat"
	}
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	f.st.mu.RLock()
	n, base, err := f.statNode(ctx, p, follow, op)
	if err != nil {
		f.st.mu.RUnlock()
		return nil, err
	}
	if name == "" {
		name = base
	}
	i := n.fileInfo(name)
	f.st.mu.RUnlock()
	return i, nil
}
