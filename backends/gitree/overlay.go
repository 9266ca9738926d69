package gitree

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/cowview"
	"github.com/capfs/capfs/vfs"
)

// Signature names the author (and committer) of a commit [Overlay.Commit]
// writes. A zero When means the time of the call.
type Signature struct {
	Name  string
	Email string
	When  time.Time
}

// Overlay is a writable [vfs.Backend] over one branch of a repository.
// Reads fall through to the branch's tree as it was when the overlay was opened.
// Writes go to an in-memory layer. [Overlay.Commit] turns the merged view into a
// git commit on the branch.
//
// Copy-up is per path. Reading an untouched path reads the base revision; nothing
// is copied. The first write to a base file (an open for writing or with O_TRUNC,
// a Chmod, a Chtimes) copies that one file into the memory layer. The directories
// on its path become upper directories. They record only their differences from
// the base tree beneath them: entries added or replaced, and whiteouts for
// deleted base entries. So a write costs in proportion to the length of its path
// and the size of the file, not the size of the tree.
//
// Removing a base entry records a whiteout. The path, and everything beneath a
// removed directory, disappears from Stat, ReadDir and OpenFile. Creating it
// again works and shows only the new entry. Renaming a base directory is lazy.
// The directory keeps overlaying the same base tree under its new name, and
// nothing beneath it is copied until it is written. A whiteout hides the old
// name. Renames otherwise follow rename(2), flags included. ReadDir merges the
// upper entries with the base tree's, minus whiteouts, sorted by name. Symlinks
// resolve with the shared resolver [vfs.Resolve] over the merged view, beneath
// the overlay's root.
//
// A handle opened for reading on a base file reads the base blob. If the file is
// copied up later (written through another handle), the earlier handle keeps
// reading the old content, as on Linux's overlayfs. A base symlink whose target
// is longer than PATH_MAX (which only git can hold) is kept as a reference.
// Readlink and following it fail with invalid_path, as on the read-only [FS].
// Commit writes the original object back wherever it was moved.
//
// Git records only what it can:
//   - A file's mode becomes 100755 if its owner-execute bit is set, 100644
//     otherwise.
//   - Symlinks become 120000 entries whose blob is the target text.
//   - Empty directories are dropped (git cannot store them).
//   - Times, other permission bits and hard-link identity are not recorded.
//   - A submodule of the base tree stays a submodule (a gitlink to the same
//     commit) while its directory in the overlay is empty. It follows renames of
//     its own path.
//
// Commit builds the new tree from the base tree and the upper layer. A directory
// the overlay did not change keeps its tree id without being read. So does a
// changed directory whose entries end up equal to its base tree's. Only the
// others are encoded and hashed. Every file in the memory layer is hashed at
// each Commit; base files that were never copied up are not read. Only objects
// the store lacks are written.
//
// The merged view is shared with the CAS overlay (package internal/cowview).
// These are its methods' guarantees besides the Backend contract:
//   - Stat and Lstat of an entry the overlay has not changed report what the
//     read-only FS does. Its Info.Sys is an [*Entry]. An up directory without
//     changes of its own keeps its tree's, or its submodule's.
//   - ReadDir lists the base tree's entries minus whiteouts, merged with the
//     upper layer's.
//   - OpenFile copies a base file up when it opens it for writing or with
//     O_TRUNC, not for reading.
//   - Remove hides a base entry with a whiteout.
//   - Chmod and Chtimes copy a base file up first. Commit keeps only the owner
//     execute bit of files and no times.
//   - Features reports a writable, non-persistent backend with symlinks, Chmod
//     and Chtimes. Link fails with not_supported, as git cannot record hard links.
//   - Sub returns a writable Backend rooted at a directory of the overlay, pinned
//     to that directory. Writes through it land in the overlay (and in the next
//     Commit). A later rename of the directory does not redirect it. It has no
//     Commit of its own.
//   - Resolve returns the canonical location of a path in the merged view,
//     copying nothing up.
//
// All methods are safe for concurrent use. One readers-writer lock guards the
// merged view: lookups run in parallel, mutations are exclusive. The memory
// layer's per-file locks guard file contents. Commit excludes the overlay's own
// mutating methods while it snapshots the tree. It does not exclude writes
// through files that were already open for writing.
type Overlay struct {
	*view                     // the vfs.Backend methods and Resolve
	t     *cowview.Tree[node] // the merged view's nodes, store, lock and Close
	base  *FS                 // the base revision; its object store also takes Commit's objects
	repo  *git.Repository
	ref   plumbing.ReferenceName
	// gitDir is the repository's git directory for ref updates; "" for a ".git"
	// file, where go-git's CheckAndSetReference is used.
	gitDir string

	commitMu sync.Mutex // serializes Commit and WriteTree
	encoded  int        // trees encoded by writeDir, for tests; guarded by commitMu
	headMu   sync.Mutex
	head     plumbing.Hash // the commit the ref must still point at; guarded by headMu
}

var _ vfs.Backend = (*Overlay)(nil)

// OpenOverlay returns a writable [Overlay] over the tip of branch in the
// repository at repoPath.
//
// repoPath is a work tree or a bare repository. branch is a short name such as
// "main", or a full "refs/..." name. The branch's current commit is recorded:
// Commit moves the branch only if it still points there. A name git would refuse
// (with "..", a component starting with '.', ending in ".lock", ...) is
// invalid_path. An unknown branch, or a ref that does not point at a commit, is
// not_found. No error carries repoPath. Opening reads only the branch's commit.
func OpenOverlay(repoPath, branch string, opts ...OverlayOption) (*Overlay, error) {
	var cfg overlayConfig
	for _, o := range opts {
		o(&cfg)
	}
	repo, err := git.PlainOpenWithOptions(repoPath, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, vfs.NewError(vfs.CodeNotFound, "open", vfs.Path{}, "cannot open git repository")
	}
	name := plumbing.ReferenceName(branch)
	if !strings.HasPrefix(branch, "refs/") {
		name = plumbing.NewBranchReferenceName(branch)
	}
	if name.Validate() != nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, "open", vfs.Path{}, "invalid branch name "+quote(branch))
	}
	ref, err := repo.Storer.Reference(name)
	if err != nil || ref.Type() != plumbing.HashReference {
		return nil, vfs.NewError(vfs.CodeNotFound, "open", vfs.Path{}, "branch "+quote(branch)+" not found")
	}
	notCommit := vfs.NewError(vfs.CodeNotFound, "open", vfs.Path{}, "ref "+quote(branch)+" does not point at a commit")
	// The base FS's object store serves reads and, under its lock, the objects
	// Commit writes: one pack index is loaded, not two.
	base, err := Open(repoPath, ref.Hash().String(), cfg.tree...)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodeNotFound {
			return nil, notCommit
		}
		return nil, err
	}
	if err := base.r.lock(); err != nil {
		return nil, vfs.NewError(vfs.CodeClosed, "open", vfs.Path{}, "repository closed")
	}
	_, err = object.GetCommit(base.r.store, ref.Hash())
	base.r.mu.Unlock()
	if err != nil {
		// An annotated tag, or a ref to a tree or blob: no parent for a commit.
		base.Close()
		return nil, notCommit
	}
	t, v := newView(base, cowview.Config{Store: memory.New(cfg.mem...)})
	ov := &Overlay{view: v, t: t, base: base, repo: repo, ref: name, head: ref.Hash()}
	if dir, ok := gitDir(repoPath); ok {
		ov.gitDir = dir
	}
	return ov, nil
}

// OverlayOption configures OpenOverlay.
type OverlayOption func(*overlayConfig)

type overlayConfig struct {
	tree []Option
	mem  []memory.Option
}

// OverlayTree passes options to the Open of the base tree.
func OverlayTree(opts ...Option) OverlayOption {
	return func(c *overlayConfig) { c.tree = append(c.tree, opts...) }
}

// OverlayMemory configures the memory layer that holds the contents of written
// files. Hosts serving untrusted guests should set [memory.WithQuota] and
// [memory.WithMaxFileSize]. A base file copied up counts against them with its
// whole size. The quota counts file data only: the number of directories,
// symlinks and whiteouts is not limited by it.
func OverlayMemory(opts ...memory.Option) OverlayOption {
	return func(c *overlayConfig) { c.mem = append(c.mem, opts...) }
}

// Base returns the commit id [Overlay.Commit] expects the branch to point at.
// That is the one it pointed at when the overlay was opened, or the last commit
// this overlay wrote.
func (o *Overlay) Base() string {
	o.headMu.Lock()
	defer o.headMu.Unlock()
	return o.head.String()
}

// Close releases the base tree's repository handles and discards nothing else.
// Afterwards every method fails with closed. Files already open on written files
// stay usable. Closing again does nothing.
func (o *Overlay) Close() error {
	o.t.Close()
	return o.base.Close()
}

func validSig(s string) bool {
	return s != "" && !strings.ContainsAny(s, "<>\n\x00")
}

// Commit writes the merged view as a commit on the branch and returns its id.
//
// It writes blobs, trees and a commit into the repository's object store. The
// commit's parent is [Overlay.Base]. Its message is message, with a final newline
// added if missing. author is both author and committer. It touches no work tree
// and no index. It then moves the branch to the new commit only if the branch
// still points at Base(), a compare-and-swap under git's ref lock. Otherwise, or
// while another writer holds the branch's lock, it fails with conflict and the
// branch is unchanged; the unreferenced objects stay until git gc. No reflog
// entry is written.
//
// On success the new commit becomes Base(), so a later Commit builds on it. The
// overlay's view is unchanged: it already shows that commit's tree. An author
// with an empty name or email, or one containing '<', '>' or a newline, is
// invalid_path. So is a message with a NUL byte.
func (o *Overlay) Commit(ctx context.Context, message string, author Signature) (string, error) {
	if !validSig(author.Name) || !validSig(author.Email) {
		return "", vfs.NewError(vfs.CodeInvalidPath, "commit", vfs.Path{}, "invalid author name or email")
	}
	if strings.ContainsRune(message, 0) {
		return "", vfs.NewError(vfs.CodeInvalidPath, "commit", vfs.Path{}, "commit message contains a NUL byte")
	}
	if author.When.IsZero() {
		author.When = time.Now()
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	if o.t.Closed() {
		return "", vfs.NewError(vfs.CodeClosed, "commit", vfs.Path{}, "overlay closed")
	}
	tree, err := o.tree(ctx)
	if err != nil {
		return "", err
	}
	head := plumbing.NewHash(o.Base())
	sig := object.Signature{Name: author.Name, Email: author.Email, When: author.When}
	c := &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: tree, ParentHashes: []plumbing.Hash{head}}
	id, err := o.store(ctx, c.Encode, plumbing.CommitObject)
	if err != nil {
		return "", err
	}
	if err := o.moveRef(head, id); err != nil {
		return "", err
	}
	o.headMu.Lock()
	o.head = id
	o.headMu.Unlock()
	return id.String(), nil
}

var errMoved = vfs.NewError(vfs.CodeConflict, "commit", vfs.Path{}, "branch moved since the overlay was opened")

// moveRef moves o.ref from head to id, or fails with conflict. In a repository
// with a .git directory (or a bare one) it follows git's own locking protocol, so it
// is atomic against the git CLI too: create "<ref>.lock" exclusively (an existing
// lock means someone else is updating the ref: conflict), check the ref's current
// value, write the new value into the lock file and rename it over the ref. For a
// ".git" file (linked work tree) it falls back to go-git's CheckAndSetReference,
// which is atomic only against other go-git writers.
func (o *Overlay) moveRef(head, id plumbing.Hash) error {
	if o.gitDir == "" {
		err := o.repo.Storer.CheckAndSetReference(plumbing.NewHashReference(o.ref, id), plumbing.NewHashReference(o.ref, head))
		if errors.Is(err, storage.ErrReferenceHasChanged) {
			return errMoved
		}
		if err != nil {
			return vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot update the branch")
		}
		return nil
	}
	refPath := filepath.Join(o.gitDir, filepath.FromSlash(o.ref.String()))
	lock := refPath + ".lock"
	if err := os.MkdirAll(filepath.Dir(refPath), 0o755); err != nil {
		return vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot update the branch")
	}
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return vfs.NewError(vfs.CodeConflict, "commit", vfs.Path{}, "branch is being updated by someone else (its lock file exists)")
	}
	if err != nil {
		return vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot lock the branch")
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(lock)
		}
	}()
	cur, err := o.repo.Storer.Reference(o.ref)
	if err != nil || cur.Type() != plumbing.HashReference || cur.Hash() != head {
		return errMoved
	}
	if _, err := f.WriteString(id.String() + "\n"); err != nil {
		return vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot write the branch")
	}
	if err := f.Close(); err != nil {
		return vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot write the branch")
	}
	if err := os.Rename(lock, refPath); err != nil {
		os.Remove(lock)
		done = true
		return vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot move the branch")
	}
	done = true
	return nil
}

// WriteTree writes the merged view's blobs and trees into the object store and
// returns the root tree's id. It writes as [Overlay.Commit] does, but writes no
// commit and moves no ref: it is what a diff against the base needs. Before the
// first write the id is the base tree's. An entirely empty view is an empty
// tree, which is written too.
func (o *Overlay) WriteTree(ctx context.Context) (string, error) {
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	if o.t.Closed() {
		return "", vfs.NewError(vfs.CodeClosed, "writetree", vfs.Path{}, "overlay closed")
	}
	h, err := o.tree(ctx)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// tree writes the merged view's tree and returns its id; o.commitMu is held. It
// excludes mutations (not readers) while it walks the view.
func (o *Overlay) tree(ctx context.Context) (plumbing.Hash, error) {
	o.t.RLock()
	defer o.t.RUnlock()
	h, empty, err := o.writeDir(ctx, o.t.Root(), vfs.Root)
	if err != nil || !empty {
		return h, err
	}
	t := &object.Tree{}
	return o.store(ctx, t.Encode, plumbing.TreeObject)
}

// store encodes an object with enc and writes it into the base FS's object store
// (under its lock) unless the store already has it.
func (o *Overlay) store(ctx context.Context, enc func(plumbing.EncodedObject) error, t plumbing.ObjectType) (plumbing.Hash, error) {
	if err := ctx.Err(); err != nil {
		return plumbing.ZeroHash, &vfs.Error{Code: vfs.CodeCanceled, Op: "commit", Err: err}
	}
	r := o.base.r
	if err := r.lock(); err != nil {
		return plumbing.ZeroHash, vfs.NewError(vfs.CodeClosed, "commit", vfs.Path{}, "overlay closed")
	}
	defer r.mu.Unlock()
	obj := r.store.NewEncodedObject()
	obj.SetType(t)
	if err := enc(obj); err != nil {
		return plumbing.ZeroHash, vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot encode object")
	}
	h := obj.Hash()
	if r.store.HasEncodedObject(h) == nil {
		return h, nil
	}
	if _, err := r.store.SetEncodedObject(obj); err != nil {
		return plumbing.ZeroHash, vfs.NewError(vfs.CodeIO, "commit", vfs.Path{}, "cannot write object")
	}
	return h, nil
}

func (o *Overlay) blob(ctx context.Context, data []byte) (plumbing.Hash, error) {
	return o.store(ctx, func(obj plumbing.EncodedObject) error {
		w, err := obj.Writer()
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		return w.Close()
	}, plumbing.BlobObject)
}

// writeDir writes up directory d (at path p, for errors) as a tree and returns its
// id; empty reports a tree with no entries (not written, dropped by the caller).
// A directory with no changes of its own returns its base tree's id unread; one
// whose merged entries equal its base tree's returns that id without encoding.
func (o *Overlay) writeDir(ctx context.Context, d *unode, p vfs.Path) (plumbing.Hash, bool, error) {
	if !d.Up || (len(d.Ents) == 0 && len(d.White) == 0 && !d.Lo.hash.IsZero()) {
		return d.Lo.hash, false, nil
	}
	ld, err := o.lower(d)
	if err != nil {
		return plumbing.ZeroHash, false, vfs.Errno("commit", p, err)
	}
	var out []object.TreeEntry
	if ld != nil {
		for i, name := range ld.names {
			if _, ok := d.Ents[name]; ok {
				continue
			}
			if _, ok := d.White[name]; ok {
				continue
			}
			out = append(out, object.TreeEntry{Name: name, Mode: ld.nodes[i].mode, Hash: ld.nodes[i].hash})
		}
	}
	for name, c := range d.Ents {
		cp, err := p.Child(name)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		te := object.TreeEntry{Name: name}
		switch {
		case !c.Up:
			te.Mode, te.Hash = c.Lo.mode, c.Lo.hash
		case c.Type == fs.ModeDir:
			h, empty, err := o.writeDir(ctx, c, cp)
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			switch {
			case !empty:
				te.Mode, te.Hash = filemode.Dir, h
			case !c.Pin.hash.IsZero():
				te.Mode, te.Hash = filemode.Submodule, c.Pin.hash
			default:
				continue // git cannot hold an empty directory
			}
		case c.Type == fs.ModeSymlink:
			te.Mode = filemode.Symlink
			if te.Hash, err = o.blob(ctx, []byte(c.Target)); err != nil {
				return plumbing.ZeroHash, false, err
			}
		default:
			if te.Mode, te.Hash, err = o.writeFile(ctx, c, cp); err != nil {
				return plumbing.ZeroHash, false, err
			}
		}
		out = append(out, te)
	}
	if len(out) == 0 {
		return plumbing.ZeroHash, true, nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if ld != nil && sameEntries(out, ld) {
		return d.Lo.hash, false, nil
	}
	// Git orders entries by name, comparing a tree's name as if it ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	o.encoded++
	t := &object.Tree{Entries: out}
	h, err := o.store(ctx, t.Encode, plumbing.TreeObject)
	return h, false, err
}

// lower returns the base tree directory d overlays (or is), or nil.
func (o *Overlay) lower(d *unode) (*dir, error) {
	if d.Lo.hash.IsZero() {
		return nil, nil
	}
	return o.base.r.loadDir(d.Lo)
}

// sameEntries reports whether out (sorted by name) lists exactly the entries of d.
func sameEntries(out []object.TreeEntry, d *dir) bool {
	if len(out) != len(d.names) {
		return false
	}
	for i, e := range out {
		if e.Name != d.names[i] || e.Mode != d.nodes[i].mode || e.Hash != d.nodes[i].hash {
			return false
		}
	}
	return true
}

// writeFile writes up file c's contents as a blob and returns its git mode.
func (o *Overlay) writeFile(ctx context.Context, c *unode, p vfs.Path) (filemode.FileMode, plumbing.Hash, error) {
	f, err := o.t.Store().OpenFile(ctx, cowview.InoPath(c.Ino), os.O_RDONLY, 0)
	if err != nil {
		return 0, plumbing.ZeroHash, vfs.Readdress(err, "commit", p.String(), "")
	}
	info, err := f.Stat()
	var data []byte
	if err == nil {
		data, err = io.ReadAll(f)
	}
	f.Close()
	if err != nil {
		return 0, plumbing.ZeroHash, vfs.Errno("commit", p, err)
	}
	mode := filemode.Regular
	if info.Mode&0o100 != 0 {
		mode = filemode.Executable
	}
	h, err := o.blob(ctx, data)
	return mode, h, err
}
