package gitree

import "github.com/capfs/capfs/backends/gitree/internal/pack"

// Options that trade memory for speed. docs/design-notes.md has the figures
// behind the defaults.

// WithDirectPacks turns the direct pack reader on (the default) or off.
// On, the objects of pack files are read without go-git's object storage:
// concurrently, in one positioned read per entry, with delta bases cached
// ([WithDeltaBaseCacheSize]). Off, every object is read through go-git's storage
// under one lock, as objects outside packs (loose objects, alternates) always
// are. Then the reader's bounds on corrupt and hostile packs do not apply (see
// the package documentation).
func WithDirectPacks(on bool) Option {
	return func(c *config) { c.directPacks = on }
}

// WithDeltaBaseCacheSize sets the byte budget of the direct pack reader's cache
// of delta bases. The default is [DefaultDeltaBaseCacheSize]. 0 disables it, and
// every deltified object then inflates its whole chain. Objects larger than a
// quarter of the budget are not cached.
func WithDeltaBaseCacheSize(n int64) Option {
	return func(c *config) { c.deltaCache = n }
}

// DefaultDeltaBaseCacheSize is the default byte budget of the cache of delta
// bases ([WithDeltaBaseCacheSize]).
const DefaultDeltaBaseCacheSize = pack.DefaultDeltaBaseCacheSize

// DefaultObjectCacheSize is the default byte budget of go-git's object cache
// ([WithObjectCacheSize]), go-git's own default.
const DefaultObjectCacheSize = 96 << 20

// WithObjectCacheSize sets the byte budget of go-git's object cache, at least 1.
// The cache serves the objects read through go-git's storage (see
// [WithDirectPacks]).
func WithObjectCacheSize(n int64) Option {
	return func(c *config) { c.objectCache = n }
}

// WithLibraryInflater makes the direct pack reader inflate whole objects with
// github.com/klauspost/compress's zlib reader. The default is the package's own
// DEFLATE decoder. The checks are the same: exact size, checksum, index CRC. It
// exists to compare the two (go run ./bench/cmd/benchtable -only gitree prints
// both). Streamed blobs always use the package's decoder, which alone can resume
// at a checkpoint.
func WithLibraryInflater(on bool) Option {
	return func(c *config) { c.libInflate = on }
}
