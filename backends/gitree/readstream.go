package gitree

import (
	"io"
	"sort"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// Streaming large blobs. A blob over the stream threshold is not loaded at
// OpenFile; its reads go to a blobSource chosen at the first read:
//
//   - packedBlob, for a blob stored whole (not as a delta) in a pack: the entry's
//     zlib stream is inflated on demand through a sliding window, and the
//     decoder records checkpoints (the input bit and the last 32 KiB of output
//     at a deflate block boundary) about every 1/64 of the blob, at least 256
//     KiB apart. A read at any offset restarts from the nearest checkpoint at or
//     before it, or carries on from where the previous read stopped, whichever
//     is closer, so it inflates at most about a 64th of the blob (or 256 KiB,
//     plus the rest of a deflate block) more than it returns once the region was
//     decoded once. The first read past the decoded region inflates up to it.
//     Checkpoints are shared by every open file of the same blob, for the last 8
//     blobs opened streamed on an FS, each holding at most 128 of them (32 KiB
//     each: 4 MiB).
//   - memBlob, for a deltified blob: the delta chain is resolved once, at the
//     first read, into memory (at most maxDeltaResult bytes), and every read is
//     a copy.
//   - goGitBlob, for anything else (a loose object, one go-git alone finds):
//     go-git's object reader, read forward; a read before its position reopens
//     the object and skips from the start.

// blobSource serves reads of one open streamed blob, under the file's lock.
type blobSource interface {
	readAt(b []byte, off int64) (int, error)
	close()
}

// Checkpoint spacing: about checkpointsPerBlob per blob, at least
// minCheckpointSpacing bytes of output apart.
const (
	checkpointsPerBlob = 64
	checkpointBlobs    = 8 // blobs whose checkpoints an FS keeps
)

// minCheckpointSpacing is a variable only so that tests can use small blobs.
var minCheckpointSpacing int64 = 256 << 10

// ckIndex is the checkpoints of one blob, sorted by output offset.
type ckIndex struct {
	mu      sync.Mutex
	spacing int64
	cps     []checkpoint
}

// before returns the last checkpoint at or before off (nil: none).
func (x *ckIndex) before(off int64) *checkpoint {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.cps), func(i int) bool { return x.cps[i].out > off })
	if i == 0 {
		return nil
	}
	c := x.cps[i-1]
	return &c
}

// offer records a checkpoint at d's position unless one is near.
func (x *ckIndex) offer(d *inflate) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.cps) >= 2*checkpointsPerBlob {
		return
	}
	i := sort.Search(len(x.cps), func(i int) bool { return x.cps[i].out > d.out })
	prev := int64(0)
	if i > 0 {
		prev = x.cps[i-1].out
	}
	if d.out-prev < x.spacing || (i < len(x.cps) && x.cps[i].out-d.out < x.spacing/2) {
		return
	}
	x.cps = append(x.cps, checkpoint{})
	copy(x.cps[i+1:], x.cps[i:])
	x.cps[i] = d.snapshot()
}

// checkpoints returns the shared checkpoint index of blob h of the given size.
func (r *repoState) checkpoints(h plumbing.Hash, size int64) *ckIndex {
	r.ckMu.Lock()
	defer r.ckMu.Unlock()
	if r.ck == nil {
		r.ck = map[plumbing.Hash]*ckIndex{}
	}
	if x, ok := r.ck[h]; ok {
		return x
	}
	if len(r.ck) >= checkpointBlobs {
		// Drop the oldest blob's index (open files keep theirs).
		old := r.ckOrder[0]
		r.ckOrder = r.ckOrder[1:]
		delete(r.ck, old)
	}
	x := &ckIndex{spacing: max(minCheckpointSpacing, size/checkpointsPerBlob)}
	r.ck[h] = x
	r.ckOrder = append(r.ckOrder, h)
	return x
}

// openStream chooses how blob h, of the given size, is streamed.
func (r *repoState) openStream(h plumbing.Hash, size int64) (blobSource, error) {
	if r.packs != nil {
		if err := r.packs.rlock(); err != nil {
			return nil, err
		}
		p, off, ok := r.packs.locate(h)
		var e entry
		var err error
		if ok {
			var hb [maxHeader]byte
			e, err = p.header(off, hb[:])
		}
		r.packs.mu.RUnlock()
		switch {
		case !ok:
			if err := r.packs.notPacked(h); err != errNotPacked {
				return nil, err
			}
		case err != nil:
			return nil, err
		case e.typ == packBlob:
			if e.size != size {
				return nil, corrupt("entry at offset %d: blob of %d bytes, %d expected", off, e.size, size)
			}
			i, _ := p.entryAt(off)
			head := make([]byte, e.dataOff-off)
			if _, err := p.f.ReadAt(head, off); err != nil {
				return nil, err
			}
			return &packedBlob{ps: r.packs, idx: r.checkpoints(h, size), off: off,
				s: streamInflate{src: p.f, start: e.dataOff, end: e.end, size: size,
					crcCheck: true, crcHead: head, crcWant: p.crcs[i]}}, nil
		default:
			_, data, err := r.packs.read(h, -1)
			if err != nil {
				return nil, err
			}
			if int64(len(data)) != size {
				return nil, corrupt("entry at offset %d: blob of %d bytes, %d expected", off, len(data), size)
			}
			return memBlob(data), nil
		}
	}
	return &goGitBlob{r: r, hash: h}, nil
}

// packedBlob streams an undeltified packed blob with checkpoints.
type packedBlob struct {
	ps      *packStore
	off     int64 // the entry's offset in its pack
	idx     *ckIndex
	s       streamInflate
	started bool
	from    int64 // output offset of the last restart (a checkpoint's, or 0)
}

func (pb *packedBlob) readAt(b []byte, off int64) (int, error) {
	if err := pb.ps.rlock(); err != nil {
		return 0, err
	}
	defer pb.ps.mu.RUnlock()
	n, err := pb.readLocked(b, off)
	if err == errFlate || err == io.ErrUnexpectedEOF || err == errStreamCRC {
		err = corrupt("entry at offset %d: %v", pb.off, err)
	}
	return n, err
}

func (pb *packedBlob) readLocked(b []byte, off int64) (int, error) {
	c := pb.idx.before(off)
	if !pb.started || pb.s.pos() > off || (c != nil && c.out > pb.s.pos()) {
		if err := pb.s.reset(c); err != nil {
			pb.started = false
			return 0, err
		}
		pb.s.d.onBoundary = pb.idx.offer
		pb.started, pb.from = true, pb.s.pos()
	}
	if err := pb.s.skip(off - pb.s.pos()); err != nil {
		pb.started = false
		return 0, err
	}
	n := 0
	for n < len(b) {
		k, err := pb.s.read(b[n:])
		n += k
		if err != nil {
			pb.started = false
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

func (pb *packedBlob) close() {
	pb.s.d.win, pb.s.d.in = nil, nil
}

// memBlob is a blob reconstructed whole in memory.
type memBlob []byte

func (m memBlob) readAt(b []byte, off int64) (int, error) {
	if off > int64(len(m)) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(b, m[off:])
	if n < len(b) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

func (memBlob) close() {}

// goGitBlob reads a blob through go-git's object reader.
type goGitBlob struct {
	r      *repoState
	hash   plumbing.Hash
	stream io.ReadCloser // positioned at spos; nil until needed
	spos   int64
}

// readAt fills b from the blob at off. A read at or after the stream's position
// skips forward; one before it reopens the object.
func (g *goGitBlob) readAt(b []byte, off int64) (int, error) {
	if err := g.r.lock(); err != nil {
		return 0, err
	}
	defer g.r.mu.Unlock()
	if g.stream == nil || off < g.spos {
		if g.stream != nil {
			g.stream.Close()
			g.stream = nil
		}
		o, err := g.r.store.EncodedObject(plumbing.BlobObject, g.hash)
		if err != nil {
			return 0, err
		}
		rd, err := o.Reader()
		if err != nil {
			return 0, err
		}
		g.stream, g.spos = rd, 0
	}
	if off > g.spos {
		k, err := io.CopyN(io.Discard, g.stream, off-g.spos)
		g.spos += k
		if err != nil {
			return 0, err
		}
	}
	n, err := io.ReadFull(g.stream, b)
	g.spos += int64(n)
	return n, err
}

func (g *goGitBlob) close() {
	if g.stream != nil {
		g.r.mu.Lock() // the stream may read through descriptors the store shares
		g.stream.Close()
		g.r.mu.Unlock()
		g.stream = nil
	}
}
