package memory

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// knownCodes are the codes the mixed workload may legitimately produce.
var knownCodes = map[vfs.Code]bool{
	vfs.CodeNotFound: true, vfs.CodeExists: true, vfs.CodeNotDir: true, vfs.CodeIsDir: true,
	vfs.CodeNotEmpty: true, vfs.CodeInvalidPath: true, vfs.CodeQuota: true,
	vfs.CodeTooManyLinks: true, vfs.CodePermission: true, vfs.CodeOutside: true,
}

// TestConcurrentMixedOps runs goroutines mixing every operation over a small set
// of names, then checks the tree's invariants. Run it with -race.
func TestConcurrentMixedOps(t *testing.T) {
	const (
		workers = 8
		iters   = 300
		quota   = 16 << 10
	)
	m := New(WithQuota(quota))
	mkdirs(t, m, "d0", "d1", "d2")
	pick := func(r *rand.Rand) vfs.Path {
		dirs := []string{"d0", "d1", "d2", "d0/d1", "d1/d2"}
		leaf := []string{"a", "b", "c", "d1", "d2"}
		return P(dirs[r.IntN(len(dirs))] + "/" + leaf[r.IntN(len(leaf))])
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			var held []vfs.File
			defer func() {
				for _, f := range held {
					f.Close()
				}
			}()
			for i := range iters {
				p, q := pick(r), pick(r)
				var err error
				switch r.IntN(17) {
				case 0, 1:
					var f vfs.File
					f, err = m.OpenFile(bg, p, os.O_RDWR|os.O_CREATE, 0o644)
					if err == nil {
						_, err = f.Write(bytes.Repeat([]byte{byte(i)}, r.IntN(4096)))
						if r.IntN(4) == 0 && len(held) < 4 {
							held = append(held, f)
						} else {
							f.Close()
						}
					}
				case 2:
					var f vfs.File
					f, err = m.OpenFile(bg, p, os.O_WRONLY|os.O_APPEND, 0)
					if err == nil {
						_, err = f.Write([]byte("appended"))
						f.Close()
					}
				case 3:
					var f vfs.File
					f, err = m.OpenFile(bg, p, os.O_RDONLY, 0)
					if err == nil {
						_, err = io.ReadAll(f)
						f.Close()
					}
				case 4:
					_, err = m.Stat(bg, p)
				case 5:
					_, err = m.ReadDir(bg, p.Dir())
				case 6:
					err = m.Rename(bg, p, q, 0)
				case 7:
					err = m.Rename(bg, p, q, vfs.RenameExchange)
				case 8:
					err = m.Remove(bg, p)
				case 9:
					err = m.Mkdir(bg, p, 0o755)
				case 10:
					err = m.Symlink(bg, "../a", p)
				case 11:
					err = m.Link(bg, p, q)
				case 12:
					err = m.Chmod(bg, p, 0o600)
				case 13:
					var s vfs.Backend
					s, err = m.Sub(bg, p.Dir())
					if err == nil {
						_, err = s.ReadDir(bg, vfs.Root)
					}
				case 14:
					if len(held) > 0 {
						f := held[r.IntN(len(held))]
						_, err = f.WriteAt([]byte("held"), int64(r.IntN(8192)))
						if err == nil {
							err = f.Truncate(int64(r.IntN(8192)))
						}
					}
				case 15:
					if len(held) > 0 {
						f := held[0]
						held = held[1:]
						err = f.Close()
					}
				case 16:
					_, err = m.Lstat(bg, p)
				}
				if err != nil && err != io.EOF {
					var e *vfs.Error
					if !errors.As(err, &e) || !knownCodes[e.Code] {
						errs <- fmt.Errorf("op %d on %s/%s: unexpected error %v", i, p, q, err)
						return
					}
				}
			}
		}()
	}
	// A reader goroutine hammering one file's handle in parallel with the rest.
	wg.Add(1)
	go func() {
		defer wg.Done()
		writeErr := func() error {
			f, err := m.OpenFile(bg, P("d0/shared"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			buf := make([]byte, 64)
			for i := range iters {
				if _, err := f.WriteAt(buf[:8], int64(i%16)*8); err != nil && vfs.CodeOf(err) != vfs.CodeQuota {
					return err
				}
				if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
					return err
				}
			}
			return nil
		}()
		if writeErr != nil && !knownCodes[vfs.CodeOf(writeErr)] {
			errs <- writeErr
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkInvariants(t, m, quota)
}

// checkInvariants walks the whole tree and checks link counts, listing order,
// quota accounting and that every entry is reachable. No handles may be open.
func checkInvariants(t *testing.T, m *FS, quota int64) {
	t.Helper()
	structure, data := charges(m)
	used := structure + data
	m.st.mu.RLock()
	defer m.st.mu.RUnlock()
	seen := map[*node]bool{}
	var walk func(d *node, path string)
	walk = func(d *node, path string) {
		subdirs := 0
		for name, c := range d.dir.children {
			if c.typ == fs.ModeDir {
				subdirs++
				if c.dir.parent != d {
					t.Errorf("%s/%s: parent pointer wrong", path, name)
				}
				if c.dir.gone {
					t.Errorf("%s/%s: live directory marked gone", path, name)
				}
				walk(c, path+"/"+name)
				continue
			}
			if c.typ == 0 && !seen[c] {
				seen[c] = true
				c.mu.RLock()
				if c.size.Load() != int64(len(c.data)) {
					t.Errorf("%s/%s: size %d, data %d", path, name, c.size.Load(), len(c.data))
				}
				if o := c.opens.Load(); o != 0 {
					t.Errorf("%s/%s: %d opens after all handles closed", path, name, o)
				}
				c.mu.RUnlock()
			}
		}
		if got := int(d.nlink.Load()); got != 2+subdirs {
			t.Errorf("%s: nlink %d, want %d", path, got, 2+subdirs)
		}
		if got := d.size.Load(); got != int64(len(d.dir.children)) {
			t.Errorf("%s: size %d, want %d entries", path, got, len(d.dir.children))
		}
		l := d.listing(m.st)
		if len(l) != len(d.dir.children) || !slices.IsSortedFunc(l, func(a, b vfs.DirEntry) int {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}) {
			t.Errorf("%s: listing %v inconsistent with %d children", path, names(l), len(d.dir.children))
		}
		for _, e := range l {
			if c := d.dir.children[e.Name]; c == nil || c.typ != e.Type {
				t.Errorf("%s: stale listing entry %v", path, e)
			}
		}
	}
	walk(m.root, ".")
	// File link counts: every file's nlink equals the number of names found.
	count := map[*node]int{}
	var countLinks func(d *node)
	countLinks = func(d *node) {
		for _, c := range d.dir.children {
			if c.typ == fs.ModeDir {
				countLinks(c)
			} else {
				count[c]++
			}
		}
	}
	countLinks(m.root)
	for n, k := range count {
		if got := int(n.nlink.Load()); got != k {
			t.Errorf("inode %d: nlink %d, found %d names", n.id, got, k)
		}
	}
	if got := m.Usage(); got != used {
		t.Errorf("Usage() = %d, the reachable tree is charged %d (%d structure, %d file capacity)", got, used, structure, data)
	}
	if got := m.DataUsage(); got != data {
		t.Errorf("DataUsage() = %d, reachable file capacity is %d", got, data)
	}
	if used > quota {
		t.Errorf("usage %d exceeds quota %d", used, quota)
	}
}

// TestConcurrentHandle shares one handle between goroutines: Read and Write share
// the offset, so the bytes read plus written must account for every call.
func TestConcurrentHandle(t *testing.T) {
	m := New()
	f, err := m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	must(t, err)
	defer f.Close()
	const workers, per = 4, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := []byte{byte('a' + w), byte('a' + w), byte('a' + w), byte('a' + w)}
			for range per {
				if _, err := f.Write(rec); err != nil {
					t.Error(err)
					return
				}
				if _, err := f.Stat(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	data := make([]byte, workers*per*4)
	if n, err := f.ReadAt(data, 0); n != len(data) || err != nil {
		t.Fatalf("ReadAt = %d %v", n, err)
	}
	// O_APPEND writes are atomic: every 4-byte record is one writer's.
	for i := 0; i < len(data); i += 4 {
		if !bytes.Equal(data[i:i+4], bytes.Repeat(data[i:i+1], 4)) {
			t.Fatalf("torn record at %d: %q", i, data[i:i+4])
		}
	}
}

// TestConcurrentReadsShareOffset reads one handle from several goroutines at once:
// they share the offset, so every record is read exactly once, whole.
func TestConcurrentReadsShareOffset(t *testing.T) {
	m := New()
	const records = 1 << 15
	data := make([]byte, 0, records*4)
	for i := range records {
		data = binary.BigEndian.AppendUint32(data, uint32(i))
	}
	writeFile(t, m, "f", string(data))
	f, err := m.OpenFile(bg, P("f"), os.O_RDONLY, 0)
	must(t, err)
	defer f.Close()
	const workers = 4
	seen := make([][]uint32, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4)
			for {
				n, err := f.Read(buf)
				if err == io.EOF {
					return
				}
				if err != nil || n != 4 {
					t.Errorf("Read = %d, %v", n, err)
					return
				}
				seen[w] = append(seen[w], binary.BigEndian.Uint32(buf))
			}
		}()
	}
	wg.Wait()
	count := make([]int, records)
	for _, s := range seen {
		for _, r := range s {
			count[r]++
		}
	}
	for r, c := range count {
		if c != 1 {
			t.Fatalf("record %d read %d times", r, c)
		}
	}
}

// TestCloseRacesRemove closes the last handle of a file while another goroutine
// removes its last name: whichever comes second frees the data, exactly once.
func TestCloseRacesRemove(t *testing.T) {
	m := New(WithQuota(1 << 20))
	for i := range 200 {
		f, err := m.OpenFile(bg, P("f"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		must(t, err)
		if _, err := f.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		g, err := m.OpenFile(bg, P("f"), os.O_RDONLY, 0)
		must(t, err)
		var wg sync.WaitGroup
		wg.Add(3)
		for _, op := range []func() error{f.Close, g.Close, func() error { return m.Remove(bg, P("f")) }} {
			go func() {
				defer wg.Done()
				if err := op(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if u := m.Usage(); u != 0 {
			t.Fatalf("round %d: usage %d after the last name and handle are gone", i, u)
		}
		wantCode(t, f.Close(), vfs.CodeClosed)
	}
}

// TestReadFollowsAppends reads a file while another handle appends to it: a Read
// at the end reports io.EOF only until more data lands, and the reader sees every
// byte in order.
func TestReadFollowsAppends(t *testing.T) {
	m := New()
	w, err := m.OpenFile(bg, P("f"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	must(t, err)
	defer w.Close()
	r, err := m.OpenFile(bg, P("f"), os.O_RDONLY, 0)
	must(t, err)
	defer r.Close()
	const total = 1 << 14
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < total; i += 16 {
			rec := make([]byte, 16)
			for j := range rec {
				rec[j] = byte(i + j)
			}
			if _, err := w.Write(rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	buf := make([]byte, 7)
	got := 0
	for got < total {
		n, err := r.Read(buf)
		for j := range n {
			if buf[j] != byte(got+j) {
				t.Fatalf("byte %d = %d", got+j, buf[j])
			}
		}
		got += n
		if err == io.EOF {
			select {
			case <-done:
				// Every append has returned: the next Read must make progress.
				if n, err := r.Read(buf[:1]); got < total && (n != 1 || err != nil) {
					t.Fatalf("after all appends, at %d of %d: Read = %d, %v", got, total, n, err)
				} else if n == 1 {
					if buf[0] != byte(got) {
						t.Fatalf("byte %d = %d", got, buf[0])
					}
					got++
				}
			default:
				runtime.Gosched()
			}
			continue
		}
		must(t, err)
	}
	<-done
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end = %d, %v; want 0, EOF", n, err)
	}
}

// TestReadRacesClose reads an unlinked file through its last handle while another
// goroutine closes that handle (which frees the data): the Read either sees the
// whole contents or fails with closed, never an empty file.
func TestReadRacesClose(t *testing.T) {
	m := New()
	for i := range 300 {
		writeFile(t, m, "f", "0123456789")
		f, err := m.OpenFile(bg, P("f"), os.O_RDONLY, 0)
		must(t, err)
		must(t, m.Remove(bg, P("f")))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			n, err := f.Read(buf)
			if !(n == 10 && err == nil) && vfs.CodeOf(err) != vfs.CodeClosed {
				t.Errorf("round %d: Read racing Close = %d, %v", i, n, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if u := m.Usage(); u != 0 {
			t.Fatalf("round %d: usage %d after the last handle closed", i, u)
		}
	}
}
