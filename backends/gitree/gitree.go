package gitree

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/capfs/capfs/backends/gitree/internal/pack"
	"github.com/capfs/capfs/internal/rofile"
	"github.com/capfs/capfs/vfs"
)

// DefaultTreeCacheSize is how many decoded trees an FS keeps by default.
const DefaultTreeCacheSize = 4096

// Option configures Open.
type Option func(*config)

type config struct {
	treeCache int
	maxFDs    int
	largeObj  int64
	streamMin int64

	directPacks bool
	deltaCache  int64
	objectCache int64
	libInflate  bool
}

// DefaultStreamThreshold is the blob size above which files are streamed from the
// object store instead of loaded into memory at open.
const DefaultStreamThreshold = 8 << 20

// WithStreamThreshold sets the blob size above which an open file streams its
// content from the object store rather than holding it in memory. n < 0 means
// never stream. How a streamed blob is read, and which reads are random-access,
// depends on how it is stored: see the package documentation.
func WithStreamThreshold(n int64) Option {
	return func(c *config) { c.streamMin = n }
}

// DefaultMaxOpenDescriptors is how many pack files an FS keeps open by default.
const DefaultMaxOpenDescriptors = 16

// WithMaxOpenDescriptors sets how many pack file descriptors go-git's object
// storage keeps open for reuse between reads (go-git's MaxOpenDescriptors).
// 0 opens and closes a pack file on every object read it serves. It bounds only
// go-git's descriptors. The direct pack reader ([WithDirectPacks]) holds one per
// pack file. [FS.Close] releases both.
func WithMaxOpenDescriptors(n int) Option {
	return func(c *config) { c.maxFDs = n }
}

// WithLargeObjectThreshold sets go-git's LargeObjectThreshold.
// go-git does not cache objects larger than n bytes; it reads them from the pack
// file when asked for. 0 (the default) means no threshold. It applies to the
// objects go-git's storage serves (see [WithDirectPacks]).
func WithLargeObjectThreshold(n int64) Option {
	return func(c *config) { c.largeObj = n }
}

// WithTreeCacheSize bounds the number of decoded trees kept in memory (at least 1).
func WithTreeCacheSize(n int) Option {
	return func(c *config) { c.treeCache = n }
}

// Entry is the Info.Sys of every entry an [FS] reports: what git object it is.
type Entry struct {
	// Kind is "tree", "blob", "executable", "symlink" or "submodule".
	Kind string
	// ID is the object id in hex: for a submodule, the commit it pins in the
	// submodule's own repository.
	ID string
}

// FS is one revision of a repository, as a read-only [vfs.Backend]. It is safe
// for concurrent use.
type FS struct {
	rofile.Immutable[gitMessage]
	r       *repoState
	root    node
	modTime time.Time
}

var _ vfs.Backend = (*FS)(nil)

// Open returns the tree at rev of the repository at repoPath.
//
// repoPath is a work tree or a bare repository (.git directory); parents are
// not searched. rev is any revision go-git resolves (see the package doc), or a
// tree id, full or abbreviated (at least 4 hex digits). A bad revision is
// not_found, naming rev. So is an abbreviated id that more than one tree or
// commit starts with; the message says it is ambiguous and lists them. No error
// carries repoPath.
func Open(repoPath string, rev string, opts ...Option) (*FS, error) {
	cfg := config{treeCache: DefaultTreeCacheSize, maxFDs: DefaultMaxOpenDescriptors, streamMin: DefaultStreamThreshold,
		directPacks: true, deltaCache: DefaultDeltaBaseCacheSize, objectCache: DefaultObjectCacheSize}
	for _, o := range opts {
		o(&cfg)
	}
	var repo *git.Repository
	var closer io.Closer
	var err error
	var packs *pack.Store
	if dot, ok := gitDir(repoPath); ok {
		st := filesystem.NewStorageWithOptions(osfs.New(dot), cache.NewObjectLRU(cache.FileSize(max(cfg.objectCache, 1))), filesystem.Options{
			MaxOpenDescriptors:   cfg.maxFDs,
			LargeObjectThreshold: cfg.largeObj,
		})
		closer = st
		var s storage.Storer = st
		if cfg.directPacks {
			// Open the packs first: go-git then reads every object they hold
			// through the direct reader (packGuard), never on its own.
			if packs = pack.Open(dot, cfg.deltaCache, cfg.libInflate); packs != nil {
				s = &packGuard{Storage: st, ps: packs}
			}
		}
		repo, err = git.Open(s, nil)
	} else {
		// A ".git" file (linked work tree, submodule): let go-git follow it, with its
		// default storage options.
		repo, err = git.PlainOpenWithOptions(repoPath, &git.PlainOpenOptions{DetectDotGit: false, EnableDotGitCommonDir: true})
	}
	if err != nil {
		if closer != nil {
			closer.Close()
		}
		if packs != nil {
			packs.Close()
		}
		code := vfs.CodeIO
		if errors.Is(err, git.ErrRepositoryNotExists) || errors.Is(err, fs.ErrNotExist) {
			code = vfs.CodeNotFound
		}
		return nil, vfs.NewError(code, "open", vfs.Path{}, "cannot open git repository")
	}
	r := &repoState{store: repo.Storer, packs: packs, cache: newLRU(cfg.treeCache), closer: closer, streamMin: cfg.streamMin}
	root, mtime, err := resolveRev(repo, r, rev)
	if err != nil {
		r.close()
		return nil, err
	}
	return &FS{r: r, root: root, modTime: mtime}, nil
}

// gitDir returns the git directory of repoPath: its ".git" directory, or repoPath
// itself when it has none (a bare repository). ok is false when ".git" is a file.
func gitDir(repoPath string) (string, bool) {
	dot := filepath.Join(repoPath, ".git")
	fi, err := os.Stat(dot)
	switch {
	case err == nil && fi.IsDir():
		return dot, true
	case err == nil:
		return "", false
	}
	return repoPath, true
}

// Close releases the pack file descriptors kept open for reuse.
// It closes the repository for every FS that shares it: the one [Open] returned
// and all its Subs. Later calls on any of them fail with closed. Closing again
// does nothing.
func (f *FS) Close() error {
	if err := f.r.close(); err != nil {
		return vfs.Errno("close", vfs.Path{}, err)
	}
	return nil
}

func revNotFound(rev string) error {
	return vfs.NewError(vfs.CodeNotFound, "open", vfs.Path{}, "revision "+quote(rev)+" not found")
}

// quote quotes a guest-supplied revision for a message, bounded in length.
func quote(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "..."
	}
	return "\"" + s + "\""
}

func isFullHex(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// isShortHex reports whether s could be an abbreviated object id: 4 to 39 hex
// digits.
func isShortHex(s string) bool {
	if len(s) < 4 || len(s) >= 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// resolveShortTree resolves an abbreviated id as git does where a tree is
// expected: among the objects whose id starts with prefix, only tree-ish ones
// count (trees, commits, and tags that peel to either). ok is true when prefix
// names exactly one tree; when it names exactly one commit (or tag), ok is false
// and the caller resolves the commit as usual, with its time. Several tree-ish
// objects are an ambiguous revision: not_found, saying so. A branch or tag
// named like a short id is found by the caller only if no object matches.
func resolveShortTree(repo *git.Repository, r *repoState, prefix string) (node, bool, error) {
	lower := strings.ToLower(prefix)
	pfx, err := hex.DecodeString(lower[:len(lower)&^1])
	if err != nil {
		return node{}, false, nil
	}
	ps, ok := repo.Storer.(interface {
		HashesWithPrefix([]byte) ([]plumbing.Hash, error)
	})
	if !ok {
		return node{}, false, nil
	}
	if err := r.lock(); err != nil {
		return node{}, false, vfs.NewError(vfs.CodeClosed, "open", vfs.Path{}, "repository closed")
	}
	defer r.mu.Unlock()
	hashes, err := ps.HashesWithPrefix(pfx)
	if err != nil {
		return node{}, false, vfs.NewError(vfs.CodeIO, "open", vfs.Path{}, "cannot list objects for "+quote(prefix))
	}
	var trees, commits []string
	for _, h := range hashes {
		if !strings.HasPrefix(h.String(), lower) {
			continue
		}
		switch peeledType(r, h) {
		case plumbing.TreeObject:
			trees = append(trees, h.String())
		case plumbing.CommitObject:
			commits = append(commits, h.String())
		}
	}
	switch {
	case len(trees)+len(commits) > 1:
		return node{}, false, ambiguous(prefix, trees, commits)
	case len(trees) == 1:
		return node{mode: filemode.Dir, hash: plumbing.NewHash(trees[0])}, true, nil
	}
	return node{}, false, nil
}

// peeledType is the type of object h, its tags peeled; InvalidObject when it
// cannot be read.
func peeledType(r *repoState, h plumbing.Hash) plumbing.ObjectType {
	o, err := r.store.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return plumbing.InvalidObject
	}
	t := o.Type()
	for t == plumbing.TagObject {
		tag, err := object.DecodeTag(r.store, o)
		if err != nil {
			break
		}
		if o, err = r.store.EncodedObject(plumbing.AnyObject, tag.Target); err != nil {
			break
		}
		t = o.Type()
	}
	return t
}

// ambiguous is the error of an abbreviated id prefix that names more than one
// of the trees and commits (full ids) given.
func ambiguous(prefix string, trees, commits []string) error {
	var names []string
	for _, h := range commits {
		names = append(names, "commit "+h[:12])
	}
	for _, h := range trees {
		names = append(names, "tree "+h[:12])
	}
	sort.Strings(names)
	return vfs.NewError(vfs.CodeNotFound, "open", vfs.Path{},
		"revision "+quote(prefix)+" is ambiguous: it abbreviates "+strings.Join(names, ", "))
}

// supportedSyntax reports whether rev uses only revision syntax go-git's
// ResolveRevision honours. It silently ignores some forms (rev:path, @{...},
// ^{tag}), which would otherwise resolve to the wrong object instead of failing.
// None of ':', "@{" or "^{" can appear in a ref name, so this rejects no ref.
func supportedSyntax(rev string) bool {
	if strings.Contains(rev, ":") || strings.Contains(rev, "@{") {
		return false
	}
	for rest := rev; ; {
		i := strings.Index(rest, "^{")
		if i < 0 {
			return true
		}
		rest = rest[i+2:]
		switch {
		case strings.HasPrefix(rest, "}"), strings.HasPrefix(rest, "commit}"),
			strings.HasPrefix(rest, "tree}"), strings.HasPrefix(rest, "/"):
		default:
			return false
		}
	}
}

// dwimRef returns the full name of the ref that name means, in git's order
// (name itself, refs/name, refs/tags/name, refs/heads/name, refs/remotes/name,
// refs/remotes/name/HEAD), and whether there is one.
func dwimRef(repo *git.Repository, name string) (string, bool) {
	for _, full := range []string{name, "refs/" + name, "refs/tags/" + name, "refs/heads/" + name,
		"refs/remotes/" + name, "refs/remotes/" + name + "/HEAD"} {
		if _, err := repo.Reference(plumbing.ReferenceName(full), false); err == nil {
			return full, true
		}
	}
	return "", false
}

// resolveRev maps rev to a root tree node and the modification time its files show.
func resolveRev(repo *git.Repository, r *repoState, rev string) (node, time.Time, error) {
	if rev == "" {
		return node{}, time.Time{}, revNotFound(rev)
	}
	if isFullHex(rev) {
		if n, ok, err := resolveFullTree(repo, rev); ok || err != nil {
			return n, time.Time{}, err
		}
	}
	if isShortHex(rev) {
		if ref, ok := dwimRef(repo, rev); ok {
			// git prefers a ref to an abbreviated id ("cafe" the branch over
			// cafe… the object).
			rev = ref
		} else if n, ok, err := resolveShortTree(repo, r, rev); err != nil || ok {
			return n, time.Time{}, err
		}
	}
	if !supportedSyntax(rev) {
		return node{}, time.Time{}, vfs.NewError(vfs.CodeNotFound, "open", vfs.Path{}, "revision "+quote(rev)+" not found: unsupported revision syntax")
	}
	return resolveCommit(repo, rev)
}

// resolveCommit resolves rev through go-git to a commit, and returns its tree
// and commit time. A corrupt pack holding the commit is an io_error, not a
// missing revision.
func resolveCommit(repo *git.Repository, rev string) (node, time.Time, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if errors.Is(err, pack.ErrCorrupt) {
		return node{}, time.Time{}, vfs.Errno("open", vfs.Path{}, err)
	}
	if err != nil || h == nil || h.IsZero() {
		return node{}, time.Time{}, revNotFound(rev)
	}
	c, err := object.GetCommit(repo.Storer, *h)
	if errors.Is(err, pack.ErrCorrupt) {
		// A corrupt pack holds the commit: io_error, not a missing revision.
		return node{}, time.Time{}, vfs.Errno("open", vfs.Path{}, err)
	}
	if err != nil {
		return node{}, time.Time{}, revNotFound(rev)
	}
	return node{mode: filemode.Dir, hash: c.TreeHash}, c.Committer.When, nil
}

// resolveFullTree resolves rev, a full hex id, when it names a tree (ok); a
// corrupt pack holding it is an io_error.
func resolveFullTree(repo *git.Repository, rev string) (n node, ok bool, err error) {
	t, err := object.GetTree(repo.Storer, plumbing.NewHash(rev))
	switch {
	case err == nil:
		return node{mode: filemode.Dir, hash: t.Hash}, true, nil
	case errors.Is(err, pack.ErrCorrupt):
		return node{}, false, vfs.Errno("open", vfs.Path{}, err)
	}
	return node{}, false, nil
}

// Features reports a read-only backend with symlinks.
func (f *FS) Features() vfs.Features {
	return vfs.Features{ReadOnly: true, Symlinks: true}
}

// TreeID returns the id of the tree at this FS's root.
// For a Sub it is the subtree's id. For a Sub taken at a submodule, it is the
// commit id the submodule pins.
func (f *FS) TreeID() string { return f.root.hash.String() }

func (f *FS) resolve(ctx context.Context, p vfs.Path, follow bool, op string) (node, string, error) {
	if err := ctx.Err(); err != nil {
		return node{}, "", &vfs.Error{Code: vfs.CodeCanceled, Op: op, Path: p.String(), Err: err}
	}
	if f.r.closed.Load() {
		return node{}, "", vfs.NewError(vfs.CodeClosed, op, p, "repository closed")
	}
	res, err := vfs.Resolve[node](ctx, treeView{f.r}, f.root, p, follow, op)
	if err != nil {
		return node{}, "", err
	}
	if !res.Found {
		return node{}, "", vfs.NewError(vfs.CodeNotFound, op, p, "")
	}
	return res.Node, res.Name, nil
}

func (f *FS) info(op string, p vfs.Path, n node, name string) (vfs.Info, error) {
	var size int64
	switch n.mode {
	case filemode.Symlink, filemode.Executable, filemode.Regular, filemode.Deprecated:
		var err error
		if size, err = f.r.blobSize(n.hash); err != nil {
			return vfs.Info{}, vfs.Errno(op, p, err)
		}
	}
	return f.infoSized(op, p, n, name, size)
}

// infoSized is info for a node whose blob size (for a file or symlink) is known.
func (f *FS) infoSized(op string, p vfs.Path, n node, name string, size int64) (vfs.Info, error) {
	if name == "" {
		name = "."
	}
	// ID stays 0 (unknown): git objects are content-addressed, so two distinct files
	// with the same content share an object, and an object-derived ID would present
	// them as hard links. Sys carries the object id instead.
	i := vfs.Info{Name: name, ModTime: f.modTime, Nlink: 1}
	switch n.mode {
	case filemode.Dir:
		i.Mode = fs.ModeDir | 0o755
		i.Sys = &Entry{Kind: "tree", ID: n.hash.String()}
	case filemode.Submodule:
		i.Mode = fs.ModeDir | 0o755
		i.Sys = &Entry{Kind: "submodule", ID: n.hash.String()}
	case filemode.Symlink, filemode.Executable, filemode.Regular, filemode.Deprecated:
		i.Size = size
		switch n.mode {
		case filemode.Symlink:
			i.Mode = fs.ModeSymlink | 0o777
			i.Sys = &Entry{Kind: "symlink", ID: n.hash.String()}
		case filemode.Executable:
			i.Mode = 0o755
			i.Sys = &Entry{Kind: "executable", ID: n.hash.String()}
		default:
			i.Mode = 0o644
			i.Sys = &Entry{Kind: "blob", ID: n.hash.String()}
		}
	default:
		return vfs.Info{}, vfs.NewError(vfs.CodeIO, op, p, "unknown git file mode")
	}
	return i, nil
}

// Stat returns information on p, following a final symlink.
func (f *FS) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	n, name, err := f.resolve(ctx, p, true, "stat")
	if err != nil {
		return vfs.Info{}, err
	}
	return f.info("stat", p, n, name)
}

// Lstat returns information on p without following a final symlink.
func (f *FS) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	n, name, err := f.resolve(ctx, p, false, "lstat")
	if err != nil {
		return vfs.Info{}, err
	}
	return f.info("lstat", p, n, name)
}

// ReadDir lists directory p sorted by name. A submodule lists as empty.
func (f *FS) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	n, _, err := f.resolve(ctx, p, true, "readdir")
	if err != nil {
		return nil, err
	}
	if !typeOf(n).IsDir() {
		return nil, vfs.NewError(vfs.CodeNotDir, "readdir", p, "")
	}
	d, err := f.r.loadDir(n)
	if err != nil {
		return nil, vfs.Errno("readdir", p, err)
	}
	out := make([]vfs.DirEntry, len(d.names))
	for i, name := range d.names {
		out[i] = vfs.DirEntry{Name: name, Type: typeOf(d.nodes[i])}
	}
	return out, nil
}

const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// OpenFile opens p for reading. Any write flag fails with read_only. A directory
// opens too, but reading it fails with is_a_directory. A blob up to the stream
// threshold ([WithStreamThreshold]) is loaded into memory whole at open. A
// larger one is streamed, with random access as the package documentation
// describes.
func (f *FS) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&writeFlags != 0 {
		return nil, denied("open", p)
	}
	n, name, err := f.resolve(ctx, p, true, "open")
	if err != nil {
		return nil, err
	}
	if !typeOf(n).IsDir() && f.r.packs != nil {
		if h, done, err := f.openPacked(p, n, name); done {
			return h, err
		}
	}
	info, err := f.info("open", p, n, name)
	if err != nil {
		return nil, err
	}
	switch {
	case info.Mode.IsDir():
		return rofile.NewData(p, info, nil, readOnlyMsg), nil
	case f.r.streamMin >= 0 && info.Size > f.r.streamMin:
		return rofile.NewSource(p, info, &streamSource{r: f.r, hash: n.hash, size: info.Size, path: p}, readOnlyMsg), nil
	}
	data, err := f.r.readBlob(n.hash)
	if err != nil {
		return nil, vfs.Errno("open", p, err)
	}
	return rofile.NewData(p, info, data, readOnlyMsg), nil
}

// openPacked opens blob n at p with one read of its pack entry, which gives
// its size and, below the stream threshold, its content. done is false when
// the blob is over the threshold or in no pack: OpenFile carries on.
func (f *FS) openPacked(p vfs.Path, n node, name string) (h vfs.File, done bool, err error) {
	typ, data, err := f.r.packs.Read(n.hash, f.r.streamMin)
	switch {
	case err == nil && typ == plumbing.BlobObject:
		info, err := f.infoSized("open", p, n, name, int64(len(data)))
		if err != nil {
			return nil, true, err
		}
		return rofile.NewData(p, info, data, readOnlyMsg), true, nil
	case err == nil:
		return nil, true, vfs.Errno("open", p, plumbing.ErrObjectNotFound)
	case err != pack.ErrTooLarge && err != pack.ErrNotPacked:
		return nil, true, vfs.Errno("open", p, err)
	}
	return nil, false, nil
}

// Readlink returns the target text of symlink p; invalid_path if p is not one.
func (f *FS) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	n, _, err := f.resolve(ctx, p, false, "readlink")
	if err != nil {
		return "", err
	}
	if n.mode != filemode.Symlink {
		return "", vfs.NewError(vfs.CodeInvalidPath, "readlink", p, "not a symlink")
	}
	t, err := treeView{f.r}.Target(n)
	if err != nil {
		return "", vfs.Errno("readlink", p, err)
	}
	return t, nil
}

// Sub returns an FS rooted at directory p, pinned to that subtree's id; symlinks in
// it resolve beneath the new root. It shares the repository and tree cache.
func (f *FS) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	n, _, err := f.resolve(ctx, p, true, "sub")
	if err != nil {
		return nil, err
	}
	if !typeOf(n).IsDir() {
		return nil, vfs.NewError(vfs.CodeNotDir, "sub", p, "")
	}
	return &FS{r: f.r, root: n, modTime: f.modTime}, nil
}

// gitMessage names the backend in its read_only refusals (rofile.Immutable, which
// FS embeds for Mkdir, Remove, Rename, Symlink, Link, Chmod and Chtimes).
type gitMessage struct{}

func (gitMessage) ReadOnlyMessage() string { return readOnlyMsg }

func denied(op string, p vfs.Path) error {
	return rofile.Immutable[gitMessage]{}.Refuse(op, p)
}
