package vfs

// MixID spreads an identity apart from its neighbours: a bijection on uint64
// (the splitmix64 finalizer). Layers that derive an [Info.ID] or an inode
// number from another one use it, so nearby inputs give unrelated outputs.
func MixID(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
