package archive

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// stage holds the data of accepted file entries between the manifest pass and
// the merge: in memory up to a budget, then in files of a private 0700
// directory named by entry number (never by an archive name), removed by close.
type stage struct {
	base   string // where to make the directory ("" : os.TempDir())
	dir    string // made on first spill
	budget int64  // memory left; < 0: always spill
	blobs  []blob
}

type blob struct {
	data []byte
	file string
	size int64
}

// put reads exactly size bytes from r into the stage and returns their index.
// Reading more or fewer than size is ErrCorrupt (a declared size that lies).
func (s *stage) put(r io.Reader, size int64) (int, error) {
	b := blob{size: size}
	if s.budget >= size {
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, sizeErr(err)
		}
		if err := atEOF(r); err != nil {
			return 0, err
		}
		s.budget -= size
		b.data = buf
	} else {
		if s.dir == "" {
			d, err := os.MkdirTemp(s.base, "capfs-extract-")
			if err != nil {
				return 0, err
			}
			s.dir = d // MkdirTemp makes it 0700
		}
		name := filepath.Join(s.dir, strconv.Itoa(len(s.blobs)))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(f, io.LimitReader(r, size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, sizeErr(err)
		}
		if n != size {
			return 0, fmt.Errorf("%w: an entry is shorter than its declared size", ErrCorrupt)
		}
		if err := atEOF(r); err != nil {
			return 0, err
		}
		b.file = name
	}
	s.blobs = append(s.blobs, b)
	return len(s.blobs) - 1, nil
}

// atEOF checks that r has nothing past the declared size, which also makes the
// zip reader verify the entry's CRC-32.
func atEOF(r io.Reader) error {
	var one [1]byte
	n, err := r.Read(one[:])
	for n == 0 && err == nil {
		n, err = r.Read(one[:])
	}
	if n > 0 {
		return fmt.Errorf("%w: an entry is longer than its declared size", ErrCorrupt)
	}
	if err != io.EOF {
		return sizeErr(err)
	}
	return nil
}

func sizeErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: an entry is shorter than its declared size", ErrCorrupt)
	}
	if err == errArchiveLimit {
		return err
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
}

// open returns a reader of blob i's data.
func (s *stage) open(i int) (io.ReadCloser, error) {
	b := s.blobs[i]
	if b.file == "" {
		return io.NopCloser(bytes.NewReader(b.data)), nil
	}
	return os.Open(b.file)
}

func (s *stage) close() {
	s.blobs = nil
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}
