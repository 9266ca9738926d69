package pack

import (
	"io"
	"sort"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// Streaming large blobs. A blob over the stream threshold is not loaded at
// OpenFile; its reads go to the Blob Stream returns:
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
//     blobs streamed from a Store, each holding at most 128 of them (32 KiB
//     each: 4 MiB).
//   - memBlob, for a deltified blob: the delta chain is resolved once, at the
//     first read, into memory (at most maxDeltaResult bytes), and every read is
//     a copy.
//   - anything else (a loose object, one go-git alone finds) is ErrNotPacked,
//     and the caller reads it through go-git.

// Blob serves reads of one open streamed blob. It is not safe for
// concurrent use: the caller serializes its calls.
type Blob interface {
	// ReadAt fills b from offset off; short only at the blob's end, with
	// io.ErrUnexpectedEOF.
	ReadAt(b []byte, off int64) (int, error)
	// Close releases the blob's buffers.
	Close()
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

// ckCache is the checkpoint indexes of the last checkpointBlobs blobs
// streamed from a Store.
type ckCache struct {
	mu    sync.Mutex
	ck    map[plumbing.Hash]*ckIndex
	order []plumbing.Hash // ck's keys, oldest first
}

// checkpoints returns the shared checkpoint index of blob h of the given size.
func (c *ckCache) checkpoints(h plumbing.Hash, size int64) *ckIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ck == nil {
		c.ck = map[plumbing.Hash]*ckIndex{}
	}
	if x, ok := c.ck[h]; ok {
		return x
	}
	if len(c.ck) >= checkpointBlobs {
		// Drop the oldest blob's index (open files keep theirs).
		old := c.order[0]
		c.order = c.order[1:]
		delete(c.ck, old)
	}
	x := &ckIndex{spacing: max(minCheckpointSpacing, size/checkpointsPerBlob)}
	c.ck[h] = x
	c.order = append(c.order, h)
	return x
}

// Stream opens blob h, of the given size, for reads at any offset: an
// undeltified packed blob is inflated on demand from checkpoints, a
// deltified one is rebuilt in memory at the first read. A blob in no known
// pack (and any blob of a nil Store) is ErrNotPacked.
func (ps *Store) Stream(h plumbing.Hash, size int64) (Blob, error) {
	if ps == nil {
		return nil, ErrNotPacked
	}
	if err := ps.rlock(); err != nil {
		return nil, err
	}
	p, off, ok := ps.locate(h)
	var e entry
	var err error
	if ok {
		var hb [maxHeader]byte
		e, err = p.header(off, hb[:])
	}
	ps.mu.RUnlock()
	switch {
	case !ok:
		return nil, ps.notPacked(h)
	case err != nil:
		return nil, err
	case e.typ == packBlob:
		return ps.streamWhole(h, size, p, off, e)
	}
	return ps.streamDelta(size, h, off)
}

// streamWhole streams the undeltified blob h whose entry e is at off in p.
func (ps *Store) streamWhole(h plumbing.Hash, size int64, p *pack, off int64, e entry) (Blob, error) {
	if e.size != size {
		return nil, Corrupt("entry at offset %d: blob of %d bytes, %d expected", off, e.size, size)
	}
	i, _ := p.entryAt(off)
	head := make([]byte, e.dataOff-off)
	if _, err := p.f.ReadAt(head, off); err != nil {
		return nil, err
	}
	return &packedBlob{ps: ps, idx: ps.ck.checkpoints(h, size), off: off,
		s: streamInflate{src: p.f, start: e.dataOff, end: e.end, size: size,
			crcCheck: true, crcHead: head, crcWant: p.crcs[i]}}, nil
}

// streamDelta rebuilds the deltified blob h (its entry at off) in memory.
func (ps *Store) streamDelta(size int64, h plumbing.Hash, off int64) (Blob, error) {
	_, data, err := ps.Read(h, -1)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, Corrupt("entry at offset %d: blob of %d bytes, %d expected", off, len(data), size)
	}
	return memBlob(data), nil
}

// packedBlob streams an undeltified packed blob with checkpoints.
type packedBlob struct {
	ps      *Store
	off     int64 // the entry's offset in its pack
	idx     *ckIndex
	s       streamInflate
	started bool
	from    int64 // output offset of the last restart (a checkpoint's, or 0)
}

func (pb *packedBlob) ReadAt(b []byte, off int64) (int, error) {
	if err := pb.ps.rlock(); err != nil {
		return 0, err
	}
	defer pb.ps.mu.RUnlock()
	n, err := pb.readLocked(b, off)
	if err == errFlate || err == io.ErrUnexpectedEOF || err == errStreamCRC {
		err = Corrupt("entry at offset %d: %v", pb.off, err)
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

func (pb *packedBlob) Close() {
	pb.s.d.win, pb.s.d.in = nil, nil
}

// memBlob is a blob reconstructed whole in memory.
type memBlob []byte

func (m memBlob) ReadAt(b []byte, off int64) (int, error) {
	if off > int64(len(m)) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(b, m[off:])
	if n < len(b) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

func (memBlob) Close() {}
