package vfstest

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// valueLen is the length of every value the concurrency test writes, so a file
// written by several goroutines at offset 0 holds exactly one of them unless a
// write was torn.
const valueLen = 64

func value(g, i int) string {
	v := fmt.Sprintf("g%d-i%d:", g, i)
	return v + strings.Repeat("*", valueLen-1-len(v)) + "\n"
}

// validContent reports whether data is empty or one complete value.
func validContent(data []byte) bool {
	if len(data) == 0 {
		return true
	}
	var g, i int
	n, err := fmt.Sscanf(string(data), "g%d-i%d:", &g, &i)
	return n == 2 && err == nil && string(data) == value(g, i)
}

// allowed are the error codes racing operations may legitimately return.
var allowed = map[vfs.Code]bool{
	vfs.CodeNotFound: true, vfs.CodeExists: true, vfs.CodeNotEmpty: true,
}

func testConcurrency(t *testing.T, cfg Config) {
	goroutines, ops := cfg.Goroutines, cfg.OpsPerGoroutine
	if goroutines <= 0 {
		goroutines = 8
	}
	if ops <= 0 {
		ops = 200
	}

	t.Run("mixed", func(t *testing.T) {
		f := newFx(t, cfg)
		dirs := []string{"d0", "d1", "d2"}
		var files []string
		for _, d := range append([]string{""}, dirs...) {
			for i := range 4 {
				files = append(files, strings.TrimPrefix(d+"/f"+fmt.Sprint(i), "/"))
			}
		}
		for _, d := range dirs {
			f.mkdir(d)
		}
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 42))
				for i := range ops {
					concurrentOp(f, r, g, i, dirs, files)
				}
			}()
		}
		wg.Wait()
		checkInvariants(f)
	})

	t.Run("attackers", func(t *testing.T) { testAttackers(t, cfg, ops) })

	t.Run("shared-handle", func(t *testing.T) {
		f := newFx(t, cfg)
		h, err := f.b.OpenFile(f.ctx, p("shared"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatalf("OpenFile: %v", err)
		}
		defer h.Close()
		per := max(ops/10, 4)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					off := int64((g*per + i) * valueLen)
					if _, err := h.WriteAt([]byte(value(g, i)), off); err != nil {
						t.Errorf("WriteAt: %v", err)
						return
					}
					buf := make([]byte, valueLen)
					if _, err := h.ReadAt(buf, off); err != nil || string(buf) != value(g, i) {
						t.Errorf("ReadAt(%d) = %q, %v; want what this goroutine wrote", off, buf, err)
						return
					}
					if _, err := h.Stat(); err != nil {
						t.Errorf("Stat: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		data := f.read("shared")
		if len(data) != goroutines*per*valueLen {
			t.Fatalf("shared file has %d bytes; want %d", len(data), goroutines*per*valueLen)
		}
		for g := range goroutines {
			for i := range per {
				off := (g*per + i) * valueLen
				if got := data[off : off+valueLen]; got != value(g, i) {
					t.Fatalf("shared file at %d = %q; want %q", off, got, value(g, i))
				}
			}
		}
	})
}

// testAttackers runs the race lines of THREATS.md that apply to a virtual backend:
// an attacker swaps a directory for a link leaving a Sub (37) or moves a directory
// out of the Sub mid-walk (38) while a reader resolves paths through the Sub; the
// reader must never see what lies outside. And parallel MkdirAll calls on one path
// all succeed (40).
func testAttackers(t *testing.T, cfg Config, rounds int) {
	t.Run("37-exchange-dir-with-escaping-link", func(t *testing.T) {
		f := newFx(t, cfg, symlinks)
		f.seed("a/", "a/f=SECRET", "box/", "box/a/", "box/a/f=OK", "box/evil -> ../a")
		sub, err := f.b.Sub(f.ctx, p("box"))
		if err != nil {
			t.Fatalf("Sub(box): %v", err)
		}
		raceReads(f, sub, rounds, "a/f", func() error {
			return f.b.Rename(f.ctx, p("box/a"), p("box/evil"), vfs.RenameExchange)
		})
	})
	t.Run("38-move-dir-out-mid-walk", func(t *testing.T) {
		f := newFx(t, cfg, symlinks)
		f.seed("a/", "a/f=SECRET", "out/", "box/", "box/a/", "box/a/f=OK", "box/a/b/", "box/l -> a/b/../../a/f")
		sub, err := f.b.Sub(f.ctx, p("box"))
		if err != nil {
			t.Fatalf("Sub(box): %v", err)
		}
		in := true
		raceReads(f, sub, rounds, "l", func() error {
			from, to := "box/a/b", "out/b"
			if !in {
				from, to = to, from
			}
			in = !in
			return f.b.Rename(f.ctx, p(from), p(to), 0)
		})
	})
	t.Run("40-parallel-mkdirall", func(t *testing.T) {
		f := newFx(t, cfg)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := MkdirAll(f.ctx, f.b, p("x/y/z/w"), 0o755); err != nil {
					t.Errorf("parallel MkdirAll(x/y/z/w): %v", err)
				}
			}()
		}
		wg.Wait()
		f.wantNames("x/y/z", "w")
	})
}

// raceReads reads name through sub rounds times while attack runs rounds times in
// another goroutine, then twice more in lockstep (attack, read), so every state the
// attacker toggles between is read at least once. Every read must fail with a vfs
// error or return "OK". How the concurrent phase interleaves is up to the
// scheduler; nothing is asserted about it.
func raceReads(f *fx, sub vfs.Backend, rounds int, name string, attack func() error) {
	t := f.t
	ok := 0
	read := func(i int) {
		data, err := ReadFile(f.ctx, sub, p(name))
		switch {
		case err == nil && string(data) == "OK":
			ok++
		case err == nil:
			t.Errorf("read %d through the sub returned %q: a file outside the sub leaked", i, data)
		case vfs.CodeOf(err) == "":
			t.Errorf("read %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			if err := attack(); err != nil {
				t.Errorf("attacker: %v", err)
				return
			}
			runtime.Gosched()
		}
	}()
	for i := range rounds {
		read(i)
		runtime.Gosched()
	}
	wg.Wait()
	for i := range 2 {
		if err := attack(); err != nil {
			t.Fatalf("attacker: %v", err)
		}
		read(rounds + i)
	}
	t.Logf("%d reads, %d saw the inside file", rounds+2, ok)
}

// concurrentOp runs one random operation, checking only what holds under any
// interleaving.
func concurrentOp(f *fx, r *rand.Rand, g, i int, dirs, files []string) {
	t, ctx, b := f.t, f.ctx, f.b
	file := files[r.IntN(len(files))]
	dir := dirs[r.IntN(len(dirs))]
	report := func(what string, err error) {
		if err != nil && !allowed[vfs.CodeOf(err)] {
			t.Errorf("goroutine %d op %d: %s: %v", g, i, what, err)
		}
	}
	switch op := r.IntN(12); op {
	case 0, 1: // write a whole value at offset 0, never truncating
		h, err := b.OpenFile(ctx, p(file), os.O_WRONLY|os.O_CREATE, 0o644)
		report("OpenFile(O_CREATE) "+file, err)
		if err == nil {
			_, err = h.WriteAt([]byte(value(g, i)), 0)
			report("WriteAt "+file, err)
			report("Close "+file, h.Close())
		}
	case 2, 3: // read: empty or one complete value
		data, err := ReadFile(ctx, b, p(file))
		report("ReadFile "+file, err)
		if err == nil && !validContent(data) {
			t.Errorf("goroutine %d op %d: ReadFile(%s) = %q: torn or foreign content", g, i, file, data)
		}
	case 4: // rename a file over another file
		other := files[r.IntN(len(files))]
		report("Rename "+file+" "+other, b.Rename(ctx, p(file), p(other), 0))
	case 5:
		report("Remove "+file, b.Remove(ctx, p(file)))
	case 6: // list: sorted, unique
		d := dir
		if r.IntN(3) == 0 {
			d = "."
		}
		ents, err := b.ReadDir(ctx, p(d))
		report("ReadDir "+d, err)
		if !slices.IsSortedFunc(ents, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) }) ||
			len(slices.CompactFunc(slices.Clone(ents), func(a, b vfs.DirEntry) bool { return a.Name == b.Name })) != len(ents) {
			t.Errorf("goroutine %d op %d: ReadDir(%s) not sorted or has duplicates: %v", g, i, d, ents)
		}
	case 7:
		_, err := b.Stat(ctx, p(file))
		report("Stat "+file, err)
	case 8:
		report("Mkdir "+dir, b.Mkdir(ctx, p(dir), 0o755))
	case 9: // move a directory over another (empty) one, or fail with not_empty
		other := dirs[r.IntN(len(dirs))]
		report("Rename "+dir+" "+other, b.Rename(ctx, p(dir), p(other), 0))
	case 10:
		report("Remove "+dir, b.Remove(ctx, p(dir)))
	case 11: // a handle that outlives renames and removals of its name
		h, err := b.OpenFile(ctx, p(file), os.O_RDWR, 0)
		report("OpenFile(O_RDWR) "+file, err)
		if err != nil {
			return
		}
		_, err = h.WriteAt([]byte(value(g, i)), 0)
		report("WriteAt "+file, err)
		buf := make([]byte, valueLen)
		n, err := h.ReadAt(buf, 0)
		if err != nil && n != valueLen {
			t.Errorf("goroutine %d op %d: ReadAt after WriteAt on an open handle: %d bytes, %v", g, i, n, err)
		} else if !validContent(buf[:n]) {
			t.Errorf("goroutine %d op %d: open handle reads %q: torn", g, i, buf[:n])
		}
		report("Close "+file, h.Close())
	}
}

// checkInvariants walks the tree after the storm: every listed entry stats with
// the listed type, listings are sorted, and every file holds one complete value.
func checkInvariants(f *fx) {
	t := f.t
	var walk func(dir vfs.Path)
	walk = func(dir vfs.Path) {
		ents, err := f.b.ReadDir(f.ctx, dir)
		if err != nil {
			t.Errorf("invariants: ReadDir(%s): %v", dir, err)
			return
		}
		if !slices.IsSortedFunc(ents, func(a, b vfs.DirEntry) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("invariants: ReadDir(%s) not sorted: %v", dir, ents)
		}
		for _, e := range ents {
			c, err := dir.Child(e.Name)
			if err != nil {
				t.Errorf("invariants: ReadDir(%s) lists invalid name %q", dir, e.Name)
				continue
			}
			info, err := f.b.Lstat(f.ctx, c)
			if err != nil {
				t.Errorf("invariants: %s is listed but Lstat fails: %v", c, err)
				continue
			}
			if info.Mode.Type() != e.Type.Type() {
				t.Errorf("invariants: %s listed as %v, Lstat says %v", c, e.Type, info.Mode.Type())
			}
			switch {
			case info.Mode.IsDir():
				walk(c)
			case info.Mode.Type() == 0:
				data, err := ReadFile(f.ctx, f.b, c)
				if err != nil {
					t.Errorf("invariants: ReadFile(%s): %v", c, err)
				} else if !validContent(data) {
					t.Errorf("invariants: %s holds %q: torn or foreign content", c, data)
				}
				if int64(len(data)) != info.Size {
					t.Errorf("invariants: %s has %d bytes but Lstat says %d", c, len(data), info.Size)
				}
			default:
				if e.Type&fs.ModeSymlink == 0 {
					t.Errorf("invariants: %s has unexpected type %v", c, info.Mode)
				}
			}
		}
	}
	walk(vfs.Root)
}
