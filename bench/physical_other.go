//go:build !linux

package bench

import "time"

// physicalImpls is empty: the physical backend is Linux-only.
func physicalImpls() []HostImpl { return nil }

// TempFS describes the filesystem holding os.TempDir; only Linux tells.
func TempFS() string { return "unknown" }

// threadCPU is -1: the thread's CPU time is not measured here.
func threadCPU() time.Duration { return -1 }
