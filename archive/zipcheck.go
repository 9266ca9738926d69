package archive

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
)

// A zip names each entry twice: in the central directory (what archive/zip
// and Extract read) and in the local header before its data (what a
// streaming reader reads). The checks here refuse any disagreement, so two
// tools never see different archives in one file, and read each entry's data
// through one path that verifies its CRC-32 and both sizes whatever the
// method.

var le = binary.LittleEndian

const (
	sigCentral = 0x02014b50
	sigLocal   = 0x04034b50
	sigEnd     = 0x06054b50
	sigEnd64   = 0x06064b50
	sigLoc64   = 0x07064b50
	flagDesc   = 0x8 // sizes and CRC-32 in a data descriptor after the data
)

// zipCorrupt is an ErrCorrupt naming the entry.
func zipCorrupt(name, format string, args ...any) error {
	return fmt.Errorf("%w: zip entry %q: %s", ErrCorrupt, printable(name), fmt.Sprintf(format, args...))
}

// localOffsets returns the offset of each file's local header, read from the
// central directory again, independently of archive/zip: the records must
// follow one another and agree with what archive/zip parsed.
func localOffsets(r io.ReaderAt, size int64, files []*zip.File) ([]int64, error) {
	dirOff, base, err := directoryStart(r, size)
	if err != nil {
		return nil, err
	}
	// archive/zip reads the directory at dirOff+base, or at dirOff when a
	// prefix was assumed but the records are there; take whichever holds them.
	var last error
	for _, b := range []int64{base, 0} {
		offs, err := walkCentral(r, dirOff+b, b, files)
		if err == nil {
			return offs, nil
		}
		last = err
		if base == 0 {
			break
		}
	}
	return nil, last
}

// directoryStart finds the end of central directory record (zip64 too) and
// returns the directory's offset as recorded and the offset of the zip within
// the file (data prepended to it, as archive/zip allows).
func directoryStart(r io.ReaderAt, size int64) (dirOff, base int64, err error) {
	n := min(size, 22+65535)
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
		return 0, 0, fmt.Errorf("%w: zip: %v", ErrCorrupt, err)
	}
	i := len(buf) - 22
	for ; i >= 0; i-- {
		if le.Uint32(buf[i:]) == sigEnd && i+22+int(le.Uint16(buf[i+20:])) <= len(buf) {
			break
		}
	}
	if i < 0 {
		return 0, 0, fmt.Errorf("%w: zip: no end of central directory", ErrCorrupt)
	}
	end := size - n + int64(i)
	e := buf[i:]
	dirSize, dirOff := int64(le.Uint32(e[12:])), int64(le.Uint32(e[16:]))
	if le.Uint16(e[10:]) == 0xffff || dirSize == 0xffffffff || dirOff == 0xffffffff {
		if end, dirSize, dirOff, err = directory64(r, end); err != nil {
			return 0, 0, err
		}
	}
	return dirOff, end - dirSize - dirOff, nil
}

// directory64 reads the zip64 end of central directory record the locator
// before end points at.
func directory64(r io.ReaderAt, end int64) (end64, dirSize, dirOff int64, err error) {
	var loc [20]byte
	var rec [56]byte
	bad := fmt.Errorf("%w: zip: bad zip64 end of central directory", ErrCorrupt)
	if end < 20 {
		return 0, 0, 0, bad
	}
	if _, err := r.ReadAt(loc[:], end-20); err != nil || le.Uint32(loc[:]) != sigLoc64 {
		return 0, 0, 0, bad
	}
	end64 = int64(le.Uint64(loc[8:]))
	if end64 < 0 || end64 >= end {
		return 0, 0, 0, bad
	}
	if _, err := r.ReadAt(rec[:], end64); err != nil || le.Uint32(rec[:]) != sigEnd64 {
		return 0, 0, 0, bad
	}
	dirSize, dirOff = int64(le.Uint64(rec[40:])), int64(le.Uint64(rec[48:]))
	if dirSize < 0 || dirOff < 0 {
		return 0, 0, 0, bad
	}
	return end64, dirSize, dirOff, nil
}

// walkCentral reads the central records from pos, one per file, checking
// each against archive/zip's File, and returns their local header offsets
// (plus base).
func walkCentral(r io.ReaderAt, pos, base int64, files []*zip.File) ([]int64, error) {
	offs := make([]int64, len(files))
	var h [46]byte
	for i, f := range files {
		if pos < 0 {
			return nil, fmt.Errorf("%w: zip: central directory out of range", ErrCorrupt)
		}
		if _, err := r.ReadAt(h[:], pos); err != nil || le.Uint32(h[:]) != sigCentral {
			return nil, zipCorrupt(f.Name, "central directory record not where it should be")
		}
		nl, el, cl := int64(le.Uint16(h[28:])), int64(le.Uint16(h[30:])), int64(le.Uint16(h[32:]))
		rest := make([]byte, nl+el+cl)
		if _, err := r.ReadAt(rest, pos+46); err != nil {
			return nil, zipCorrupt(f.Name, "central directory record truncated")
		}
		if string(rest[:nl]) != f.Name || !bytes.Equal(rest[nl:nl+el], f.Extra) || string(rest[nl+el:]) != f.Comment ||
			le.Uint16(h[8:]) != f.Flags || le.Uint16(h[10:]) != f.Method || le.Uint32(h[16:]) != f.CRC32 {
			return nil, zipCorrupt(f.Name, "central directory record read two ways")
		}
		off := int64(le.Uint32(h[42:]))
		if off == 0xffffffff {
			var ok bool
			if off, ok = zip64Offset(f.Extra, le.Uint32(h[24:]) == 0xffffffff, le.Uint32(h[20:]) == 0xffffffff); !ok {
				return nil, zipCorrupt(f.Name, "zip64 offset missing")
			}
		}
		offs[i] = off + base
		pos += 46 + nl + el + cl
	}
	return offs, nil
}

// zip64Offset reads the local header offset from a central record's zip64
// extra field, whose 8-byte values come in the order uncompressed size,
// compressed size, offset, each only if its 32-bit field is all ones.
func zip64Offset(extra []byte, usize, csize bool) (int64, bool) {
	for len(extra) >= 4 {
		tag, n := le.Uint16(extra), int(le.Uint16(extra[2:]))
		if len(extra) < 4+n {
			return 0, false
		}
		body := extra[4 : 4+n]
		extra = extra[4+n:]
		if tag != 1 {
			continue
		}
		skip := 0
		if usize {
			skip += 8
		}
		if csize {
			skip += 8
		}
		if len(body) < skip+8 {
			return 0, false
		}
		off := int64(le.Uint64(body[skip:]))
		return off, off >= 0
	}
	return 0, false
}

// checkLocal compares the local header at off with f's central record: the
// same name, method and flags, and (without a data descriptor) the same
// CRC-32 and sizes (with one, the data descriptor's CRC-32); and archive/zip's
// data offset must follow it.
func checkLocal(r io.ReaderAt, f *zip.File, off int64) error {
	var h [30]byte
	if _, err := r.ReadAt(h[:], off); err != nil || le.Uint32(h[:]) != sigLocal {
		return zipCorrupt(f.Name, "no local header where the central directory says")
	}
	nl, el := int64(le.Uint16(h[26:])), int64(le.Uint16(h[28:]))
	rest := make([]byte, nl+el)
	if _, err := r.ReadAt(rest, off+30); err != nil {
		return zipCorrupt(f.Name, "local header truncated")
	}
	if string(rest[:nl]) != f.Name {
		return zipCorrupt(f.Name, "the local header names %q", printable(string(rest[:nl])))
	}
	if le.Uint16(h[6:]) != f.Flags || le.Uint16(h[8:]) != f.Method {
		return zipCorrupt(f.Name, "the local header's flags or method differ from the central directory's")
	}
	if d, err := f.DataOffset(); err != nil || d != off+30+nl+el {
		return zipCorrupt(f.Name, "its data is not after its local header")
	}
	if f.Flags&flagDesc != 0 {
		return checkDescriptor(r, f, off+30+nl+el+int64(f.CompressedSize64))
	}
	return checkLocalSums(f, h[:], rest[nl:])
}

// checkLocalSums compares the CRC-32 and sizes of local header h (with its
// extra field, for zip64 sizes) with f's central record.
func checkLocalSums(f *zip.File, h, extra []byte) error {
	crc, csize, usize := le.Uint32(h[14:]), uint64(le.Uint32(h[18:])), uint64(le.Uint32(h[22:]))
	if csize == 0xffffffff || usize == 0xffffffff {
		u, c, ok := zip64Sizes(extra)
		if !ok {
			return zipCorrupt(f.Name, "local zip64 sizes missing")
		}
		csize, usize = c, u
	}
	if crc != f.CRC32 || csize != f.CompressedSize64 || usize != f.UncompressedSize64 {
		return zipCorrupt(f.Name, "the local header's CRC-32 or sizes differ from the central directory's")
	}
	return nil
}

// checkDescriptor reads the data descriptor at end (its signature optional,
// its sizes 4 or 8 bytes wide: the format leaves both to the writer) and
// compares its CRC-32 and sizes with the central directory's: one of the
// readings must agree.
func checkDescriptor(r io.ReaderAt, f *zip.File, end int64) error {
	var d [24]byte
	n, _ := r.ReadAt(d[:], end)
	for _, skip := range []int{0, 4} {
		if skip == 4 && le.Uint32(d[:]) != 0x08074b50 {
			break
		}
		b := d[skip:n]
		if len(b) < 12 || le.Uint32(b) != f.CRC32 {
			continue
		}
		if uint64(le.Uint32(b[4:])) == f.CompressedSize64 && uint64(le.Uint32(b[8:])) == f.UncompressedSize64 {
			return nil
		}
		if len(b) >= 20 && le.Uint64(b[4:]) == f.CompressedSize64 && le.Uint64(b[12:]) == f.UncompressedSize64 {
			return nil
		}
	}
	return zipCorrupt(f.Name, "its data descriptor differs from the central directory")
}

// zip64Sizes reads a local header's zip64 extra field: uncompressed, then
// compressed size.
func zip64Sizes(extra []byte) (usize, csize uint64, ok bool) {
	for len(extra) >= 4 {
		tag, n := le.Uint16(extra), int(le.Uint16(extra[2:]))
		if len(extra) < 4+n {
			return 0, 0, false
		}
		if tag == 1 && n >= 16 {
			return le.Uint64(extra[4:]), le.Uint64(extra[12:]), true
		}
		extra = extra[4+n:]
	}
	return 0, 0, false
}

// openZip returns a reader of f's data that checks, at its end, that exactly
// the declared uncompressed size came out, its CRC-32 (always, even a zero
// one archive/zip would skip), and for deflate and zstd that the decoder took
// exactly the compressed size (zstd data is first walked by [zstdFrames]).
// Close releases the decoder.
func openZip(f *zip.File) (io.ReadCloser, error) {
	raw, err := f.OpenRaw()
	if err != nil {
		return nil, zipCorrupt(f.Name, "%v", err)
	}
	v := &verified{f: f, crc: crc32.NewIEEE()}
	switch f.Method {
	case zip.Store:
		v.r = raw
	case zip.Deflate:
		v.in = &countingReader{r: bufio.NewReaderSize(raw, 32<<10)}
		fr := flate.NewReader(v.in)
		v.r, v.close = fr, fr.Close
	case zstdMethod:
		ra, ok := raw.(io.ReaderAt)
		if !ok {
			return nil, zipCorrupt(f.Name, "its compressed data cannot be walked")
		}
		if err := zstdFrames(ra, int64(f.CompressedSize64)); err != nil {
			return nil, zipCorrupt(f.Name, "%v", err)
		}
		v.in = &countingReader{r: bufio.NewReaderSize(raw, 32<<10)}
		zr, err := zstd.NewReader(v.in, zstd.WithDecoderMaxWindow(128<<20), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, zipCorrupt(f.Name, "%v", err)
		}
		v.r, v.close = zr, func() error { zr.Close(); return nil }
	default:
		return nil, zipCorrupt(f.Name, "unsupported method %d", f.Method)
	}
	return v, nil
}

// countingReader counts the compressed bytes a decoder took; it is an
// io.ByteReader, so the decoder takes no more than its stream.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

type verified struct {
	f     *zip.File
	r     io.Reader
	in    *countingReader // the compressed input of a deflated or zstd entry
	close func() error
	crc   hash.Hash32
	n     uint64
	err   error
}

func (v *verified) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.crc.Write(p[:n])
	v.n += uint64(n)
	if v.n > v.f.UncompressedSize64 {
		v.err = zipCorrupt(v.f.Name, "longer than its declared size")
		return 0, v.err
	}
	if err == io.EOF {
		err = v.atEnd()
	} else if err != nil {
		err = zipCorrupt(v.f.Name, "%v", err)
	}
	v.err = err
	return n, err
}

// atEnd checks the entry once its data ended.
func (v *verified) atEnd() error {
	switch {
	case v.n != v.f.UncompressedSize64:
		return zipCorrupt(v.f.Name, "shorter than its declared size")
	case v.crc.Sum32() != v.f.CRC32:
		return zipCorrupt(v.f.Name, "CRC-32 mismatch")
	case v.in != nil && v.in.n != int64(v.f.CompressedSize64):
		return zipCorrupt(v.f.Name, "its compressed data is %d bytes, not the %d declared", v.in.n, v.f.CompressedSize64)
	}
	return io.EOF
}

func (v *verified) Close() error {
	if v.close != nil {
		return v.close()
	}
	return nil
}

const (
	zstdMagic     = 0xfd2fb528
	zstdSkipMagic = 0x184d2a50 // the low 4 bits are free
)

// zstdFrames checks that the n compressed bytes of a zstd entry are zstd
// frames, one after another, ending exactly at n: no skippable frame (data
// a decoder skips, hidden from the extracted file), nothing after the last
// frame, no frame cut short. No bytes at all is an empty stream (an empty
// file, as some writers store it). It reads each frame and block header
// only, not the block contents, so it costs one small read per block (at
// most 128 KiB of data each).
func zstdFrames(r io.ReaderAt, n int64) error {
	for pos := int64(0); pos < n; {
		end, err := zstdFrame(r, pos, n)
		if err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// zstdFrame walks the zstd frame at pos (RFC 8878 section 3.1.1) and returns
// where it ends, at most n.
func zstdFrame(r io.ReaderAt, pos, n int64) (int64, error) {
	var h [5]byte
	if n-pos < 6 { // the shortest header: magic, descriptor, one more byte
		return 0, fmt.Errorf("zstd data ends inside a frame header")
	}
	if _, err := r.ReadAt(h[:], pos); err != nil {
		return 0, err
	}
	switch magic := le.Uint32(h[:]); {
	case magic&^0xf == zstdSkipMagic:
		return 0, fmt.Errorf("zstd skippable frame at %d", pos)
	case magic != zstdMagic:
		return 0, fmt.Errorf("no zstd frame at %d", pos)
	}
	fhd := h[4]
	if fhd&0x08 != 0 {
		return 0, fmt.Errorf("zstd frame header reserved bit set")
	}
	end, err := zstdBlocks(r, pos+4+zstdHeaderSize(fhd), n)
	if err != nil {
		return 0, err
	}
	if fhd&0x04 != 0 {
		end += 4 // the content checksum
	}
	if end > n {
		return 0, fmt.Errorf("zstd checksum past the compressed size")
	}
	return end, nil
}

// zstdHeaderSize is the size of a frame header after the magic, from its
// descriptor byte fhd.
func zstdHeaderSize(fhd byte) int64 {
	single := fhd&0x20 != 0
	size := int64(1) // the descriptor
	if !single {
		size++ // the window descriptor
	}
	size += []int64{0, 1, 2, 4}[fhd&3] // dictionary id
	fcs := []int64{0, 2, 4, 8}[fhd>>6] // frame content size
	if fcs == 0 && single {
		fcs = 1
	}
	return size + fcs
}

// zstdBlocks walks a frame's blocks from pos to its last and returns where
// that ends, at most n.
func zstdBlocks(r io.ReaderAt, pos, n int64) (int64, error) {
	for {
		var b [3]byte
		if n-pos < 3 {
			return 0, fmt.Errorf("zstd data ends inside a block header")
		}
		if _, err := r.ReadAt(b[:], pos); err != nil {
			return 0, err
		}
		bh := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		body := int64(bh >> 3)
		switch (bh >> 1) & 3 {
		case 1: // RLE: one byte, repeated
			body = 1
		case 3:
			return 0, fmt.Errorf("zstd block of reserved type")
		}
		pos += 3 + body
		if pos > n {
			return 0, fmt.Errorf("zstd block past the compressed size")
		}
		if bh&1 != 0 {
			return pos, nil
		}
	}
}
