package archive

import (
	"archive/tar"
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/capfs/capfs/vfs"
)

// Source is what Create reads: a directory tree addressed by slash-separated
// paths relative to it ("." its root). package dir implements it over a
// *dir.Dir, so every read is a Dir call.
type Source interface {
	ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error)
	Lstat(ctx context.Context, path string) (fs.FileInfo, error)
	Open(ctx context.Context, path string) (io.ReadCloser, error)
	Readlink(ctx context.Context, path string) (string, error)
}

// CreateOptions configure Create.
type CreateOptions struct {
	// Format is FormatTarZst (the default, for FormatAuto), FormatTar,
	// FormatTarGz or FormatZip.
	Format Format
	// ModTime, if not zero, is the modification time of every entry, making the
	// archive's bytes a function of the tree's names, contents, types and
	// execute bits alone. Otherwise each entry keeps its own (to the second).
	ModTime time.Time
	// Limits bound the archive: MaxEntries, MaxEntryBytes and MaxExtractedBytes
	// (the sum of file sizes) apply, with the same defaults as extraction, so
	// what Create makes Extract accepts.
	Limits Limits
	// Exclude, when set, is asked of each entry (its archive name, its type
	// bits) before it is read: true leaves the entry out, and a directory with
	// all it holds, without counting or listing it.
	Exclude func(name string, mode fs.FileMode) bool
}

// Skipped is an entry Create left out.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// CreateResult reports what Create wrote.
type CreateResult struct {
	Entries int       `json:"entries"`
	Bytes   int64     `json:"bytes"`
	Skipped []Skipped `json:"skipped"`
}

// Create writes the tree of src below root into w as an archive.
//
// The archive is reproducible: entries are written in lexical path order
// (a directory before its contents), with no owner or group (uid and gid 0,
// no names), modes normalized as extraction clamps them (0755 for directories
// and files with an execute bit, 0644 for other files), and, with ModTime set,
// one fixed time; the zstd and gzip encoders run single-threaded at fixed
// levels. Symlinks are stored as links with their target text (a Dir only holds
// relative, in-tree targets). Devices, FIFOs and sockets are skipped, and so are
// entries the source refuses to read (fs_permission_denied, for a Dir whose
// policy hides them): both are listed in CreateResult.Skipped. Names are
// relative to root, without a leading "./". Entries opts.Exclude names are
// left out unlisted.
//
// It fails (with nothing useful in w) on a limit (file_too_large wrapping
// ErrLimit), on any other read error, or when ctx ends.
func Create(ctx context.Context, w io.Writer, src Source, root string, opts CreateOptions) (*CreateResult, error) {
	lim := opts.Limits.withDefaults()
	format := opts.Format
	if format == FormatAuto {
		format = FormatTarZst
	}
	c := &creator{ctx: ctx, src: src, lim: lim, opts: opts, res: &CreateResult{Skipped: []Skipped{}}}
	var err error
	switch format {
	case FormatZip:
		zw := zip.NewWriter(w)
		c.add = c.zipAdder(zw)
		err = c.walk(root, "")
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	case FormatTar, FormatTarGz, FormatTarZst:
		out, closer, zerr := compressor(w, format)
		if zerr != nil {
			return nil, zerr
		}
		err = c.writeTar(out, closer, root)
	default:
		err = ErrFormat
	}
	if err != nil {
		return c.res, createError(root, err)
	}
	return c.res, nil
}

// compressor is the writer a tar archive in format goes through into w, and
// the closer that ends its stream (nil for none).
func compressor(w io.Writer, format Format) (io.Writer, io.Closer, error) {
	switch format {
	case FormatTarGz:
		gw, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		return gw, gw, nil
	case FormatTarZst:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, nil, err
		}
		return zw, zw, nil
	}
	return w, nil, nil
}

// writeTar writes the tree below root as a tar archive into out, then closes
// the compressed stream (closer, when not nil).
func (c *creator) writeTar(out io.Writer, closer io.Closer, root string) error {
	tw := tar.NewWriter(out)
	c.add = c.tarAdder(tw)
	err := c.walk(root, "")
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if closer != nil {
		if cerr := closer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// createError is Create's error for err: a *vfs.Error as it is, else one
// with the code its cause says (a limit, the format, the context's end).
func createError(root string, err error) error {
	var ve *vfs.Error
	if errors.As(err, &ve) {
		return err
	}
	code := vfs.CodeIO
	switch {
	case errors.Is(err, ErrLimit):
		code = vfs.CodeTooLarge
	case errors.Is(err, ErrFormat):
		code = vfs.CodeNotSupported
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = vfs.CodeCanceled
	}
	return &vfs.Error{Code: code, Op: "CreateArchive", Path: root, Err: err}
}

type creator struct {
	ctx   context.Context
	src   Source
	lim   Limits
	opts  CreateOptions
	res   *CreateResult
	total int64
	add   func(name string, fi fs.FileInfo, link string, open func() (io.ReadCloser, error)) error
}

func (c *creator) mtime(fi fs.FileInfo) time.Time {
	if !c.opts.ModTime.IsZero() {
		return c.opts.ModTime.UTC().Truncate(time.Second)
	}
	return fi.ModTime().UTC().Truncate(time.Second)
}

func normMode(fi fs.FileInfo) fs.FileMode {
	switch {
	case fi.IsDir():
		return 0o755
	case fi.Mode()&fs.ModeSymlink != 0:
		return 0o777
	case fi.Mode()&0o111 != 0:
		return 0o755
	}
	return 0o644
}

// walk adds the entries beneath srcPath (named name in the archive).
func (c *creator) walk(srcPath, name string) error {
	ents, err := c.src.ReadDir(c.ctx, srcPath)
	if err != nil {
		return err
	}
	for _, de := range ents {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		sp := path.Join(srcPath, de.Name())
		an := de.Name()
		if name != "" {
			an = name + "/" + de.Name()
		}
		if c.opts.Exclude != nil && c.opts.Exclude(an, de.Type()) {
			continue
		}
		fi, err := c.src.Lstat(c.ctx, sp)
		if err != nil {
			if c.refused(an, err, false) {
				continue
			}
			return err
		}
		c.res.Entries++
		if c.lim.MaxEntries >= 0 && c.res.Entries > c.lim.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrLimit, c.lim.MaxEntries)
		}
		if err := c.addEntry(sp, an, fi); err != nil {
			return err
		}
	}
	return nil
}

// refused records an as skipped when err is the source's refusal (taking it
// back out of the entries counted when uncount is set), and reports whether
// it was one.
func (c *creator) refused(an string, err error, uncount bool) bool {
	if vfs.CodeOf(err) != vfs.CodePermission {
		return false
	}
	if uncount {
		c.res.Entries--
	}
	c.res.Skipped = append(c.res.Skipped, Skipped{Path: an, Reason: "refused"})
	return true
}

// addEntry adds the entry at sp (fi), named an, by its type: a special file
// is skipped.
func (c *creator) addEntry(sp, an string, fi fs.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return c.addDir(sp, an, fi)
	case m&fs.ModeSymlink != 0:
		return c.addSymlink(sp, an, fi)
	case m.IsRegular():
		return c.addFile(sp, an, fi)
	}
	c.res.Entries--
	c.res.Skipped = append(c.res.Skipped, Skipped{Path: an, Reason: "special file"})
	return nil
}

// addDir adds a directory, then its contents; a directory the source
// refuses to list is skipped.
func (c *creator) addDir(sp, an string, fi fs.FileInfo) error {
	if err := c.add(an+"/", fi, "", nil); err != nil {
		return err
	}
	if err := c.walk(sp, an); err != nil && !c.refused(an, err, false) {
		return err
	}
	return nil
}

// addSymlink adds a symlink with its target text.
func (c *creator) addSymlink(sp, an string, fi fs.FileInfo) error {
	t, err := c.src.Readlink(c.ctx, sp)
	if err != nil {
		if c.refused(an, err, true) {
			return nil
		}
		return err
	}
	return c.add(an, fi, t, nil)
}

// addFile adds a regular file with its contents, within the size limits.
func (c *creator) addFile(sp, an string, fi fs.FileInfo) error {
	if c.lim.MaxEntryBytes >= 0 && fi.Size() > c.lim.MaxEntryBytes {
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrLimit, an, fi.Size(), c.lim.MaxEntryBytes)
	}
	if c.lim.MaxExtractedBytes >= 0 && c.total+fi.Size() > c.lim.MaxExtractedBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrLimit, c.lim.MaxExtractedBytes)
	}
	rc, err := c.src.Open(c.ctx, sp)
	if err != nil {
		if c.refused(an, err, true) {
			return nil
		}
		return err
	}
	err = c.add(an, fi, "", func() (io.ReadCloser, error) { return rc, nil })
	rc.Close()
	if err != nil {
		return err
	}
	c.total += fi.Size()
	c.res.Bytes += fi.Size()
	return nil
}

func (c *creator) tarAdder(tw *tar.Writer) func(string, fs.FileInfo, string, func() (io.ReadCloser, error)) error {
	return func(name string, fi fs.FileInfo, link string, open func() (io.ReadCloser, error)) error {
		h := &tar.Header{Name: name, Mode: int64(normMode(fi)), ModTime: c.mtime(fi), Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			h.Typeflag = tar.TypeDir
		case link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, link
		default:
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if open == nil {
			return nil
		}
		rc, err := open()
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(rc, fi.Size()))
		if err != nil {
			return err
		}
		if n != fi.Size() {
			return fmt.Errorf("%s changed size while it was archived", name)
		}
		return nil
	}
}

func (c *creator) zipAdder(zw *zip.Writer) func(string, fs.FileInfo, string, func() (io.ReadCloser, error)) error {
	return func(name string, fi fs.FileInfo, link string, open func() (io.ReadCloser, error)) error {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: c.mtime(fi)}
		mode := normMode(fi)
		switch {
		case fi.IsDir():
			h.Method = zip.Store
			mode |= fs.ModeDir
		case link != "":
			mode |= fs.ModeSymlink
		}
		h.SetMode(mode)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if link != "" {
			_, err := io.WriteString(fw, link)
			return err
		}
		if open == nil {
			return nil
		}
		rc, err := open()
		if err != nil {
			return err
		}
		n, err := io.Copy(fw, io.LimitReader(rc, fi.Size()))
		if err != nil {
			return err
		}
		if n != fi.Size() {
			return fmt.Errorf("%s changed size while it was archived", name)
		}
		return nil
	}
}
