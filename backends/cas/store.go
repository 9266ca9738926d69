package cas

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Blob file layout: one byte saying how the rest is stored, then the bytes.
const (
	tagRaw  byte = 0
	tagZstd byte = 1
)

// tmpPrefix starts the names of blob files being written in a fan-out
// directory; no digest starts so.
const tmpPrefix = ".tmp-"

// smallBlob is the size up to which Put and ReadBlob hold a blob in memory whole;
// larger blobs are streamed through temporary files and readers.
const smallBlob = 4 << 20

// ErrCorrupt is matched (errors.Is) by every error reporting a stored blob whose
// bytes do not hash to its digest, are truncated, or cannot be decompressed.
var ErrCorrupt = errors.New("cas: corrupt blob")

// ErrMissing is matched by every error reporting a blob the store does not hold.
var ErrMissing = errors.New("cas: blob missing")

// ErrMismatch is matched by the error of PutDigest when the bytes given do not
// hash to the digest claimed for them.
var ErrMismatch = errors.New("cas: digest mismatch")

// CorruptError reports a stored blob that failed verification. It matches
// ErrCorrupt.
type CorruptError struct {
	Digest Digest
	Reason string
}

func (e *CorruptError) Error() string {
	return "cas: blob " + e.Digest.String() + " is corrupt: " + e.Reason
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// hostless strips the host path from an error of package os (keeping its
// errno, which errors.Is still matches): store errors reach guests through the
// FS, and the store's location is not theirs to see.
func hostless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func missing(d Digest) error { return fmt.Errorf("%w: %s", ErrMissing, d) }

// Store is a local content-addressed blob store in one host directory. The
// empty blob (EmptyDigest, also the empty Directory) is always present, as on
// every REAPI server, whether or not a file holds it. Blobs are
// kept under blobs/XX/HASH, each prefixed by one byte saying whether the rest is
// the content itself or a zstd frame of it: a blob is compressed (klauspost/compress,
// fastest level) only when that makes it smaller. Every blob is written to a
// temporary file in the same directory tree and renamed into place, so a reader
// or a crash never sees a partial blob under its final name; every read checks
// the bytes against the digest (size and SHA-256) and reports a *CorruptError
// rather than return wrong bytes (a streamed read reports it at the end, see
// OpenBlob). Memory is bounded: blobs over 4 MiB are hashed, compressed and
// verified as streams.
//
// Durability: blobs are not fsynced one by one; Sync makes everything written so
// far durable with one syncfs(2) (one fsync per file elsewhere), and SaveRoot calls it
// before it names a root, so a named root never refers to a blob a crash could
// lose. A blob left torn by a crash before any Sync is found by Verify and
// replaced by the next Put of the same content.
//
// A Store is safe for concurrent use by any number of goroutines, and by several
// processes: ingests hold a shared lock (also a shared flock(2) on the store's
// lock file) that garbage collection takes exclusively.
type Store struct {
	dir string
	enc *zstd.Encoder // EncodeAll only: safe for concurrent use
	dec *zstd.Decoder // DecodeAll only

	gc     sync.RWMutex // shared: an ingest in progress; exclusive: a GC sweep
	lockMu sync.Mutex   // guards the shared flock count
	shared int
	lockF  *os.File

	reads      atomic.Int64 // blob files opened for reading (ReadBlob, OpenBlob), for tests
	dirEncodes atomic.Int64 // directories a snapshot encoded, for tests
}

// OpenStore opens (creating if needed) the store in directory dir.
func OpenStore(dir string) (*Store, error) {
	for _, sub := range []string{"blobs", "tmp", "roots", "pins", "statcache"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("cas: open store: %w", err)
		}
	}
	// The 256 fan-out directories, made once: blobs are written in their own
	// (a temporary name, then a rename), which spreads the directory locks
	// parallel writers take.
	if _, err := os.Stat(filepath.Join(dir, "blobs", "ff")); err != nil {
		for i := range 256 {
			if err := os.MkdirAll(filepath.Join(dir, "blobs", fmt.Sprintf("%02x", i)), 0o700); err != nil {
				return nil, fmt.Errorf("cas: open store: %w", err)
			}
		}
	}
	lf, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cas: open store: %w", err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		lf.Close()
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(2*smallBlob))
	if err != nil {
		lf.Close()
		return nil, err
	}
	return &Store{dir: dir, enc: enc, dec: dec, lockF: lf}, nil
}

// Dir returns the store's host directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the store's lock file. Blobs already written stay.
func (s *Store) Close() error {
	s.dec.Close()
	return s.lockF.Close()
}

func (s *Store) blobPath(d Digest) string {
	h := d.Hex()
	return filepath.Join(s.dir, "blobs", h[:2], h)
}

// ingest holds the store's shared lock for the duration of an ingest; the
// returned function releases it.
func (s *Store) ingest() func() {
	s.gc.RLock()
	s.lockMu.Lock()
	if s.shared == 0 {
		flock(s.lockF, false)
	}
	s.shared++
	s.lockMu.Unlock()
	return func() {
		s.lockMu.Lock()
		s.shared--
		if s.shared == 0 {
			unflock(s.lockF)
		}
		s.lockMu.Unlock()
		s.gc.RUnlock()
	}
}

// Has reports whether the store holds blob d (by its file; use VerifyBlob to check
// its bytes). A blob found is marked as used now (its time is refreshed when it
// is older than 10 seconds), so a garbage collection whose grace period is at
// least that keeps it.
func (s *Store) Has(d Digest) (bool, error) {
	if d == EmptyDigest {
		return true, nil // as on every REAPI server: the empty blob is always there
	}
	p := s.blobPath(d)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cas: stat blob %s: %w", d, hostless(err))
	}
	if fi.Size() == 0 {
		// Torn by a crash: not a blob.
		return false, nil
	}
	now := time.Now()
	if now.Sub(fi.ModTime()) > 10*time.Second {
		os.Chtimes(p, time.Time{}, now)
	}
	return true, nil
}

// PutBytes stores b and returns its digest.
func (s *Store) PutBytes(ctx context.Context, b []byte) (Digest, error) {
	defer s.ingest()()
	return s.putBytes(DigestOf(b), b)
}

func (s *Store) putBytes(d Digest, b []byte) (Digest, error) {
	if ok, err := s.Has(d); err != nil || ok {
		return d, err
	}
	var body []byte
	if len(b) >= 64 {
		z := s.enc.EncodeAll(b, make([]byte, 1, 1+len(b)/2+64))
		if len(z) < 1+len(b) {
			z[0] = tagZstd
			body = z
		}
	}
	if body == nil {
		body = make([]byte, 1+len(b))
		body[0] = tagRaw
		copy(body[1:], b)
	}
	return d, s.commit(d, func(w io.Writer) error { _, err := w.Write(body); return err })
}

// commit writes a blob file for d through write into a temporary file and
// renames it into place.
func (s *Store) commit(d Digest, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(s.blobPath(d)), tmpPrefix)
	if err != nil {
		return fmt.Errorf("cas: write blob %s: %w", d, hostless(err))
	}
	tmp := f.Name()
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.place(tmp, d)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cas: write blob %s: %w", d, hostless(err))
	}
	return nil
}

// place renames the finished temporary file tmp to d's name.
func (s *Store) place(tmp string, d Digest) error {
	final := s.blobPath(d)
	err := os.Rename(tmp, final)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(final), 0o700); err == nil {
			err = os.Rename(tmp, final)
		}
	}
	return err
}

// Put reads r to its end, stores its bytes and returns their digest. Memory is
// bounded whatever the size: a blob over 4 MiB is written to a temporary file
// while it is hashed, then compressed from there if that saves space.
func (s *Store) Put(ctx context.Context, r io.Reader) (Digest, error) {
	defer s.ingest()()
	return s.put(ctx, r, nil, -1)
}

// PutDigest stores the bytes read from r as blob d, checking them against d: bytes
// that do not match (size or hash) store nothing and fail with an error wrapping
// ErrMismatch. A blob the store already holds is not read again.
func (s *Store) PutDigest(ctx context.Context, d Digest, r io.Reader) error {
	defer s.ingest()()
	if ok, err := s.Has(d); err != nil || ok {
		return err
	}
	_, err := s.put(ctx, io.LimitReader(r, d.Size+1), &d, d.Size)
	return err
}

// put stores what r holds; hint, when not negative, is its expected size (the
// first buffer is sized for it).
func (s *Store) put(ctx context.Context, r io.Reader, want *Digest, hint int64) (Digest, error) {
	size := 64 << 10
	if hint >= 0 {
		size = int(min(hint, smallBlob)) + 1
	}
	buf := getBuf(size)
	defer putBuf(buf)
	small, err := readUpTo(r, (*buf)[:0], smallBlob+1)
	if err != nil {
		return Digest{}, err
	}
	if len(small) <= smallBlob {
		d := DigestOf(small)
		if want != nil && d != *want {
			return Digest{}, fmt.Errorf("%w: got %s for %s", ErrMismatch, d, *want)
		}
		return s.putBytes(d, small)
	}
	return s.putLarge(ctx, r, small, want)
}

// putLarge stores a blob larger than smallBlob, whose first bytes are small
// and the rest what r holds: raw to a temporary file while hashing, then
// placed (compressed when that pays).
func (s *Store) putLarge(ctx context.Context, r io.Reader, small []byte, want *Digest) (Digest, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "blob-")
	if err != nil {
		return Digest{}, fmt.Errorf("cas: write blob: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	d, err := writeRaw(ctx, f, small, r)
	if err != nil {
		f.Close()
		return Digest{}, fmt.Errorf("cas: write blob: %w", err)
	}
	if want != nil && d != *want {
		f.Close()
		return Digest{}, fmt.Errorf("%w: got %s for %s", ErrMismatch, d, *want)
	}
	if ok, err := s.Has(d); err != nil || ok {
		f.Close()
		return d, err
	}
	return s.placeLarge(ctx, f, tmp, d, small)
}

// writeRaw writes the raw blob file f (its tag, small, then the rest of r)
// and returns the blob's digest.
func writeRaw(ctx context.Context, f *os.File, small []byte, r io.Reader) (Digest, error) {
	h := newHasher()
	bw := bufio.NewWriterSize(f, 256<<10)
	bw.WriteByte(tagRaw)
	w := io.MultiWriter(bw, h)
	_, err := w.Write(small)
	if err == nil {
		_, err = copyCtx(ctx, w, r)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return Digest{}, err
	}
	return h.digest(), nil
}

// placeLarge places the raw blob file f (named tmp) as blob d, or a zstd
// copy of it when its first MiB (in small) compresses, and closes f.
func (s *Store) placeLarge(ctx context.Context, f *os.File, tmp string, d Digest, small []byte) (Digest, error) {
	// Compress only what compresses: probe the first MiB.
	probe := small[:min(len(small), 1<<20)]
	if z := s.enc.EncodeAll(probe, nil); len(z) < len(probe)*15/16 {
		if zt, ok := s.compressFile(ctx, f, d.Size); ok {
			f.Close()
			if err := s.place(zt, d); err != nil {
				os.Remove(zt)
				return Digest{}, fmt.Errorf("cas: write blob %s: %w", d, hostless(err))
			}
			return d, nil
		}
	}
	if err := f.Close(); err != nil {
		return Digest{}, fmt.Errorf("cas: write blob %s: %w", d, hostless(err))
	}
	if err := s.place(tmp, d); err != nil {
		return Digest{}, fmt.Errorf("cas: write blob %s: %w", d, hostless(err))
	}
	return d, nil
}

// compressFile writes a zstd blob file from the raw blob file f (header at 0) and
// returns its temporary name when it is smaller than the raw one.
func (s *Store) compressFile(ctx context.Context, f *os.File, size int64) (string, bool) {
	zf, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "zblob-")
	if err != nil {
		return "", false
	}
	name := zf.Name()
	fail := func() (string, bool) { zf.Close(); os.Remove(name); return "", false }
	bw := bufio.NewWriterSize(zf, 256<<10)
	bw.WriteByte(tagZstd)
	zw, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return fail()
	}
	if _, err := copyCtx(ctx, zw, io.NewSectionReader(f, 1, size)); err != nil {
		zw.Close()
		return fail()
	}
	if zw.Close() != nil || bw.Flush() != nil {
		return fail()
	}
	fi, err := zf.Stat()
	if err != nil || fi.Size() >= 1+size {
		return fail()
	}
	if zf.Close() != nil {
		os.Remove(name)
		return "", false
	}
	return name, true
}

// bufPool recycles read buffers of up to 1 MiB between puts.
var bufPool sync.Pool

func getBuf(n int) *[]byte {
	if b, ok := bufPool.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, max(n, 4<<10))
	return &b
}

func putBuf(b *[]byte) {
	if cap(*b) <= 1<<20 {
		bufPool.Put(b)
	}
}

func readUpTo(r io.Reader, buf []byte, n int) ([]byte, error) {
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func copyCtx(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := r.Read(buf)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// ReadBlob returns the whole of blob d, verified: its bytes are returned only if
// they hash to d. A blob larger than max (max < 0: no limit) fails without being
// read. A missing blob wraps ErrMissing; a corrupt one is a *CorruptError.
func (s *Store) ReadBlob(ctx context.Context, d Digest, max int64) ([]byte, error) {
	if max >= 0 && d.Size > max {
		return nil, fmt.Errorf("cas: blob %s is larger than %d bytes", d, max)
	}
	if d == EmptyDigest {
		return []byte{}, nil
	}
	if d.Size <= smallBlob {
		s.reads.Add(1)
		raw, err := os.ReadFile(s.blobPath(d))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, missing(d)
		}
		if err != nil {
			return nil, fmt.Errorf("cas: read blob %s: %w", d, hostless(err))
		}
		if len(raw) == 0 {
			return nil, &CorruptError{d, "empty blob file"}
		}
		var b []byte
		switch raw[0] {
		case tagRaw:
			b = raw[1:]
		case tagZstd:
			b, err = s.dec.DecodeAll(raw[1:], make([]byte, 0, d.Size))
			if err != nil {
				return nil, &CorruptError{d, "cannot decompress: " + err.Error()}
			}
		default:
			return nil, &CorruptError{d, "unknown blob format"}
		}
		if int64(len(b)) != d.Size {
			return nil, &CorruptError{d, fmt.Sprintf("holds %d bytes", len(b))}
		}
		if sha256.Sum256(b) != d.Hash {
			return nil, &CorruptError{d, "content does not match its hash"}
		}
		return b, nil
	}
	rc, err := s.OpenBlob(ctx, d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out bytes.Buffer
	out.Grow(int(d.Size))
	if _, err := copyCtx(ctx, &out, rc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// OpenBlob opens blob d for streaming. The reader returns d.Size bytes and then
// io.EOF only if they hashed to d; otherwise its last Read (the one that would
// return EOF) fails with a *CorruptError, as does any Read once the stream is
// longer or shorter than d.Size. Bytes already returned before that point are
// not retracted: a caller that must not act on unverified bytes reads to EOF
// first (ReadBlob does). Memory stays bounded (a few hundred KiB) for any size.
func (s *Store) OpenBlob(ctx context.Context, d Digest) (io.ReadCloser, error) {
	if d == EmptyDigest {
		return io.NopCloser(strings.NewReader("")), nil
	}
	s.reads.Add(1)
	f, err := os.Open(s.blobPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missing(d)
	}
	if err != nil {
		return nil, fmt.Errorf("cas: open blob %s: %w", d, hostless(err))
	}
	var tag [1]byte
	if _, err := io.ReadFull(f, tag[:]); err != nil {
		f.Close()
		return nil, &CorruptError{d, "empty blob file"}
	}
	v := &verifier{d: d, h: sha256.New(), f: f}
	switch tag[0] {
	case tagRaw:
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cas: open blob %s: %w", d, hostless(err))
		}
		if fi.Size() != 1+d.Size {
			f.Close()
			return nil, &CorruptError{d, fmt.Sprintf("holds %d bytes", fi.Size()-1)}
		}
		v.r = bufio.NewReaderSize(f, 64<<10)
	case tagZstd:
		zr, err := zstd.NewReader(bufio.NewReaderSize(f, 64<<10), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			f.Close()
			return nil, &CorruptError{d, "cannot decompress: " + err.Error()}
		}
		v.r, v.z = zr, zr
	default:
		f.Close()
		return nil, &CorruptError{d, "unknown blob format"}
	}
	return v, nil
}

// verifier hashes a blob as it is read and checks it at the end.
type verifier struct {
	d Digest
	h interface {
		Write([]byte) (int, error)
		Sum([]byte) []byte
	}
	f   *os.File
	z   *zstd.Decoder
	r   io.Reader
	n   int64
	err error
}

func (v *verifier) Read(b []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if rem := v.d.Size - v.n; int64(len(b)) > rem+1 {
		b = b[:rem+1] // read at most one byte past the end, to see it is the end
	}
	n, err := v.r.Read(b)
	v.n += int64(n)
	if v.n > v.d.Size {
		v.err = &CorruptError{v.d, "holds more bytes than its size"}
		return 0, v.err
	}
	v.h.Write(b[:n])
	switch {
	case err == io.EOF:
		if v.n != v.d.Size {
			v.err = &CorruptError{v.d, fmt.Sprintf("holds %d bytes", v.n)}
		} else if !bytes.Equal(v.h.Sum(nil), v.d.Hash[:]) {
			v.err = &CorruptError{v.d, "content does not match its hash"}
		} else {
			v.err = io.EOF
		}
		if v.err != io.EOF {
			return 0, v.err
		}
		return n, io.EOF
	case err != nil:
		if v.z != nil {
			v.err = &CorruptError{v.d, "cannot decompress: " + err.Error()}
		} else {
			v.err = fmt.Errorf("cas: read blob %s: %w", v.d, hostless(err))
		}
		return 0, v.err
	}
	return n, nil
}

func (v *verifier) Close() error {
	if v.z != nil {
		v.z.Close()
	}
	return v.f.Close()
}

// Sync makes every blob and root written so far durable.
func (s *Store) Sync() error { return syncDir(s.dir) }
