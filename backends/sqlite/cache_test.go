package sqlite

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/capfs/capfs/vfs/vfstest"
)

// TestDataCache: reads see every write whether the chunk comes from the cache
// or from SQLite, with a cache that evicts all the time, none, and the default;
// the cache never outgrows its budget.
func TestDataCache(t *testing.T) {
	for _, budget := range []int64{0, 40 << 10, DefaultDataCache} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			f, _ := newFS(t, WithChunkSize(64<<10), WithDataCache(budget))
			for round := range 3 {
				for i := range 40 {
					data := bytes.Repeat([]byte{byte(round*40 + i)}, 1000+i*100)
					if round == 1 && i%2 == 0 {
						// In place through a handle: a partial chunk patched.
						h, err := f.OpenFile(bg, P(fmt.Sprintf("f%d", i)), os.O_RDWR, 0)
						must(t, err)
						_, err = h.WriteAt(data[:500], 100)
						must(t, err)
						must(t, h.Close())
						continue
					}
					must(t, vfstest.WriteFile(bg, f, P(fmt.Sprintf("f%d", i)), data))
				}
				for i := range 40 {
					got, err := vfstest.ReadFile(bg, f, P(fmt.Sprintf("f%d", i)))
					must(t, err)
					want := bytes.Repeat([]byte{byte(round*40 + i)}, 1000+i*100)
					if round == 1 && i%2 == 0 {
						want = bytes.Repeat([]byte{byte(i)}, 1000+i*100)
						copy(want[100:600], bytes.Repeat([]byte{byte(40 + i)}, 500))
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("round %d, f%d: wrong content", round, i)
					}
				}
			}
			if c := f.st.cache; c != nil && c.used > c.budget {
				t.Fatalf("cache holds %d bytes over its %d budget", c.used, c.budget)
			}
		})
	}
}
