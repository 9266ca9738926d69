package pack

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	kzlib "github.com/klauspost/compress/zlib"
)

// readEntry reads the entry at off and returns its compressed data and parsed
// header. An entry of at most limit bytes is read whole in one positioned read
// and checked against its index CRC; a larger one has only its header read, and
// its data is nil (inflateEntry reads it).
func (p *pack) readEntry(off int64, limit int64) ([]byte, entry, error) {
	i, end := p.entryAt(off)
	if i < 0 {
		return nil, entry{}, Corrupt("no entry at offset %d", off)
	}
	if end-off > limit {
		var hb [maxHeader]byte
		e, err := p.header(off, hb[:])
		return nil, e, err
	}
	buf := make([]byte, end-off)
	if _, err := p.f.ReadAt(buf, off); err != nil {
		return nil, entry{}, err
	}
	if crc32.ChecksumIEEE(buf) != p.crcs[i] {
		return nil, entry{}, Corrupt("entry at offset %d does not match its index CRC", off)
	}
	e, err := p.parseHeader(buf[:min(len(buf), maxHeader)], off)
	if err != nil {
		return nil, entry{}, err
	}
	return buf[e.dataOff-off:], e, nil
}

// inflateEntry inflates entry e at off, whose compressed data is raw (nil: read
// it now, whole).
func (p *pack) inflateEntry(raw []byte, e entry, off int64) ([]byte, error) {
	if raw == nil {
		var err error
		if raw, _, err = p.readEntry(off, e.end-off); err != nil {
			return nil, err
		}
	}
	inflate := inflateAll
	if p.lib {
		inflate = libInflateAll
	}
	out, err := inflate(raw, e.size)
	if err != nil {
		return nil, Corrupt("entry at offset %d: %v", off, err)
	}
	return out, nil
}

// inflater is a pooled compress/zlib reader over an input: deltaTargetSize reads
// the first bytes of a delta with it (whole entries go through inflateAll).
type inflater struct {
	zr  io.ReadCloser
	src io.Reader
}

var inflaters sync.Pool

type byteSource interface {
	io.Reader
	io.ByteReader
}

// newInflater returns a zlib reader of r (buffered by bufSize bytes unless r is a
// byte reader). release returns it to the pool.
func newInflater(r io.Reader, bufSize int) (*inflater, error) {
	var src byteSource
	if br, ok := r.(byteSource); ok {
		src = br
	} else {
		src = bufioReader(r, bufSize)
	}
	if z, ok := inflaters.Get().(*inflater); ok {
		if err := z.zr.(zlib.Resetter).Reset(src, nil); err != nil {
			return nil, err
		}
		z.src = src
		return z, nil
	}
	zr, err := zlib.NewReader(src)
	if err != nil {
		return nil, err
	}
	return &inflater{zr: zr, src: src}, nil
}

func (z *inflater) Read(b []byte) (int, error) { return z.zr.Read(b) }

func (z *inflater) release() {
	z.src = nil
	inflaters.Put(z)
}

// inflateAll inflates the zlib stream raw, which must produce exactly size bytes
// and end there, its checksum verified. It allocates size bytes, and refuses
// before allocating a size that raw cannot produce.
func inflateAll(raw []byte, size int64) ([]byte, error) {
	// Deflate expands at most 1032:1: a larger claimed size is a corrupt header,
	// refused before allocating for it.
	if size > int64(len(raw))*1032+64 {
		return nil, fmt.Errorf("entry claims %d bytes from %d compressed", size, len(raw))
	}
	out := make([]byte, size)
	if err := inflateInto(out, raw); err != nil {
		return nil, fmt.Errorf("inflating %d bytes: %w", size, err)
	}
	return out, nil
}

// libInflateAll is inflateAll through klauspost/compress's zlib reader, for
// WithLibraryInflater: the same checks (the size, exactly, then the checksum).
func libInflateAll(raw []byte, size int64) ([]byte, error) {
	if size > int64(len(raw))*1032+64 {
		return nil, fmt.Errorf("entry claims %d bytes from %d compressed", size, len(raw))
	}
	br := bytes.NewReader(raw)
	zr, _ := libInflaters.Get().(io.ReadCloser)
	var err error
	if zr == nil {
		zr, err = kzlib.NewReader(br)
	} else {
		err = zr.(kzlib.Resetter).Reset(br, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("inflating %d bytes: %w", size, err)
	}
	defer libInflaters.Put(zr)
	out := make([]byte, size)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("inflating %d bytes: %w", size, err)
	}
	// The stream must end here: reading on verifies the checksum.
	var one [1]byte
	if n, err := zr.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errors.New("stream longer than its entry's size")
		}
		return nil, fmt.Errorf("inflating %d bytes: %w", size, err)
	}
	return out, nil
}

var libInflaters sync.Pool

func bufioReader(r io.Reader, size int) *bufio.Reader {
	return bufio.NewReaderSize(r, max(size, 16))
}
