package main

import (
	"bufio"
	"context"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/vfs"
)

// indexHints is git's stat cache (the index of the work tree holding a
// physical diff side) used the way git uses it: a work-tree file whose size,
// modification time and inode are those the index recorded, and that was not
// modified in the same second the index was written ("racily clean"), has the
// content whose blob id the index records, so it need not be read. A diff
// whose other side is a git revision then skips every file whose blob id there
// is that one: the unchanged files of a work tree are neither read nor
// inflated, as with git diff.
type indexHints struct {
	entries map[string]*index.Entry // by path relative to the directory compared
	written time.Time               // the index file's modification time

	mu   sync.Mutex
	same map[string]bool // decided paths
}

// loadIndexHints reads the index of the git work tree holding host directory
// hostDir (a physical mount's directory). It returns nil when there is none or
// it cannot be read: the diff then compares contents, as without it.
func loadIndexHints(hostDir string) *indexHints {
	top, rel, ok := gitTop(hostDir)
	if !ok {
		return nil
	}
	gitDir := filepath.Join(top, ".git")
	if st, err := os.Lstat(gitDir); err != nil || !st.IsDir() {
		return nil // a worktree's or submodule's .git file: not followed
	}
	f, err := os.Open(filepath.Join(gitDir, "index"))
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	var idx index.Index
	if err := index.NewDecoder(bufio.NewReader(f)).Decode(&idx); err != nil {
		return nil
	}
	prefix := filepath.ToSlash(rel)
	h := &indexHints{entries: make(map[string]*index.Entry, len(idx.Entries)), written: st.ModTime(), same: map[string]bool{}}
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

// unchanged reports whether the regular file p (relative to both roots) is
// known to be the same on both sides without reading it: a's entry is a git
// blob whose id the index records for p, with the same executable bit, and b's
// file is as the index saw it.
func (h *indexHints) unchanged(ctx context.Context, a, b vfs.Backend, p string) bool {
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

func (h *indexHints) decide(ctx context.Context, a, b vfs.Backend, p string) bool {
	e := h.entries[p]
	if e == nil || (e.Mode != filemode.Regular && e.Mode != filemode.Executable) {
		return false
	}
	vp, err := vfs.ParseGuest(path.Clean(p))
	if err != nil {
		return false
	}
	ia, err := a.Lstat(ctx, vp)
	if err != nil || !ia.Mode.IsRegular() {
		return false
	}
	ge, ok := ia.Sys.(*gitree.Entry)
	if !ok || ge.ID != e.Hash.String() || (ge.Kind == "executable") != (e.Mode == filemode.Executable) {
		return false
	}
	ib, err := b.Lstat(ctx, vp)
	if err != nil || !ib.Mode.IsRegular() {
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
	if !ib.ModTime.Before(h.written.Truncate(time.Second)) {
		return false
	}
	return true
}
