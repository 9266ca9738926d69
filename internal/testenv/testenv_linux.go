//go:build linux

package testenv

import (
	"bufio"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// shmParent is /dev/shm when it is a writable tmpfs (where checkouts go by
// default), else "" (the default temporary directory).
func shmParent() string {
	var sfs unix.Statfs_t
	if unix.Statfs("/dev/shm", &sfs) == nil && sfs.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK|unix.X_OK) == nil {
		return "/dev/shm"
	}
	return ""
}

// unmountBeneath detaches every mount whose mount point lies beneath dir, the
// deepest first.
func unmountBeneath(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
}
