package pack

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/capfs/capfs/vfs"
)

// The direct pack reader. go-git's filesystem storage serves objects through one
// object-store value that is not safe for concurrent use, decodes every object
// through a generic interface and grows a reverse-offset map on every lookup. For
// the objects of pack files, which is where nearly all of a cloned or garbage-
// collected repository lives, this file reads the pack index (.idx, version 2)
// itself and the pack with positioned reads (pread), which need no lock: any
// number of goroutines read objects at once. It inflates each entry with the
// package's own DEFLATE decoder (readinflate.go), resolves delta chains
// (OFS_DELTA and REF_DELTA) itself with a bounded cache of delta bases, and reads
// an entry's compressed bytes in one system call, its length known from the next
// entry's offset (an entry over wholeEntryMax compressed bytes has its header
// read first, so that a large blob is never read whole to learn its size).
//
// It trusts nothing in the pack. Every entry read whole is checked against the
// CRC-32 its index records before it is parsed; every inflated size must match
// the entry header exactly (inflating stops one byte past it); delta chains are
// walked with cycle detection and a depth limit (MaxDeltaDepth); a delta's
// instructions are checked against its base and its declared result size before
// anything is allocated for the result, and a result is allocated at exactly the
// size the instructions produce, at most maxDeltaResult. A malformed or hostile
// entry reads as an io_error (ErrCorrupt in its chain) naming the reason, an
// object rebuilt from deltas over maxDeltaResult as file_too_large: in time
// bounded by the pack's size and memory bounded by the object's size (and
// maxDeltaResult for deltas), never a hang, a panic or wrong bytes.
//
// Objects it does not hold (loose objects, packs added after Open, alternates,
// packs whose index it cannot use) are reported as ErrNotPacked, and the caller
// falls back to go-git.

// errClosed is the error of a read after Close.
var errClosed = &vfs.Error{Code: vfs.CodeClosed, Op: "read"}

// ErrNotPacked says an object is in none of the packs the reader knows.
var ErrNotPacked = errors.New("object not in a known pack")

// ErrCorrupt is in the chain of every error reporting a malformed pack or index
// entry (see corrupt).
var ErrCorrupt = errors.New("corrupt git pack")

// Corrupt returns the error of a malformed or hostile pack entry: io_error, with
// ErrCorrupt as its cause and the reason as its message. Reasons name offsets,
// ids and sizes, never a host path.
func Corrupt(format string, args ...any) error {
	e := vfs.NewError(vfs.CodeIO, "read", vfs.Path{}, "corrupt git pack: "+fmt.Sprintf(format, args...))
	e.Err = ErrCorrupt
	return e
}

// Limits of the direct pack reader.
const (
	// MaxDeltaDepth is the longest delta chain the reader follows: a deeper one
	// is an io_error. git's pack-objects never writes a chain deeper than 4095 (it
	// clamps --depth; its default is 50), so no pack git writes comes near it.
	MaxDeltaDepth = 10000
	// maxDeltaResult is the largest object the reader rebuilds from deltas, and
	// the largest delta base it holds: larger is file_too_large. A deltified
	// object is rebuilt in memory (as git and go-git do), so this bounds the
	// memory one read of a hostile pack can claim through a chain of deltas that
	// each double their base. git does not deltify blobs over
	// core.bigFileThreshold (512 MiB by default).
	maxDeltaResult = 1 << 30
	// wholeEntryMax is the largest entry (compressed) read in one pread with its
	// header; a larger one has its header read first.
	wholeEntryMax = 1 << 20
)

// tooLargeDelta is the error of a delta result or base over maxDeltaResult.
func tooLargeDelta(size int64) error {
	return vfs.NewError(vfs.CodeTooLarge, "read", vfs.Path{},
		fmt.Sprintf("git object of %d bytes rebuilt from deltas exceeds the %d-byte limit", size, int64(maxDeltaResult)))
}

// Pack entry types (the 3-bit type of an entry header).
const (
	packCommit   = 1
	packTree     = 2
	packBlob     = 3
	packTag      = 4
	packOfsDelta = 6
	packRefDelta = 7
)

// DefaultDeltaBaseCacheSize is the default byte budget of the cache of delta
// bases (WithDeltaBaseCacheSize).
const DefaultDeltaBaseCacheSize = 32 << 20

// Store is every pack of one repository, read directly.
type Store struct {
	mu     sync.RWMutex // read-held by every read; write-held by close
	closed bool
	packs  []*pack
	bases  *baseCache
	ck     ckCache // checkpoints of streamed blobs
	// bad holds the packs whose version 2 index is readable but does not match
	// the pack (checksum, object count, offsets): git refuses them, and so does
	// the reader, for every object their index names (their f is nil).
	bad []*pack
}

// pack is one pack file and its index.
type pack struct {
	f    *os.File
	size int64 // of the pack file
	// The index's tables, version 2.
	n      int
	fanout [256]uint32
	names  []byte // n × 20, sorted
	off32  []byte // n × 4
	off64  []byte // 8 × (entries with the high bit set)
	// ends holds every entry's offset ascending, then the trailer's: an entry runs
	// from its offset to the next one in ends. crcs[i] is the CRC-32 the index
	// records for the entry at ends[i] (its header and compressed data).
	ends []int64
	crcs []uint32
	// lib inflates with klauspost/compress instead of the package's decoder
	// (WithLibraryInflater).
	lib bool
}

// Open opens every pack of gitDir's object store whose index is a well-formed
// version 2 index with SHA-1 ids matching its pack. Packs it cannot use are left to
// go-git. It returns nil when there is none.
func Open(gitDir string, baseCache int64, libInflate bool) *Store {
	idxs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.idx"))
	ps := &Store{bases: newBaseCache(baseCache)}
	for _, idx := range idxs {
		p, err := openPack(strings.TrimSuffix(idx, ".idx"))
		switch {
		case err == nil:
			p.lib = libInflate
			ps.packs = append(ps.packs, p)
		case p != nil:
			ps.bad = append(ps.bad, p)
		}
	}
	if len(ps.packs) == 0 && len(ps.bad) == 0 {
		return nil
	}
	return ps
}

// notPacked is the error for an object no usable pack holds: ErrNotPacked, or,
// when a pack whose index does not match it names the object, an io_error.
func (ps *Store) notPacked(h plumbing.Hash) error {
	for _, p := range ps.bad {
		if _, ok := p.index(h); ok {
			return Corrupt("object %s is in a pack that does not match its index", h)
		}
	}
	return ErrNotPacked
}

func openPack(base string) (*pack, error) {
	idx, err := os.ReadFile(base + ".idx")
	if err != nil {
		return nil, err
	}
	p, body, err := parseIndex(idx)
	if err != nil {
		return nil, err
	}
	// From here on the index's names are known: a pack that does not match it
	// is returned, without its file, for Open to refuse.
	if err := p.openFile(base+".pack", idx[len(idx)-40:len(idx)-20]); err != nil {
		return p, err
	}
	if err := p.entryOffsets(body[20*p.n : 24*p.n]); err != nil {
		p.f.Close()
		p.f = nil
		return p, err
	}
	return p, nil
}

// parseIndex reads the tables of a version 2 pack index with SHA-1 ids, and
// returns them and the index's body (names, CRCs and offsets).
func parseIndex(idx []byte) (*pack, []byte, error) {
	const hdr = 8 + 256*4
	if len(idx) < hdr+40 || !bytes.Equal(idx[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, nil, ErrCorrupt
	}
	p := &pack{}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(idx[8+4*i:])
		if i > 0 && p.fanout[i] < p.fanout[i-1] {
			return nil, nil, ErrCorrupt
		}
	}
	p.n = int(p.fanout[255])
	body := idx[hdr : len(idx)-40]
	if p.n > len(body)/28 {
		return nil, nil, ErrCorrupt
	}
	p.names = body[:20*p.n]
	p.off32 = body[24*p.n : 28*p.n]
	p.off64 = body[28*p.n:]
	if len(p.off64)%8 != 0 {
		return nil, nil, ErrCorrupt // not SHA-1, or not an index at all
	}
	return p, body, nil
}

// openFile opens the pack file at path and checks its header and trailer
// against the index: its object count and its checksum, packSum.
func (p *pack) openFile(path string, packSum []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	var head [12]byte
	var trailer [20]byte
	if err == nil {
		_, err = f.ReadAt(head[:], 0)
	}
	if err == nil && fi.Size() >= 32 {
		_, err = f.ReadAt(trailer[:], fi.Size()-20)
	}
	if err != nil || fi.Size() < 32 || string(head[:4]) != "PACK" || !bytes.Equal(trailer[:], packSum) ||
		int(binary.BigEndian.Uint32(head[8:])) != p.n {
		f.Close()
		return ErrCorrupt
	}
	p.f, p.size = f, fi.Size()
	return nil
}

// entryOffsets fills p.ends and p.crcs from the index's offsets and CRCs
// (crcs), refusing an offset outside the pack's entries or two objects at one
// offset.
func (p *pack) entryOffsets(crcs []byte) error {
	type offCRC struct {
		off int64
		crc uint32
	}
	byOff := make([]offCRC, 0, p.n)
	for i := 0; i < p.n; i++ {
		off, ok := p.offsetAt(i)
		if !ok || off < 12 || off >= p.size-20 {
			return ErrCorrupt
		}
		byOff = append(byOff, offCRC{off, binary.BigEndian.Uint32(crcs[4*i:])})
	}
	slices.SortFunc(byOff, func(a, b offCRC) int { return cmp.Compare(a.off, b.off) })
	p.ends = make([]int64, 0, p.n+1)
	p.crcs = make([]uint32, 0, p.n)
	for i, oc := range byOff {
		if i > 0 && oc.off == byOff[i-1].off {
			return ErrCorrupt // two objects at one offset
		}
		p.ends = append(p.ends, oc.off)
		p.crcs = append(p.crcs, oc.crc)
	}
	p.ends = append(p.ends, p.size-20)
	return nil
}

// offsetAt returns the pack offset of the index's i-th object.
func (p *pack) offsetAt(i int) (int64, bool) {
	o := binary.BigEndian.Uint32(p.off32[4*i:])
	if o&0x80000000 == 0 {
		return int64(o), true
	}
	j := int(o&0x7fffffff) * 8
	if j+8 > len(p.off64) {
		return 0, false
	}
	v := binary.BigEndian.Uint64(p.off64[j:])
	return int64(v), v < 1<<62
}

// find returns the offset of object h in p.
func (p *pack) find(h plumbing.Hash) (int64, bool) {
	if i, ok := p.index(h); ok {
		return p.offsetAt(i)
	}
	return 0, false
}

// index returns the position of object h in p's index.
func (p *pack) index(h plumbing.Hash) (int, bool) {
	lo := 0
	if h[0] > 0 {
		lo = int(p.fanout[h[0]-1])
	}
	hi := int(p.fanout[h[0]])
	if lo > hi || hi > p.n {
		return 0, false
	}
	i := lo + sort.Search(hi-lo, func(k int) bool {
		return bytes.Compare(p.names[20*(lo+k):20*(lo+k)+20], h[:]) >= 0
	})
	if i < hi && bytes.Equal(p.names[20*i:20*i+20], h[:]) {
		return i, true
	}
	return 0, false
}

// end returns where the entry at off ends (the next entry's offset); -1 when no
// entry starts at off.
func (p *pack) end(off int64) int64 {
	_, end := p.entryAt(off)
	return end
}

// entryAt returns the position in ends of the entry at off and where it ends
// (-1, -1 when no entry starts at off).
func (p *pack) entryAt(off int64) (int, int64) {
	i, found := slices.BinarySearch(p.ends, off)
	if !found || i+1 >= len(p.ends) {
		return -1, -1
	}
	return i, p.ends[i+1]
}

// entry is a parsed pack entry header.
type entry struct {
	typ     int
	size    int64 // inflated size: of the object, or of the delta for a delta entry
	dataOff int64 // where the zlib stream starts
	end     int64 // where the entry ends
	baseOff int64 // OFS_DELTA: the base's offset in the same pack
	baseID  plumbing.Hash
}

// maxHeader bounds an entry header: type and size (at most 10 bytes for 64 bits)
// and a delta base (20 bytes of id, or at most 10 of offset).
const maxHeader = 32

// ofsDistance reads the base distance of an OFS_DELTA entry at b[i:]: the
// distance and the index after it, or the reason it is malformed.
func ofsDistance(b []byte, i int) (int64, int, string) {
	if i >= len(b) {
		return 0, i, "truncated header"
	}
	c := b[i]
	i++
	n := int64(c & 0x7f)
	for c&0x80 != 0 {
		if i >= len(b) || n >= 1<<48 {
			return 0, i, "bad delta base offset"
		}
		c = b[i]
		i++
		n = (n+1)<<7 | int64(c&0x7f)
	}
	return n, i, ""
}

// parseHeader parses the entry header at off from b, which holds the entry's
// first bytes.
func (p *pack) parseHeader(b []byte, off int64) (entry, error) {
	e := entry{end: p.end(off)}
	if e.end < 0 {
		return e, Corrupt("no entry at offset %d", off)
	}
	bad := func(what string) (entry, error) {
		return e, Corrupt("entry at offset %d: %s", off, what)
	}
	if len(b) == 0 {
		return bad("truncated header")
	}
	c := b[0]
	e.typ = int(c>>4) & 7
	e.size = int64(c & 15)
	i, shift := 1, 4
	for c&0x80 != 0 {
		if i >= len(b) || shift > 56 {
			return bad("bad size in header")
		}
		c = b[i]
		i++
		e.size |= int64(c&0x7f) << shift
		shift += 7
	}
	switch e.typ {
	case packCommit, packTree, packBlob, packTag:
	case packOfsDelta:
		var n int64
		var msg string
		if n, i, msg = ofsDistance(b, i); msg != "" {
			return bad(msg)
		}
		if n <= 0 || n > off {
			return bad(fmt.Sprintf("delta base offset %d out of range", n))
		}
		e.baseOff = off - n
	case packRefDelta:
		if i+20 > len(b) {
			return bad("truncated header")
		}
		copy(e.baseID[:], b[i:i+20])
		i += 20
	default:
		return bad(fmt.Sprintf("unknown type %d", e.typ))
	}
	e.dataOff = off + int64(i)
	if e.dataOff > e.end {
		return bad("header runs past the entry's end")
	}
	if e.size < 0 {
		return bad("bad size in header")
	}
	return e, nil
}

// locate finds object h in the store's packs.
func (ps *Store) locate(h plumbing.Hash) (*pack, int64, bool) {
	for _, p := range ps.packs {
		if off, ok := p.find(h); ok {
			return p, off, true
		}
	}
	return nil, 0, false
}

// rlock read-locks the store, failing once it is closed.
func (ps *Store) rlock() error {
	ps.mu.RLock()
	if ps.closed {
		ps.mu.RUnlock()
		return errClosed
	}
	return nil
}

// Close closes the pack files; later reads fail with closed.
func (ps *Store) Close() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	ps.closed = true
	var first error
	for _, p := range ps.packs {
		if err := p.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	ps.bases.clear()
	return first
}

// object types as go-git names them, by pack type.
func objectType(t int) plumbing.ObjectType {
	switch t {
	case packCommit:
		return plumbing.CommitObject
	case packTree:
		return plumbing.TreeObject
	case packBlob:
		return plumbing.BlobObject
	case packTag:
		return plumbing.TagObject
	}
	return plumbing.InvalidObject
}

// Info returns the type and size of object h without inflating it, except for a
// delta, whose result size is the second number at the start of its delta data.
// It walks a delta chain's headers down to its base (whose type is the object's)
// with cycle detection and at most MaxDeltaDepth steps.
func (ps *Store) Info(h plumbing.Hash) (plumbing.ObjectType, int64, error) {
	if ps == nil {
		return 0, 0, ErrNotPacked
	}
	if err := ps.rlock(); err != nil {
		return 0, 0, err
	}
	defer ps.mu.RUnlock()
	p, off, ok := ps.locate(h)
	if !ok {
		return 0, 0, ps.notPacked(h)
	}
	var hb [maxHeader]byte
	e, err := p.header(off, hb[:])
	if err != nil {
		return 0, 0, err
	}
	size := e.size
	if isDelta(e.typ) {
		if size, err = p.deltaTargetSize(e); err != nil {
			return 0, 0, err
		}
	}
	var walk chainWalk
	for isDelta(e.typ) {
		// The type is the chain's base's: walk the headers down to it.
		if p, off, err = walk.next(ps, p, off, e); err != nil {
			return 0, 0, err
		}
		if e, err = p.header(off, hb[:]); err != nil {
			return 0, 0, err
		}
	}
	return objectType(e.typ), size, nil
}

func isDelta(typ int) bool { return typ == packOfsDelta || typ == packRefDelta }

// chainWalk follows a delta chain from entry to base, refusing a cycle and a
// chain deeper than MaxDeltaDepth.
type chainWalk struct {
	depth int
	seen  []baseKey // the entries met, while few
	set   map[baseKey]struct{}
}

// next returns the base of delta entry e, which is at off in p.
func (w *chainWalk) next(ps *Store, p *pack, off int64, e entry) (*pack, int64, error) {
	k := baseKey{p, off}
	if len(w.seen) < 32 {
		w.seen = append(w.seen, k)
	} else {
		if w.set == nil {
			w.set = make(map[baseKey]struct{}, 2*len(w.seen))
			for _, s := range w.seen {
				w.set[s] = struct{}{}
			}
		}
		w.set[k] = struct{}{}
	}
	w.depth++
	if w.depth > MaxDeltaDepth {
		return nil, 0, Corrupt("delta chain deeper than %d", MaxDeltaDepth)
	}
	bp, boff := p, e.baseOff
	if e.typ == packRefDelta {
		var ok bool
		if bp, boff, ok = ps.locate(e.baseID); !ok {
			return nil, 0, Corrupt("entry at offset %d: REF_DELTA base %s is in no pack", off, e.baseID)
		}
	}
	bk := baseKey{bp, boff}
	cycle := false
	if w.set != nil {
		_, cycle = w.set[bk]
	} else {
		cycle = slices.Contains(w.seen, bk)
	}
	if cycle {
		return nil, 0, Corrupt("entry at offset %d: delta chain loops back to offset %d", off, boff)
	}
	return bp, boff, nil
}

// header reads and parses the header of the entry at off, using buf.
func (p *pack) header(off int64, buf []byte) (entry, error) {
	_, end := p.entryAt(off)
	if end < 0 {
		return entry{}, Corrupt("no entry at offset %d", off)
	}
	n := min(int64(len(buf)), end-off)
	k, err := p.f.ReadAt(buf[:n], off)
	if err != nil && k < int(n) {
		return entry{}, err
	}
	return p.parseHeader(buf[:n], off)
}

// deltaTargetSize inflates the start of delta entry e and returns the size of the
// object the delta produces.
func (p *pack) deltaTargetSize(e entry) (int64, error) {
	zr, err := newInflater(io.NewSectionReader(p.f, e.dataOff, e.end-e.dataOff), 512)
	if err != nil {
		return 0, Corrupt("delta at offset %d: %v", e.dataOff, err)
	}
	defer zr.release()
	var b [20]byte
	n, err := io.ReadFull(zr, b[:min(int64(len(b)), e.size)])
	if err != nil && err != io.ErrUnexpectedEOF {
		return 0, Corrupt("delta at offset %d: %v", e.dataOff, err)
	}
	return deltaSize(b[:n])
}

// Read returns the type and whole content of object h; max ≥ 0 refuses (with
// ErrTooLarge) an object larger than max before inflating it (for a delta, before
// reading its base).
func (ps *Store) Read(h plumbing.Hash, max int64) (plumbing.ObjectType, []byte, error) {
	if ps == nil {
		return 0, nil, ErrNotPacked
	}
	if err := ps.rlock(); err != nil {
		return 0, nil, err
	}
	defer ps.mu.RUnlock()
	p, off, ok := ps.locate(h)
	if !ok {
		return 0, nil, ps.notPacked(h)
	}
	t, data, err := ps.readAt(p, off, max)
	return objectType(t), data, err
}

// ErrTooLarge is Read's error for an object over its max.
var ErrTooLarge = errors.New("object too large")
