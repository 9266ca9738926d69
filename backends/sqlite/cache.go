package sqlite

import (
	"container/list"
	"sync"
)

// DefaultDataCache is the default budget of the data cache (WithDataCache).
const DefaultDataCache = 32 << 20

// WithDataCache sets the budget, in bytes, of the in-memory cache of file data
// chunks shared by every handle (DefaultDataCache by default; 0 turns it off).
// Writes fill it (write-through) and reads of a chunk it holds touch no SQLite
// connection; an entry is valid only for the file version it was made at, so a
// later write makes it unreachable at once.
func WithDataCache(bytes int64) Option {
	return func(c *config) { c.dataCache = max(bytes, 0) }
}

// dataCache is an LRU of chunks keyed by chunk id, each tagged with the node's
// data version (node.dirty) it holds.
type dataCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	m      map[int64]*list.Element
	lru    list.List // of *cacheEntry, most recent first
}

type cacheEntry struct {
	id   int64
	ver  uint64
	data []byte
}

func newDataCache(budget int64) *dataCache {
	if budget <= 0 {
		return nil
	}
	return &dataCache{budget: budget, m: map[int64]*list.Element{}}
}

// get copies chunk id at version ver into fill, reporting whether it held it.
func (c *dataCache) get(id int64, ver uint64, fill func(id int64, data []byte)) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[id]
	if !ok {
		return false
	}
	e := el.Value.(*cacheEntry)
	if e.ver != ver {
		return false
	}
	c.lru.MoveToFront(el)
	fill(id, e.data)
	return true
}

// put stores a copy of data as chunk id at version ver, evicting the least
// recently used chunks beyond the budget. A chunk larger than an eighth of the
// budget is not kept.
func (c *dataCache) put(id int64, ver uint64, data []byte) {
	if c == nil || int64(len(data)) > c.budget/8 {
		return
	}
	cp := append([]byte(nil), data...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[id]; ok {
		e := el.Value.(*cacheEntry)
		c.used += int64(len(cp)) - int64(len(e.data))
		e.ver, e.data = ver, cp
		c.lru.MoveToFront(el)
	} else {
		c.m[id] = c.lru.PushFront(&cacheEntry{id: id, ver: ver, data: cp})
		c.used += int64(len(cp))
	}
	for c.used > c.budget {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.m, e.id)
		c.used -= int64(len(e.data))
	}
}
