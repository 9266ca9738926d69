package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Target is the destination of an extraction: a directory the entries are
// written into. Paths are slash-separated and relative to it, already
// sanitized. package dir implements it over a *dir.Dir, so that every call is a
// Dir call with its policy, hooks and audit; a Target must not follow a path
// outside itself (a Dir cannot).
type Target interface {
	// Check asks, changing nothing, whether op on path (with dest: a symlink's
	// target, a link's new name) would be allowed; size is a file's size or -1.
	// An error with code fs_permission_denied filters the entry; any other error
	// ends the extraction.
	Check(ctx context.Context, op policy.Op, path, dest string, size int64) error
	// Lstat reports what path is now, without following a final symlink; an
	// error matching fs.ErrNotExist means nothing is there.
	Lstat(ctx context.Context, path string) (fs.FileInfo, error)
	// Mkdir creates one directory (its parent exists).
	Mkdir(ctx context.Context, path string, perm fs.FileMode) error
	// Create writes a new regular file from r (exactly size bytes); with
	// replace, it atomically replaces the existing regular file at path.
	Create(ctx context.Context, path string, perm fs.FileMode, r io.Reader, size int64, replace bool) error
	Symlink(ctx context.Context, target, link string) error
	// Link makes newname a hard link to oldname; an error matching
	// errors.ErrUnsupported makes Extract write a copy instead.
	Link(ctx context.Context, oldname, newname string) error
	Chtimes(ctx context.Context, path string, atime, mtime time.Time) error
	// Remove removes a file, link or empty directory (rolling back a merge that
	// failed part way).
	Remove(ctx context.Context, path string) error
}

// Item is one entry Extract wrote (or, on error, would have written).
type Item struct {
	Path string      `json:"path"`
	Type string      `json:"type"` // "file", "dir", "symlink" or "hardlink"
	Size int64       `json:"size,omitempty"`
	Mode fs.FileMode `json:"mode"`           // as extracted, after clamping
	Link string      `json:"link,omitempty"` // a symlink's target, a hard link's target path
}

// Filtered is one entry Extract left out, and why.
type Filtered struct {
	// Name is the entry's name as stored, made printable (control characters
	// and invalid UTF-8 escaped as \xNN).
	Name string `json:"name"`
	// Path is the sanitized path, when the name had one.
	Path   string `json:"path,omitempty"`
	Reason Reason `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Result reports an extraction. When Extract returns an error after the
// manifest pass, Result still lists every decision made (Filtered) and what was
// planned (Extracted), and Merged says whether anything reached the destination.
type Result struct {
	Format    Format     `json:"-"`
	Extracted []Item     `json:"extracted"`
	Filtered  []Filtered `json:"filtered"`
	Entries   int        `json:"entries"` // entries read, filtered ones included
	Bytes     int64      `json:"bytes"`   // file bytes extracted
	// Merged is true once the merge began; after an error it means the rollback
	// was attempted (RolledBack says whether it removed everything).
	Merged     bool `json:"merged"`
	RolledBack bool `json:"rolled_back,omitempty"`
}

// planned is one accepted entry.
type planned struct {
	path  string
	kind  kind
	mode  fs.FileMode
	size  int64
	mtime time.Time
	link  string // symlink target text, or hard-link target path
	blob  int    // staged data of a file
	repl  bool   // replaces an existing file
}

// node is the archive's own model of the tree it builds.
type node struct {
	kind     kind
	implicit bool // a directory only named as a parent
	blocked  bool // a link entry that was filtered
}

type destState uint8

const (
	destUnknown destState = iota
	destAbsent
	destDir
	destFile
	destOther  // symlink, device...
	destDenied // the destination's policy refuses to look at it
)

type extractor struct {
	ctx    context.Context
	t      Target
	opts   Options
	lim    Limits
	res    *Result
	stage  stage
	plan   []planned
	names  map[string]*node
	folds  map[string]string
	dest   map[string]destState
	total  int64
	hasDir map[string]bool // directories the merge must create
	files  map[string]int  // plan index of each file (fileOf), built on demand
	// newDirs are the directories the entry being decided would add to hasDir,
	// committed only if it is accepted.
	newDirs []string
	// deniedDir remembers the parent directories the policy refused to create.
	deniedDir map[string]string
}

// Extract extracts the archive src (size bytes) into t in two phases.
//
// Manifest: every entry is read once, in archive order, and decided: its name
// sanitized (SanitizeName), its type checked (links only with LinksInside;
// devices, FIFOs, sparse, encrypted and unknown entries filtered), collisions
// with earlier entries found (the same name twice, names equal after Unicode
// normalization and case folding, a name beneath a file or link entry), what
// the destination holds there looked at (Target.Lstat: a symlink on the way or
// an existing name filters it), and the destination's policy asked
// (Target.Check). Accepted file data goes to a private stage (memory, then a
// 0700 temporary directory), every byte counted against the Limits and every
// declared size and checksum verified (zip CRC-32 per entry, the gzip or zstd
// checksum of the whole stream). Any limit, corruption, overlap or, with
// Strict, any filtered entry ends the extraction here, with an error and
// nothing written to t.
//
// Merge: directories (parents first), then files, hard links and last
// symlinks are created through t, so no entry is written through a link the
// archive made. If a call fails part way, what was created is removed again
// (Result.RolledBack reports whether all of it was).
//
// Errors are *vfs.Error values with Op "ExtractArchive": io_error wrapping
// ErrCorrupt or ErrOverlap, file_too_large wrapping ErrLimit, not_supported
// wrapping ErrFormat, canceled when the Timeout or ctx ends it,
// fs_permission_denied wrapping ErrRefused (Strict), or the Target's error.
func Extract(ctx context.Context, src io.ReaderAt, size int64, t Target, opts Options) (*Result, error) {
	x := &extractor{
		t:         t,
		opts:      opts,
		lim:       opts.Limits.withDefaults(),
		res:       &Result{Extracted: []Item{}, Filtered: []Filtered{}},
		names:     map[string]*node{},
		folds:     map[string]string{},
		dest:      map[string]destState{},
		hasDir:    map[string]bool{},
		deniedDir: map[string]string{},
	}
	x.stage.base = opts.StagingDir
	x.stage.budget = opts.MemoryBudget
	if x.stage.budget == 0 {
		x.stage.budget = DefaultMemoryBudget
	}
	defer x.stage.close()
	if x.lim.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, x.lim.Timeout)
		defer cancel()
	}
	x.ctx = ctx

	if x.lim.MaxArchiveBytes >= 0 && size > x.lim.MaxArchiveBytes {
		return x.res, x.fail(fmt.Errorf("%w: the archive is %d bytes, more than %d", ErrLimit, size, x.lim.MaxArchiveBytes))
	}
	format := opts.Format
	if format == FormatAuto {
		head := make([]byte, 512)
		n, _ := src.ReadAt(head, 0)
		format = Detect(head[:n])
		if format == FormatAuto {
			return x.res, x.fail(ErrFormat)
		}
	}
	x.res.Format = format

	var err error
	if format == FormatZip {
		err = x.readZip(src, size)
	} else {
		err = x.readTar(io.NewSectionReader(src, 0, size), format)
	}
	if err == nil {
		err = x.checkSymlinks()
	}
	if err == nil && opts.Strict && len(x.res.Filtered) > 0 {
		f := x.res.Filtered[0]
		err = fmt.Errorf("%w: %s (%s)", ErrRefused, f.Name, f.Reason)
	}
	if err != nil {
		return x.res, x.fail(err)
	}
	x.items()
	if err := x.merge(); err != nil {
		return x.res, x.fail(err)
	}
	return x.res, nil
}

// fail turns a cause into the *vfs.Error Extract returns.
func (x *extractor) fail(err error) error {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return err
	}
	code := vfs.CodeIO
	switch {
	case x.ctx.Err() != nil:
		err = errors.Join(x.ctx.Err(), err)
		code = vfs.CodeCanceled
	case errors.Is(err, errArchiveLimit):
		err = fmt.Errorf("%w: more than %d bytes after decompression", ErrLimit, x.lim.MaxArchiveBytes)
		code = vfs.CodeTooLarge
	case errors.Is(err, ErrLimit):
		code = vfs.CodeTooLarge
	case errors.Is(err, ErrFormat):
		code = vfs.CodeNotSupported
	case errors.Is(err, ErrRefused):
		code = vfs.CodePermission
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = vfs.CodeCanceled
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrOverlap):
	default:
		err = fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &vfs.Error{Code: code, Op: "ExtractArchive", Err: err}
}

func (x *extractor) filter(e *entry, clean string, r Reason, detail string) {
	if clean != "" && (e.kind == kindSymlink || e.kind == kindHardlink) && x.names[clean] == nil {
		// Entries beneath a link left out meant to go through it: they are
		// left out too (ReasonThroughLink), not put in a directory of its name.
		x.names[clean] = &node{kind: e.kind, blocked: true}
	}
	x.res.Filtered = append(x.res.Filtered, Filtered{Name: printable(e.raw), Path: clean, Reason: r, Detail: detail})
}

func (x *extractor) readZip(src io.ReaderAt, size int64) error {
	zr, err := newZipReader(src, size)
	if err != nil {
		return err
	}
	if x.lim.MaxEntries >= 0 && len(zr.File) > x.lim.MaxEntries {
		return fmt.Errorf("%w: %d entries, more than %d", ErrLimit, len(zr.File), x.lim.MaxEntries)
	}
	ents, err := zipEntries(src, zr, size)
	if err != nil {
		return err
	}
	// A zip bomb is refused before its entry is inflated: each entry's declared
	// size is checked against the limits first, and the reader holds the entry
	// to it (reading more is ErrCorrupt).
	for i := range ents {
		e := &ents[i]
		if e.kind == kindSymlink && x.opts.Links == LinksInside {
			// A zip symlink's target is its contents.
			t, err := x.zipLinkTarget(e)
			if err != nil {
				return err
			}
			e.link = t
		}
		if err := x.entry(e, func() (io.Reader, func(), error) {
			rc, err := openZip(e.zipFile)
			if err != nil {
				return nil, nil, err
			}
			return &counter{r: rc, limit: -1, ctx: x.ctx}, func() { rc.Close() }, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) zipLinkTarget(e *entry) (string, error) {
	if e.size > 4096 {
		return "", nil // filtered later as a bad target
	}
	rc, err := openZip(e.zipFile)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4097))
	if err != nil {
		return "", sizeErr(err)
	}
	return string(b), nil
}

func (x *extractor) readTar(r io.Reader, f Format) error {
	in := &counter{r: r, limit: -1, ctx: x.ctx}
	stream, finish, err := tarStream(in, f)
	if err != nil {
		return err
	}
	dec := &counter{r: stream, limit: x.lim.MaxArchiveBytes, ctx: x.ctx}
	tr := tar.NewReader(dec)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, errArchiveLimit) || x.ctx.Err() != nil {
				return errors.Join(err, x.ctx.Err())
			}
			return fmt.Errorf("%w: tar: %v", ErrCorrupt, err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			x.res.Entries++
			if x.lim.MaxEntries >= 0 && x.res.Entries > x.lim.MaxEntries {
				return fmt.Errorf("%w: more than %d entries", ErrLimit, x.lim.MaxEntries)
			}
			continue
		}
		e := tarEntry(h)
		if err := x.entry(&e, func() (io.Reader, func(), error) { return tr, func() {}, nil }); err != nil {
			return err
		}
	}
	// The compressed stream's checksum is checked at its end; nothing is merged
	// before it is.
	if err := finish(); err != nil {
		if errors.Is(err, errArchiveLimit) || x.ctx.Err() != nil {
			return errors.Join(err, x.ctx.Err())
		}
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

// entry decides one entry and stages its data.
func (x *extractor) entry(e *entry, open func() (io.Reader, func(), error)) error {
	clean, ok, err := x.accept(e)
	if err != nil || !ok {
		return err
	}
	p, r, d := x.planOf(e, clean)
	if r != "" {
		x.filter(e, clean, r, d)
		return nil
	}
	if r, d := x.decideName(clean, e.kind); r != "" {
		x.filter(e, clean, r, d)
		return nil
	}
	if n := x.names[clean]; n != nil && !n.implicit {
		return nil // a directory named again: already planned
	}
	r, d, err = x.decidePlace(&p)
	if err != nil {
		return err
	}
	if r != "" {
		x.filter(e, clean, r, d)
		return nil
	}
	if e.kind == kindFile {
		if err := x.stageFile(e, &p, open); err != nil {
			return err
		}
	}
	for _, d := range x.newDirs {
		x.hasDir[d] = true
	}
	x.register(clean, e.kind)
	x.plan = append(x.plan, p)
	return nil
}

// accept counts e against the entry limit and sanitizes its name. It
// reports false for an entry not to extract: filtered (a bad name, a kind
// not extracted) or "./", the destination itself, which exists. A file over
// the size limits is an error.
func (x *extractor) accept(e *entry) (string, bool, error) {
	if err := x.ctx.Err(); err != nil {
		return "", false, err
	}
	x.res.Entries++
	if x.lim.MaxEntries >= 0 && x.res.Entries > x.lim.MaxEntries {
		return "", false, fmt.Errorf("%w: more than %d entries", ErrLimit, x.lim.MaxEntries)
	}
	clean, isDir, reason := SanitizeName(e.raw, x.lim.MaxDepth)
	if isSelf(e, isDir, reason) {
		return "", false, nil // "./": the destination itself, which exists
	}
	if reason != "" {
		x.filter(e, "", reason, "")
		return "", false, nil
	}
	if isDir && e.kind == kindFile && e.size == 0 {
		e.kind = kindDir // a zip or old tar directory named with a trailing slash
	}
	if r, d := x.unsupported(e); r != "" {
		x.filter(e, clean, r, d)
		return "", false, nil
	}
	return clean, true, x.checkSize(e)
}

// isSelf reports whether e, whose name sanitized to nothing (reason), names
// the destination itself ("./" as a directory).
func isSelf(e *entry, isDir bool, reason Reason) bool {
	return reason == ReasonEmpty && e.raw != "" && (e.kind == kindDir || isDir && e.kind == kindFile && e.size == 0)
}

// unsupported says why e is not extracted whatever its name ("" if it may
// be): sparse, encrypted, compressed with an unknown method, a device or
// another special entry, or a link the options leave out.
func (x *extractor) unsupported(e *entry) (Reason, string) {
	switch {
	case e.sparse:
		return ReasonSparse, ""
	case e.crypt:
		return ReasonEncrypted, ""
	case e.method != "":
		return ReasonUnsupported, "compression method " + e.method
	case e.kind == kindDevice:
		return ReasonDevice, ""
	case e.kind == kindOther:
		return ReasonUnsupported, "entry type"
	case e.kind == kindSymlink && x.opts.Links != LinksInside:
		return ReasonSymlink, ""
	case e.kind == kindHardlink && x.opts.Links != LinksInside:
		return ReasonHardlink, ""
	}
	return "", ""
}

// checkSize refuses a file larger than MaxEntryBytes, or one that takes the
// extraction past MaxExtractedBytes.
func (x *extractor) checkSize(e *entry) error {
	if e.kind != kindFile {
		return nil
	}
	if x.lim.MaxEntryBytes >= 0 && e.size > x.lim.MaxEntryBytes {
		return fmt.Errorf("%w: entry %q is %d bytes, more than %d", ErrLimit, printable(e.raw), e.size, x.lim.MaxEntryBytes)
	}
	if x.lim.MaxExtractedBytes >= 0 && x.total+e.size > x.lim.MaxExtractedBytes {
		return fmt.Errorf("%w: more than %d bytes extracted", ErrLimit, x.lim.MaxExtractedBytes)
	}
	return nil
}

// planOf is the planned entry for e at clean: its mode clamped, and a
// link's target, which must be acceptable text (a symlink) or a file
// extracted earlier (a hard link); otherwise the reason to filter it.
func (x *extractor) planOf(e *entry, clean string) (planned, Reason, string) {
	p := planned{path: clean, kind: e.kind, size: e.size, mtime: e.mtime, blob: -1}
	switch e.kind {
	case kindDir:
		p.mode, p.size = clampDir(e.mode), 0
	case kindFile:
		p.mode = clampFile(e.mode)
	case kindSymlink:
		p.mode, p.size = fs.ModeSymlink|0o777, 0
		if r, d := linkText(e.link); r != "" {
			return p, r, d
		}
		p.link = e.link
	case kindHardlink:
		p.size = 0
		target, _, r := SanitizeName(e.link, x.lim.MaxDepth)
		if r != "" {
			return p, ReasonLinkTarget, "target: " + string(r)
		}
		if n := x.names[target]; n == nil || n.kind != kindFile {
			return p, ReasonLinkTarget, "the target is not a file extracted earlier from this archive"
		}
		p.link = target
	}
	return p, "", ""
}

// stageFile stages a file's data, read through open, and counts it.
func (x *extractor) stageFile(e *entry, p *planned, open func() (io.Reader, func(), error)) error {
	rd, done, err := open()
	if err != nil {
		return err
	}
	i, err := x.stage.put(rd, e.size)
	done()
	if err != nil {
		return err
	}
	p.blob = i
	x.total += e.size
	return nil
}
