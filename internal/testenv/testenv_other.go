//go:build !linux

package testenv

// shmParent is "" (the default temporary directory): no /dev/shm here.
func shmParent() string { return "" }

// unmountBeneath does nothing: checkouts are mounted only on Linux.
func unmountBeneath(dir string) {}
