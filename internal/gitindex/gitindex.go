// Package gitindex reads git's stat cache (the index of a work tree) and its
// cache-tree extension, so that a diff of a work tree against a git revision
// can skip the files git would show unchanged without reading them.
//
// The index is the project's file, an outside input: it is read only when it
// is a regular file, and anything that does not parse exactly is not used
// (the caller then compares contents, as without it).
package gitindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/internal/hostfile"
	"github.com/capfs/capfs/vfs"
)

// Hints is git's stat cache (the index of the work tree holding a
// physical diff side) used the way git uses it: a work-tree file whose size,
// modification time and inode are those the index recorded, and that was not
// modified in the same second the index was written ("racily clean"), has the
// content whose blob id the index records, so it need not be read. A diff
// whose other side is a git revision then skips every file whose blob id there
// is that one: the unchanged files of a work tree are neither read nor
// inflated, as with git diff.
//
// The index's cache-tree extension spares the git side too: where it records
// the tree id of a directory's index entries, and the revision's directory
// has that id, every file there has in the revision the blob id and mode the
// index records, without an Lstat of each on the git side (git's own
// cache-tree is kept up to date by git, and invalidated for a directory
// whose entries change).
type Hints struct {
	entries map[string]*index.Entry // by path relative to the directory compared
	written time.Time               // the index file's modification time
	prefix  string                  // the directory compared, relative to the work tree's top ("." for the top)
	trees   map[string]string       // cache-tree: valid tree ids by directory relative to the top ("" for the top)

	mu      sync.Mutex
	same    map[string]bool // decided paths
	sameDir map[string]bool // directories (relative to the roots) whose revision tree is the index's
}

// Load returns the hints of the index of the git work tree top for its
// directory rel, or nil when there is none or it cannot be read.
//
// top is the work tree's host directory (holding .git), rel the directory
// compared relative to it ("." for top itself), as filepath.Rel gives it.
// A .git that is a file (a worktree's or a submodule's) is not followed.
// With nil hints the caller compares contents, as without them.
func Load(top, rel string) *Hints {
	gitDir := filepath.Join(top, ".git")
	if st, err := os.Lstat(gitDir); err != nil || !st.IsDir() {
		return nil // a worktree's or submodule's .git file: not followed
	}
	// The index is the project's file, an outside input.
	data, st, err := hostfile.ReadRegular(filepath.Join(gitDir, "index"), 1<<30)
	if err != nil {
		return nil
	}
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(&idx); err != nil {
		return nil // its checksum included: data is the index git wrote
	}
	prefix := filepath.ToSlash(rel)
	h := &Hints{entries: make(map[string]*index.Entry, len(idx.Entries)), written: st.ModTime(), same: map[string]bool{},
		prefix: prefix, trees: cacheTrees(data, len(idx.Entries)), sameDir: map[string]bool{}}
	for _, e := range idx.Entries {
		if e.Stage != 0 || e.IntentToAdd || e.SkipWorktree { // stage 0: not in a merge conflict
			continue
		}
		name := e.Name
		if prefix != "." {
			r, ok := underDir(name, prefix)
			if !ok {
				continue
			}
			name = r
		}
		h.entries[name] = e
	}
	return h
}

// underDir returns p relative to directory dir, if p is beneath it.
func underDir(p, dir string) (string, bool) {
	if len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/' {
		return p[len(dir)+1:], true
	}
	return "", false
}

// Unchanged reports whether the regular file p (relative to both roots) is
// known to be the same on both sides without reading it: a's entry is a git
// blob whose id the index records for p, with the same executable bit, and b's
// file is as the index saw it.
//
// a is the git revision's side, b the work tree's, both rooted at the
// directory compared. The answer for p is remembered; Unchanged is safe for
// concurrent use.
func (h *Hints) Unchanged(ctx context.Context, a, b vfs.Backend, p string) bool {
	h.mu.Lock()
	v, ok := h.same[p]
	h.mu.Unlock()
	if ok {
		return v
	}
	v = h.decide(ctx, a, b, p)
	h.mu.Lock()
	h.same[p] = v
	h.mu.Unlock()
	return v
}

// decide is [Hints.Unchanged] without the memory.
func (h *Hints) decide(ctx context.Context, a, b vfs.Backend, p string) bool {
	e := h.entries[p]
	if e == nil || (e.Mode != filemode.Regular && e.Mode != filemode.Executable) {
		return false
	}
	vp, err := vfs.ParseGuest(path.Clean(p))
	if err != nil {
		return false
	}
	if !h.sameTree(ctx, a, vp.Dir()) && !blobIs(ctx, a, vp, e) {
		return false
	}
	ib, err := b.Lstat(ctx, vp)
	return err == nil && h.asIndexed(ib, e)
}

// blobIs reports whether p on the git side a is the blob, with the mode, of
// index entry e.
func blobIs(ctx context.Context, a vfs.Backend, p vfs.Path, e *index.Entry) bool {
	ia, err := a.Lstat(ctx, p)
	if err != nil || !ia.Mode.IsRegular() {
		return false
	}
	ge, ok := ia.Sys.(*gitree.Entry)
	return ok && ge.ID == e.Hash.String() && (ge.Kind == "executable") == (e.Mode == filemode.Executable)
}

// asIndexed reports whether the work tree's file ib is as index entry e saw
// it: a regular file of the same executable bit, size, modification time and
// inode, not racily clean.
func (h *Hints) asIndexed(ib vfs.Info, e *index.Entry) bool {
	if !ib.Mode.IsRegular() {
		return false
	}
	exec := ib.Mode.Perm()&0o100 != 0
	if exec != (e.Mode == filemode.Executable) || uint32(ib.Size) != e.Size || ib.Size > 1<<32-1 {
		return false
	}
	if !ib.ModTime.Equal(e.ModifiedAt) || ib.ID != 0 && uint32(ib.ID) != e.Inode {
		return false
	}
	// Racily clean: changed within the second the index was written, so the
	// recorded time cannot tell.
	return ib.ModTime.Before(h.written.Truncate(time.Second))
}

// sameTree reports whether directory d (relative to the roots) of the git
// side a is the tree the index's cache-tree records for it: then every index
// entry beneath it has a's blob id and mode. One Lstat of d on a, remembered.
func (h *Hints) sameTree(ctx context.Context, a vfs.Backend, d vfs.Path) bool {
	if len(h.trees) == 0 {
		return false
	}
	key := d.String()
	h.mu.Lock()
	v, ok := h.sameDir[key]
	h.mu.Unlock()
	if ok {
		return v
	}
	top := key
	switch {
	case h.prefix != "." && d.IsRoot():
		top = h.prefix
	case h.prefix != ".":
		top = h.prefix + "/" + key
	case d.IsRoot():
		top = ""
	}
	if id, ok := h.trees[top]; ok {
		if info, err := a.Lstat(ctx, d); err == nil && info.Mode.IsDir() {
			ge, ok := info.Sys.(*gitree.Entry)
			v = ok && ge.Kind == "tree" && ge.ID == id
		}
	}
	h.mu.Lock()
	h.sameDir[key] = v
	h.mu.Unlock()
	return v
}

// hashLen is the length of a SHA-1 object id, as the index holds it.
const hashLen = 20

// cacheTrees reads the cache-tree extension ("TREE") of the index file data
// (versions 2 to 4, entries of them): the tree id of every directory whose
// entry is valid, by path relative to the work tree's top ("" for the top).
// It returns nil when the index has none, or anything in it does not parse
// exactly (the hints then do without it).
func cacheTrees(data []byte, entries int) map[string]string {
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return nil
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 || int(binary.BigEndian.Uint32(data[8:12])) != entries {
		return nil
	}
	end := len(data) - hashLen // the checksum
	off, ok := skipEntries(data[:end], version, entries)
	if !ok {
		return nil
	}
	for off+8 <= end {
		sig := string(data[off : off+4])
		size := int(binary.BigEndian.Uint32(data[off+4 : off+8]))
		off += 8
		if size < 0 || off+size > end {
			return nil
		}
		if sig == "TREE" {
			return parseCacheTree(data[off : off+size])
		}
		off += size
	}
	return nil
}

// skipEntries returns the offset in data (an index of version, without its
// checksum) just past its entries, where the extensions start; false when
// they do not parse.
func skipEntries(data []byte, version uint32, entries int) (int, bool) {
	end := len(data)
	off := 12
	for i := 0; i < entries; i++ {
		if off+62 > end {
			return 0, false
		}
		flags := binary.BigEndian.Uint16(data[off+60 : off+62])
		p := off + 62
		if flags&0x4000 != 0 {
			if version < 3 {
				return 0, false
			}
			p += 2
		}
		if p > end {
			return 0, false
		}
		if version == 4 {
			// The name's prefix length to strip (git's offset varint), then
			// the rest of it, NUL-terminated; no padding.
			if p = skipVarint(data, p); p < 0 {
				return 0, false
			}
		}
		n := bytes.IndexByte(data[p:end], 0)
		if n < 0 {
			return 0, false
		}
		if version == 4 {
			off = p + n + 1
			continue
		}
		// 1 to 8 NULs pad the entry to a multiple of 8 bytes.
		off += (p - off + n + 8) &^ 7
	}
	return off, true
}

// skipVarint returns the offset past the varint at p in data, -1 when it
// runs past the end.
func skipVarint(data []byte, p int) int {
	for {
		if p >= len(data) {
			return -1
		}
		c := data[p]
		p++
		if c&0x80 == 0 {
			return p
		}
	}
}

// parseCacheTree parses a TREE extension's data: each directory as its name
// (the top's is empty), NUL, its entry count (-1: invalid) and subtree count,
// its tree id when valid, then its subtrees, depth first.
func parseCacheTree(b []byte) map[string]string {
	out := map[string]string{}
	pos := 0
	var node func(parent string, top bool) bool
	node = func(parent string, top bool) bool {
		name, count, subs, next, ok := cacheTreeHeader(b, pos)
		if !ok || top != (name == "") {
			return false
		}
		pos = next
		full := name
		if parent != "" {
			full = parent + "/" + name
		}
		if count >= 0 {
			if pos+hashLen > len(b) {
				return false
			}
			out[full] = hex.EncodeToString(b[pos : pos+hashLen])
			pos += hashLen
		}
		for range subs {
			if !node(full, false) {
				return false
			}
		}
		return true
	}
	if !node("", true) || pos != len(b) {
		return nil
	}
	return out
}

// cacheTreeHeader parses the directory entry header at pos in b: its name,
// entry count and subtree count, and the offset past them; false when it does
// not parse.
func cacheTreeHeader(b []byte, pos int) (name string, count, subs, next int, ok bool) {
	i := bytes.IndexByte(b[pos:], 0)
	if i < 0 {
		return "", 0, 0, 0, false
	}
	name = string(b[pos : pos+i])
	pos += i + 1
	j := bytes.IndexByte(b[pos:], ' ')
	if strings.Contains(name, "/") || j < 0 {
		return "", 0, 0, 0, false
	}
	count, err := strconv.Atoi(string(b[pos : pos+j]))
	pos += j + 1
	k := bytes.IndexByte(b[pos:], '\n')
	if err != nil || k < 0 {
		return "", 0, 0, 0, false
	}
	subs, err = strconv.Atoi(string(b[pos : pos+k]))
	if err != nil || subs < 0 || count < -1 {
		return "", 0, 0, 0, false
	}
	return name, count, subs, pos + k + 1, true
}
