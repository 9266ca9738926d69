package pack

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	"github.com/capfs/capfs/vfs"
)

// link is one delta of a chain being resolved.
type link struct {
	p     *pack
	off   int64
	e     entry
	raw   []byte // the entry's compressed data; nil: not read yet (a large entry)
	delta []byte // the inflated delta, when already inflated
}

// maxDeltaLen is the longest delta that can produce size bytes: two varint
// sizes (at most 10 bytes each) and instructions of at most 8 bytes (a copy)
// per byte produced.
func maxDeltaLen(size int64) int64 { return 20 + 8*size }

// readAt returns the pack type and content of the entry at off of p, resolving
// delta chains. Bases met on the way are cached. The chain is walked down first,
// keeping only the entries' compressed bytes (and not those of large entries),
// then applied from the base up, one delta inflated at a time.
func (ps *Store) readAt(p *pack, off int64, max int64) (int, []byte, error) {
	r := chainRead{ps: ps, max: max}
	p, off, err := r.down(p, off)
	if err != nil {
		return 0, nil, err
	}
	if len(r.chain) > 0 && !r.cached {
		ps.bases.put(p, off, r.typ, r.data)
	}
	if err := r.up(); err != nil {
		return 0, nil, err
	}
	return r.typ, r.data, nil
}

// chainRead is one readAt in progress: the delta chain walked so far and,
// once found, the base's type and content.
type chainRead struct {
	ps     *Store
	max    int64 // readAt's max
	chain  []link
	walk   chainWalk
	typ    int
	data   []byte
	cached bool // the base came from the cache
}

// down walks the delta chain from the entry at off of p to its base (or to a
// cached base), keeping each delta's link, and returns where the base is.
func (r *chainRead) down(p *pack, off int64) (*pack, int64, error) {
	for {
		if len(r.chain) > 0 {
			if t, d, ok := r.ps.bases.get(p, off); ok {
				r.typ, r.data, r.cached = t, d, true
				return p, off, nil
			}
		}
		raw, e, err := p.readEntry(off, wholeEntryMax)
		if err != nil {
			return nil, 0, err
		}
		if !isDelta(e.typ) {
			return p, off, r.base(p, off, raw, e)
		}
		l := link{p: p, off: off, e: e, raw: raw}
		if len(r.chain) == 0 {
			if err := r.top(&l); err != nil {
				return nil, 0, err
			}
		}
		r.chain = append(r.chain, l)
		if p, off, err = r.walk.next(r.ps, p, off, e); err != nil {
			return nil, 0, err
		}
	}
}

// base inflates the chain's base entry e (raw at off of p), or the object
// itself when there is no chain, within the bounds.
func (r *chainRead) base(p *pack, off int64, raw []byte, e entry) error {
	if len(r.chain) == 0 && r.max >= 0 && e.size > r.max {
		return ErrTooLarge
	}
	if len(r.chain) > 0 && e.size > maxDeltaResult {
		return tooLargeDelta(e.size)
	}
	data, err := p.inflateEntry(raw, e, off)
	if err != nil {
		return err
	}
	r.typ, r.data = e.typ, data
	return nil
}

// top inflates l, the delta the object itself is, and refuses an object over
// max, or over maxDeltaResult, before its chain is read.
func (r *chainRead) top(l *link) error {
	if r.max >= 0 && l.e.size > maxDeltaLen(r.max) {
		return ErrTooLarge
	}
	if l.e.size > maxDeltaLen(maxDeltaResult) {
		return tooLargeDelta(l.e.size)
	}
	var err error
	if l.delta, err = l.p.inflateEntry(l.raw, l.e, l.off); err != nil {
		return err
	}
	size, err := deltaSize(l.delta)
	switch {
	case err != nil:
		return err
	case r.max >= 0 && size > r.max:
		return ErrTooLarge
	case size > maxDeltaResult:
		return tooLargeDelta(size)
	}
	return nil
}

// up applies the chain's deltas from the base up, caching each result but
// the object's own.
func (r *chainRead) up() error {
	for i := len(r.chain) - 1; i >= 0; i-- {
		l := &r.chain[i]
		delta := l.delta
		if delta == nil {
			if l.e.size > maxDeltaLen(maxDeltaResult) {
				return tooLargeDelta(l.e.size)
			}
			var err error
			if delta, err = l.p.inflateEntry(l.raw, l.e, l.off); err != nil {
				return err
			}
		}
		out, err := applyDelta(r.data, delta)
		if err != nil {
			return corruptDelta(l.off, err)
		}
		r.data = out
		l.raw, l.delta = nil, nil
		if i > 0 {
			r.ps.bases.put(l.p, l.off, r.typ, r.data)
		}
	}
	return nil
}

// corruptDelta is the error of delta entry off that applyDelta refused.
func corruptDelta(off int64, err error) error {
	if vfs.CodeOf(err) != "" {
		return err
	}
	return Corrupt("delta at offset %d: %v", off, err)
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

// deltaSize returns the size of the object delta produces, as its header
// declares it.
func deltaSize(delta []byte) (int64, error) {
	_, rest, ok := uvarint(delta)
	if !ok {
		return 0, Corrupt("bad delta header")
	}
	n, _, ok := uvarint(rest)
	if !ok || n > 1<<62 {
		return 0, Corrupt("bad delta header")
	}
	return int64(n), nil
}

// applyDelta applies a git delta (source size, target size, then copy and insert
// instructions) to base. It checks every instruction against base and counts
// what they produce before allocating the result, which it allocates at exactly
// the declared size, and only when the instructions produce exactly that and it
// is at most maxDeltaResult.
func applyDelta(base, delta []byte) ([]byte, error) {
	srcSize, rest, ok := uvarint(delta)
	if !ok {
		return nil, errors.New("bad base size in delta header")
	}
	if srcSize != uint64(len(base)) {
		return nil, fmt.Errorf("delta expects a base of %d bytes, its base has %d", srcSize, len(base))
	}
	dstSize, rest, ok := uvarint(rest)
	if !ok {
		return nil, errors.New("bad result size in delta header")
	}
	if dstSize > maxDeltaResult {
		return nil, tooLargeDelta(int64(min(dstSize, 1<<62)))
	}
	// First pass: validate, and count the output.
	var produced uint64
	for ops := rest; len(ops) > 0; {
		op := ops[0]
		ops = ops[1:]
		var n uint64
		if op&0x80 == 0 {
			// Insert the next op bytes (op = 0 is reserved).
			if op == 0 {
				return nil, errors.New("reserved delta instruction 0")
			}
			if int(op) > len(ops) {
				return nil, errors.New("delta insert runs past the delta's end")
			}
			n, ops = uint64(op), ops[op:]
		} else {
			off, size, r, ok := copyOp(op, ops)
			if !ok {
				return nil, errors.New("truncated delta copy instruction")
			}
			if off+size > uint64(len(base)) {
				return nil, fmt.Errorf("delta copies %d bytes at %d from a base of %d", size, off, len(base))
			}
			n, ops = size, r
		}
		produced += n
		if produced > dstSize {
			return nil, fmt.Errorf("delta produces more than the %d bytes it declares", dstSize)
		}
	}
	if produced != dstSize {
		return nil, fmt.Errorf("delta produces %d bytes, declares %d", produced, dstSize)
	}
	// Second pass: build the result; every instruction is known good.
	out := make([]byte, dstSize)
	w := 0
	for len(rest) > 0 {
		op := rest[0]
		rest = rest[1:]
		if op&0x80 == 0 {
			w += copy(out[w:], rest[:op])
			rest = rest[op:]
			continue
		}
		off, size, r, _ := copyOp(op, rest)
		w += copy(out[w:], base[off:off+size])
		rest = r
	}
	return out, nil
}

// copyOp decodes a delta copy instruction's operands after its opcode op: an
// offset in up to four bytes and a size in up to three, each present when its
// bit of op is set; a size of 0 means 0x10000.
func copyOp(op byte, b []byte) (off, size uint64, rest []byte, ok bool) {
	for i := 0; i < 7; i++ {
		if op&(1<<i) == 0 {
			continue
		}
		if len(b) == 0 {
			return 0, 0, nil, false
		}
		if i < 4 {
			off |= uint64(b[0]) << (8 * i)
		} else {
			size |= uint64(b[0]) << (8 * (i - 4))
		}
		b = b[1:]
	}
	if size == 0 {
		size = 0x10000
	}
	return off, size, b, true
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
