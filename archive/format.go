package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Format is an archive format.
type Format int

// The formats.
const (
	FormatAuto   Format = iota // detect from the first bytes (Detect)
	FormatZip                  // zip (store, deflate and zstd methods)
	FormatTar                  // uncompressed tar (ustar, PAX, GNU)
	FormatTarGz                // gzip-compressed tar
	FormatTarZst               // zstd-compressed tar
)

func (f Format) String() string {
	switch f {
	case FormatAuto:
		return "auto"
	case FormatZip:
		return "zip"
	case FormatTar:
		return "tar"
	case FormatTarGz:
		return "tar.gz"
	case FormatTarZst:
		return "tar.zst"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat parses "zip", "tar", "tar.gz" (or "tgz"), "tar.zst" (or "tzst") and
// "auto".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return FormatAuto, nil
	case "zip":
		return FormatZip, nil
	case "tar":
		return FormatTar, nil
	case "tar.gz", "tgz":
		return FormatTarGz, nil
	case "tar.zst", "tzst", "tar.zstd":
		return FormatTarZst, nil
	}
	return 0, fmt.Errorf("archive: unknown format %q: %w", s, fs.ErrInvalid)
}

// FormatForName guesses a format from a file name's extension (FormatAuto when
// it cannot).
func FormatForName(name string) Format {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".zip"):
		return FormatZip
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return FormatTarGz
	case strings.HasSuffix(n, ".tar.zst"), strings.HasSuffix(n, ".tzst"):
		return FormatTarZst
	case strings.HasSuffix(n, ".tar"):
		return FormatTar
	}
	return FormatAuto
}

// Detect names the format of an archive from its first bytes (at least 262 for
// an uncompressed tar). It returns FormatAuto if it recognizes none.
func Detect(head []byte) Format {
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return FormatZip
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return FormatTarGz
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return FormatTarZst
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return FormatTar
	}
	return FormatAuto
}

// kind is what an entry is.
type kind uint8

const (
	kindFile kind = iota
	kindDir
	kindSymlink
	kindHardlink
	kindDevice
	kindOther
)

// entry is one archive entry as the readers present it, before any decision.
type entry struct {
	raw     string
	kind    kind
	mode    fs.FileMode
	size    int64 // declared uncompressed size
	mtime   time.Time
	link    string // symlink target, hard-link target name
	sparse  bool
	crypt   bool
	method  string // an unsupported compression method, else ""
	zipFile *zip.File
}

// Sentinel causes, wrapped by the *vfs.Error values Extract returns; test with
// errors.Is.
var (
	// ErrCorrupt: the archive is malformed, truncated, or fails a checksum
	// (zip CRC-32, gzip CRC-32, zstd XXH64) or a declared size.
	ErrCorrupt = errors.New("archive is corrupt or truncated")
	// ErrOverlap: two zip entries share bytes of the archive (the overlapping
	// zip bomb), or an entry's data lies outside the archive.
	ErrOverlap = errors.New("zip entries overlap")
	// ErrLimit: a Limits bound was exceeded.
	ErrLimit = errors.New("archive exceeds a limit")
	// ErrFormat: the format is unknown or unsupported.
	ErrFormat = errors.New("unknown archive format")
	// ErrRefused: Options.Strict and an entry was filtered.
	ErrRefused = errors.New("archive has an entry that would be filtered")
)

// counter counts bytes read through it and fails past a limit.
type counter struct {
	r     io.Reader
	n     int64
	limit int64 // < 0: none
	ctx   context.Context
}

var errArchiveLimit = errors.New("archive bytes limit")

func (c *counter) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.limit >= 0 && c.n > c.limit {
		return n, errArchiveLimit
	}
	return n, err
}

// tarStream returns the decompressed tar stream of r for format f, and a
// function that checks the compressed stream's trailer (checksum) once the tar
// has ended, and releases the decoder.
func tarStream(r io.Reader, f Format) (io.Reader, func() error, error) {
	switch f {
	case FormatTar:
		return r, func() error { return nil }, nil
	case FormatTarGz:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
		zr.Multistream(false)
		return zr, func() error {
			_, err := io.Copy(io.Discard, zr)
			zr.Close()
			return err
		}, nil
	case FormatTarZst:
		zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(128<<20),
			zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		return zr, func() error {
			_, err := io.Copy(io.Discard, zr)
			zr.Close()
			return err
		}, nil
	}
	return nil, nil, ErrFormat
}

// tarEntry converts a tar header.
func tarEntry(h *tar.Header) entry {
	e := entry{raw: h.Name, mode: fs.FileMode(h.Mode) & fs.ModePerm, size: h.Size, mtime: h.ModTime, link: h.Linkname}
	switch h.Typeflag {
	case tar.TypeReg, '\x00': // '\x00' is the pre-POSIX regular file
		e.kind = kindFile
	case tar.TypeDir:
		e.kind = kindDir
	case tar.TypeSymlink:
		e.kind = kindSymlink
	case tar.TypeLink:
		e.kind = kindHardlink
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		e.kind = kindDevice
	case tar.TypeGNUSparse:
		e.kind, e.sparse = kindFile, true
	default:
		e.kind = kindOther
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			e.sparse = true
		}
	}
	return e
}

// zipEntries lists a zip's entries, in central-directory order, after checking
// that each local header agrees with the central directory (checkLocal), no
// two entries (headers and data) overlap and all of them lie inside the
// archive.
func zipEntries(src io.ReaderAt, zr *zip.Reader, size int64) ([]entry, error) {
	spans := make([]zipSpan, 0, len(zr.File))
	out := make([]entry, 0, len(zr.File))
	offs, err := localOffsets(src, size, zr.File)
	if err != nil {
		return nil, err
	}
	for i, f := range zr.File {
		if f.UncompressedSize64 > 1<<62 || f.CompressedSize64 > 1<<62 {
			return nil, fmt.Errorf("%w: entry size out of range", ErrCorrupt)
		}
		sp, err := spanOf(f, offs[i], size)
		if err != nil {
			return nil, err
		}
		spans = append(spans, sp)
		out = append(out, zipEntry(f))
	}
	if err := checkOverlap(spans); err != nil {
		return nil, err
	}
	for i, f := range zr.File {
		if err := checkLocal(src, f, offs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// zipEntry is the entry zip file f describes.
func zipEntry(f *zip.File) entry {
	e := entry{raw: f.Name, size: int64(f.UncompressedSize64), mtime: f.Modified, zipFile: f}
	m := f.Mode()
	e.mode = m & fs.ModePerm
	switch {
	case m.IsDir() || strings.HasSuffix(f.Name, "/"):
		e.kind = kindDir
	case m&fs.ModeSymlink != 0:
		e.kind = kindSymlink
	case m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0:
		e.kind = kindDevice
	case m.IsRegular():
		e.kind = kindFile
	default:
		e.kind = kindOther
	}
	if f.Flags&0x1 != 0 {
		e.crypt = true
	}
	switch f.Method {
	case zip.Store, zip.Deflate, zstdMethod:
	default:
		e.method = fmt.Sprint(f.Method)
	}
	return e
}

// zipSpan is the bytes of an archive one zip entry takes, its local header
// and data: [start, end).
type zipSpan struct{ start, end int64 }

// spanOf is the span of zip file f, whose local header is at start, checked
// to lie inside an archive of size bytes.
func spanOf(f *zip.File, start, size int64) (zipSpan, error) {
	off, err := f.DataOffset()
	if err != nil {
		return zipSpan{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	end := off + int64(f.CompressedSize64)
	if f.Flags&flagDesc != 0 {
		end += 12 // the data descriptor, at its shortest
	}
	if start < 0 || off < start || end < off || end > size {
		return zipSpan{}, fmt.Errorf("%w: entry %q's data lies outside the archive", ErrOverlap, printable(f.Name))
	}
	return zipSpan{start, end}, nil
}

// checkOverlap refuses spans of which two share bytes.
func checkOverlap(spans []zipSpan) error {
	slices.SortFunc(spans, func(a, b zipSpan) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return fmt.Errorf("%w: two entries share bytes %d-%d", ErrOverlap, spans[i].start, spans[i-1].end)
		}
	}
	return nil
}

// zstdMethod is the zip method number of Zstandard (APPNOTE 4.4.5).
const zstdMethod = 93

// newZipReader reads a zip's central directory. Entries' data is read with
// openZip, which verifies it, never with zip.File.Open.
func newZipReader(r io.ReaderAt, size int64) (*zip.Reader, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: zip: %v", ErrCorrupt, err)
	}
	return zr, nil
}
