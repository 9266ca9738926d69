//go:build linux

package fuseexport

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
)

// TestSharedFileReadsOwnWrites: goroutines sharing one descriptor each write a
// record with pwrite and read it back with pread; every read sees its write, and
// the Dir holds every record. (With the kernel's write-through page cache on a
// writable descriptor, some reads saw zeros: see handle.openFlags.)
func TestSharedFileReadsOwnWrites(t *testing.T) {
	mem := memory.New()
	d, _ := dir.New(mem)
	mp, _ := mountT(t, d, Options{})
	f, err := os.OpenFile(mp+"/shared", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	bad := 0
	var mu sync.Mutex
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				off := int64((g*20 + i) * 64)
				v := []byte(fmt.Sprintf("%-63d\n", g*1000+i))
				if _, err := f.WriteAt(v, off); err != nil {
					t.Error(err)
				}
				buf := make([]byte, 64)
				f.ReadAt(buf, off)
				if !bytes.Equal(buf, v) {
					mu.Lock()
					bad++
					mu.Unlock()
				}
				if _, err := f.Stat(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	f.Close()
	data, _ := d.ReadFile(context.Background(), "shared")
	lost := 0
	for g := range 8 {
		for i := range 20 {
			off := (g*20 + i) * 64
			if string(data[off:off+64]) != fmt.Sprintf("%-63d\n", g*1000+i) {
				lost++
			}
		}
	}
	if bad+lost > 0 {
		t.Errorf("%d bad reads, %d lost writes", bad, lost)
	}
}
