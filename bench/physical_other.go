//go:build !linux

package bench

// physicalImpls is empty: the physical backend is Linux-only.
func physicalImpls() []HostImpl { return nil }

// TempFS describes the filesystem holding os.TempDir; only Linux tells.
func TempFS() string { return "unknown" }
