package gitree

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
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
)

// The direct pack reader. go-git's filesystem storage serves objects through one
// object-store value that is not safe for concurrent use, decodes every object
// through a generic interface and grows a reverse-offset map on every lookup. For
// the objects of pack files, which is where nearly all of a cloned or garbage-
// collected repository lives, this file reads the pack index (.idx, version 2)
// itself and the pack with positioned reads (pread), which need no lock: any
// number of goroutines read objects at once. It inflates each entry with
// compress/zlib, resolves delta chains (OFS_DELTA and REF_DELTA) itself with a
// bounded cache of delta bases, and reads an entry's compressed bytes in one
// system call, its length known from the next entry's offset.
//
// Objects it does not hold (loose objects, packs added after Open, alternates)
// are reported as errNotPacked, and the caller falls back to go-git.

// errNotPacked says an object is in none of the packs the reader knows.
var errNotPacked = errors.New("object not in a known pack")

// errCorrupt reports a malformed pack or index entry.
var errCorrupt = errors.New("corrupt git pack")

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

// packStore is every pack of one repository, read directly.
type packStore struct {
	mu     sync.RWMutex // read-held by every read; write-held by close
	closed bool
	packs  []*pack
	bases  *baseCache
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
	// from its offset to the next one in ends.
	ends []int64
}

// openPacks opens every pack of gitDir's object store whose index is a well-formed
// version 2 index with SHA-1 ids matching its pack. Packs it cannot use are left to
// go-git. It returns nil when there is none.
func openPacks(gitDir string, baseCache int64) *packStore {
	idxs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.idx"))
	ps := &packStore{bases: newBaseCache(baseCache)}
	for _, idx := range idxs {
		p, err := openPack(strings.TrimSuffix(idx, ".idx"))
		if err == nil {
			ps.packs = append(ps.packs, p)
		}
	}
	if len(ps.packs) == 0 {
		return nil
	}
	return ps
}

func openPack(base string) (*pack, error) {
	idx, err := os.ReadFile(base + ".idx")
	if err != nil {
		return nil, err
	}
	const hdr = 8 + 256*4
	if len(idx) < hdr+40 || !bytes.Equal(idx[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, errCorrupt
	}
	p := &pack{}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(idx[8+4*i:])
		if i > 0 && p.fanout[i] < p.fanout[i-1] {
			return nil, errCorrupt
		}
	}
	p.n = int(p.fanout[255])
	body := idx[hdr : len(idx)-40]
	if p.n > len(body)/28 {
		return nil, errCorrupt
	}
	p.names = body[:20*p.n]
	p.off32 = body[24*p.n : 28*p.n]
	p.off64 = body[28*p.n:]
	if len(p.off64)%8 != 0 {
		return nil, errCorrupt // not SHA-1, or not an index at all
	}
	packSum := idx[len(idx)-40 : len(idx)-20]
	f, err := os.Open(base + ".pack")
	if err != nil {
		return nil, err
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
		return nil, errCorrupt
	}
	p.f, p.size = f, fi.Size()
	p.ends = make([]int64, 0, p.n+1)
	for i := 0; i < p.n; i++ {
		off, ok := p.offsetAt(i)
		if !ok || off < 12 || off >= p.size-20 {
			f.Close()
			return nil, errCorrupt
		}
		p.ends = append(p.ends, off)
	}
	slices.Sort(p.ends)
	p.ends = append(p.ends, p.size-20)
	return p, nil
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
	lo := 0
	if h[0] > 0 {
		lo = int(p.fanout[h[0]-1])
	}
	hi := int(p.fanout[h[0]])
	i := lo + sort.Search(hi-lo, func(k int) bool {
		return bytes.Compare(p.names[20*(lo+k):20*(lo+k)+20], h[:]) >= 0
	})
	if i < hi && bytes.Equal(p.names[20*i:20*i+20], h[:]) {
		return p.offsetAt(i)
	}
	return 0, false
}

// end returns where the entry at off ends (the next entry's offset).
func (p *pack) end(off int64) int64 {
	i, found := slices.BinarySearch(p.ends, off)
	if !found || i+1 >= len(p.ends) {
		return -1
	}
	return p.ends[i+1]
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

// parseHeader parses the entry header at off from b, which holds the entry's
// first bytes.
func (p *pack) parseHeader(b []byte, off int64) (entry, error) {
	e := entry{end: p.end(off)}
	if e.end < 0 || len(b) == 0 {
		return e, errCorrupt
	}
	c := b[0]
	e.typ = int(c>>4) & 7
	e.size = int64(c & 15)
	i, shift := 1, 4
	for c&0x80 != 0 {
		if i >= len(b) || shift > 56 {
			return e, errCorrupt
		}
		c = b[i]
		i++
		e.size |= int64(c&0x7f) << shift
		shift += 7
	}
	switch e.typ {
	case packCommit, packTree, packBlob, packTag:
	case packOfsDelta:
		if i >= len(b) {
			return e, errCorrupt
		}
		c = b[i]
		i++
		n := int64(c & 0x7f)
		for c&0x80 != 0 {
			if i >= len(b) || n >= 1<<48 {
				return e, errCorrupt
			}
			c = b[i]
			i++
			n = (n+1)<<7 | int64(c&0x7f)
		}
		if n <= 0 || n > off {
			return e, errCorrupt
		}
		e.baseOff = off - n
	case packRefDelta:
		if i+20 > len(b) {
			return e, errCorrupt
		}
		copy(e.baseID[:], b[i:i+20])
		i += 20
	default:
		return e, errCorrupt
	}
	e.dataOff = off + int64(i)
	if e.dataOff > e.end || e.size < 0 {
		return e, errCorrupt
	}
	return e, nil
}

// locate finds object h in the store's packs.
func (ps *packStore) locate(h plumbing.Hash) (*pack, int64, bool) {
	for _, p := range ps.packs {
		if off, ok := p.find(h); ok {
			return p, off, true
		}
	}
	return nil, 0, false
}

// rlock read-locks the store, failing once it is closed.
func (ps *packStore) rlock() error {
	ps.mu.RLock()
	if ps.closed {
		ps.mu.RUnlock()
		return errClosed
	}
	return nil
}

func (ps *packStore) close() error {
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

// info returns the type and size of object h without inflating it, except for a
// delta, whose result size is the second number at the start of its delta data.
func (ps *packStore) info(h plumbing.Hash) (plumbing.ObjectType, int64, error) {
	if ps == nil {
		return 0, 0, errNotPacked
	}
	if err := ps.rlock(); err != nil {
		return 0, 0, err
	}
	defer ps.mu.RUnlock()
	p, off, ok := ps.locate(h)
	if !ok {
		return 0, 0, errNotPacked
	}
	var hb [maxHeader]byte
	e, err := p.header(off, hb[:])
	if err != nil {
		return 0, 0, err
	}
	size := e.size
	if e.typ == packOfsDelta || e.typ == packRefDelta {
		if size, err = p.deltaTargetSize(e); err != nil {
			return 0, 0, err
		}
	}
	t := e.typ
	for t == packOfsDelta || t == packRefDelta {
		// The type is the chain's base's: walk the headers down to it.
		bp, boff := p, e.baseOff
		if t == packRefDelta {
			if bp, boff, ok = ps.locate(e.baseID); !ok {
				return 0, 0, errNotPacked
			}
		}
		if e, err = bp.header(boff, hb[:]); err != nil {
			return 0, 0, err
		}
		p, t = bp, e.typ
	}
	return objectType(t), size, nil
}

// header reads and parses the header of the entry at off, using buf.
func (p *pack) header(off int64, buf []byte) (entry, error) {
	n := min(int64(len(buf)), p.size-off)
	if n <= 0 {
		return entry{}, errCorrupt
	}
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
		return 0, err
	}
	defer zr.release()
	var b [20]byte
	n, err := io.ReadFull(zr, b[:min(int64(len(b)), e.size)])
	if err != nil && err != io.ErrUnexpectedEOF {
		return 0, err
	}
	_, rest, ok := uvarint(b[:n])
	if !ok {
		return 0, errCorrupt
	}
	size, _, ok := uvarint(rest)
	if !ok {
		return 0, errCorrupt
	}
	return int64(size), nil
}

// read returns the type and whole content of object h; max ≥ 0 refuses (with
// errTooLarge) an object larger than max before inflating it.
func (ps *packStore) read(h plumbing.Hash, max int64) (plumbing.ObjectType, []byte, error) {
	if ps == nil {
		return 0, nil, errNotPacked
	}
	if err := ps.rlock(); err != nil {
		return 0, nil, err
	}
	defer ps.mu.RUnlock()
	p, off, ok := ps.locate(h)
	if !ok {
		return 0, nil, errNotPacked
	}
	t, data, err := ps.readAt(p, off, max)
	return objectType(t), data, err
}

var errTooLarge = errors.New("object too large")

// link is one delta of a chain being resolved.
type link struct {
	p     *pack
	off   int64
	delta []byte
}

// readAt returns the pack type and content of the entry at off of p, resolving
// delta chains. Bases met on the way are cached.
func (ps *packStore) readAt(p *pack, off int64, max int64) (int, []byte, error) {
	var chain []link
	var typ int
	var data []byte
	for {
		if t, d, ok := ps.bases.get(p, off); ok && len(chain) > 0 {
			typ, data = t, d
			break
		}
		raw, e, err := p.readEntry(off)
		if err != nil {
			return 0, nil, err
		}
		if len(chain) == 0 && max >= 0 && e.typ != packOfsDelta && e.typ != packRefDelta && e.size > max {
			return 0, nil, errTooLarge
		}
		body, err := inflateAll(raw, e.size)
		if err != nil {
			return 0, nil, err
		}
		if e.typ != packOfsDelta && e.typ != packRefDelta {
			typ, data = e.typ, body
			break
		}
		if len(chain) > 10000 {
			return 0, nil, errCorrupt // a cycle
		}
		chain = append(chain, link{p, off, body})
		if e.typ == packOfsDelta {
			off = e.baseOff
			continue
		}
		bp, boff, ok := ps.locate(e.baseID)
		if !ok {
			return 0, nil, errNotPacked
		}
		p, off = bp, boff
	}
	if len(chain) > 0 {
		ps.bases.put(p, off, typ, data)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if i == 0 && max >= 0 {
			if size, err := deltaSize(chain[i].delta); err != nil {
				return 0, nil, err
			} else if size > max {
				return 0, nil, errTooLarge
			}
		}
		out, err := applyDelta(data, chain[i].delta)
		if err != nil {
			return 0, nil, err
		}
		data = out
		if i > 0 {
			ps.bases.put(chain[i].p, chain[i].off, typ, data)
		}
	}
	return typ, data, nil
}

// readEntry reads the whole entry at off in one positioned read and returns its
// compressed data and parsed header.
func (p *pack) readEntry(off int64) ([]byte, entry, error) {
	end := p.end(off)
	if end < 0 {
		return nil, entry{}, errCorrupt
	}
	buf := make([]byte, end-off)
	if _, err := p.f.ReadAt(buf, off); err != nil {
		return nil, entry{}, err
	}
	e, err := p.parseHeader(buf[:min(len(buf), maxHeader)], off)
	if err != nil {
		return nil, entry{}, err
	}
	return buf[e.dataOff-off:], e, nil
}

// inflater is a pooled zlib reader over an input.
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
// and end there, its checksum verified.
func inflateAll(raw []byte, size int64) ([]byte, error) {
	// Deflate expands at most 1032:1: a larger claimed size is a corrupt header,
	// refused before allocating for it.
	if size > int64(len(raw))*1032+64 {
		return nil, fmt.Errorf("%w: entry claims %d bytes from %d compressed", errCorrupt, size, len(raw))
	}
	out := make([]byte, size)
	if err := inflateInto(out, raw); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return out, nil
}

// uvarint decodes a delta header's little-endian base-128 number.
func uvarint(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i, shift := 0, 0; i < len(b) && shift < 64; i, shift = i+1, shift+7 {
		v |= uint64(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}

// deltaSize returns the size of the object delta produces.
func deltaSize(delta []byte) (int64, error) {
	_, rest, ok := uvarint(delta)
	if !ok {
		return 0, errCorrupt
	}
	n, _, ok := uvarint(rest)
	if !ok || n > 1<<62 {
		return 0, errCorrupt
	}
	return int64(n), nil
}

// applyDelta applies a git delta (source size, target size, then copy and insert
// instructions) to base.
func applyDelta(base, delta []byte) ([]byte, error) {
	srcSize, rest, ok := uvarint(delta)
	if !ok || srcSize != uint64(len(base)) {
		return nil, errCorrupt
	}
	dstSize, rest, ok := uvarint(rest)
	if !ok || dstSize > 1<<40 {
		return nil, errCorrupt
	}
	// The claimed size is trusted for the allocation only up to 64 MiB: beyond,
	// out grows with what the instructions actually produce.
	out := make([]byte, 0, min(dstSize, 64<<20))
	for len(rest) > 0 {
		op := rest[0]
		rest = rest[1:]
		if op&0x80 == 0 {
			// Insert the next op bytes (op = 0 is reserved).
			n := int(op)
			if n == 0 || n > len(rest) {
				return nil, errCorrupt
			}
			out = append(out, rest[:n]...)
			rest = rest[n:]
			continue
		}
		// Copy from base: offset in up to four bytes, size in up to three, each
		// present when its bit of op is set.
		var off, size uint64
		for i := 0; i < 7; i++ {
			if op&(1<<i) == 0 {
				continue
			}
			if len(rest) == 0 {
				return nil, errCorrupt
			}
			if i < 4 {
				off |= uint64(rest[0]) << (8 * i)
			} else {
				size |= uint64(rest[0]) << (8 * (i - 4))
			}
			rest = rest[1:]
		}
		if size == 0 {
			size = 0x10000
		}
		if off+size > uint64(len(base)) || uint64(len(out))+size > dstSize {
			return nil, errCorrupt
		}
		out = append(out, base[off:off+size]...)
	}
	if uint64(len(out)) != dstSize {
		return nil, errCorrupt
	}
	return out, nil
}

// baseCache is a byte-bounded LRU cache of delta bases, keyed by pack and offset.
type baseCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	ll    *list.List
	items map[baseKey]*list.Element
}

type baseKey struct {
	p   *pack
	off int64
}

type baseItem struct {
	key  baseKey
	typ  int
	data []byte
}

func newBaseCache(max int64) *baseCache {
	return &baseCache{max: max, ll: list.New(), items: map[baseKey]*list.Element{}}
}

func (c *baseCache) get(p *pack, off int64) (int, []byte, bool) {
	if c.max <= 0 {
		return 0, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[baseKey{p, off}]
	if !ok {
		return 0, nil, false
	}
	c.ll.MoveToFront(e)
	it := e.Value.(*baseItem)
	return it.typ, it.data, true
}

// put caches data (which callers must not modify afterwards); objects over a
// quarter of the budget are not cached.
func (c *baseCache) put(p *pack, off int64, typ int, data []byte) {
	size := int64(len(data))
	if c.max <= 0 || size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := baseKey{p, off}
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[k] = c.ll.PushFront(&baseItem{key: k, typ: typ, data: data})
	c.used += size
	for c.used > c.max {
		last := c.ll.Back()
		it := last.Value.(*baseItem)
		c.ll.Remove(last)
		delete(c.items, it.key)
		c.used -= int64(len(it.data))
	}
}

func (c *baseCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.items)
	c.used = 0
}

func bufioReader(r io.Reader, size int) *bufio.Reader {
	return bufio.NewReaderSize(r, max(size, 16))
}
