//go:build linux

package fuseexport

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
)

// TestRevocationDropsKernelCaches: once the exported Dir is revoked, what the
// kernel cached of the mount is dropped, so a stat of a name it had cached
// and a read of a file a process still holds open (whose pages it had
// cached) reach the Dir and fail, though the mount's timeouts are an hour.
// Before, both were answered from the kernel's caches until the timeouts
// ran out.
func TestRevocationDropsKernelCaches(t *testing.T) {
	d, ctl := dir.New(memory.New())
	mp, _ := mountT(t, d, Options{EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	f, g := filepath.Join(mp, "f"), filepath.Join(mp, "g")
	for _, p := range []string{f, g} {
		if err := os.WriteFile(p, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// g is never read (a read expires its atime, so the next stat asks).
	if _, err := os.Stat(g); err != nil {
		t.Fatal(err)
	}
	h, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, 6)
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	ctl.Revoke()
	// The notifications land just after Revoke returns: wait for the stat and
	// the read to fail (from the caches they would succeed for an hour).
	deadline := time.Now().Add(10 * time.Second)
	var statErr, readErr error
	for {
		_, statErr = os.Stat(g)
		_, readErr = h.ReadAt(buf, 0)
		if statErr != nil && readErr != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if statErr == nil {
		t.Error("stat of a cached name succeeds after revocation; want a refusal")
	}
	var errno syscall.Errno
	if !errors.As(readErr, &errno) || errno != syscall.EACCES {
		t.Errorf("read of the open file after revocation: %v (read %q); want EACCES", readErr, buf)
	}
}
