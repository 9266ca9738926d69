//go:build linux

package physical_test

// Race tests where the victim mutates the tree while the attacker swaps a
// directory for a link to outside: THREATS.md lines 40, 41 and 42 (attacks c and
// d).

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// emptyDirAt removes everything in the directory the handle dir names, by its
// /proc/self/fd path (which stays on that directory whatever its name now is).
// The attacker must be paused.
func emptyDirAt(t testing.TB, dir int) {
	t.Helper()
	p := "/proc/self/fd/" + strconv.Itoa(dir)
	ents, err := os.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRaceSwapUnderCreate covers line 40 and the Mkdir part of attack (c): the
// attacker swaps directory p with plink -> outside/pdir while the victim creates
// names under p every way there is (Mkdir, CreateDir, MkdirAll, Symlink,
// WriteFile, CreateFile, Open with O_CREATE, Link). Nothing is ever created in
// outside/pdir.
func TestRaceSwapUnderCreate(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("victim", insideData)
		w.mkdir("p")
		must(t, os.Mkdir(w.out("pdir"), 0o755))
		w.link("../outside/pdir", "plink")
		rootfd, pfd, outfd := openPath(t, w.root), openPath(t, w.host("p")), openPath(t, w.out("pdir"))
		before := w.outsideSnap()
		r := newRaceRun(t, w, "swap-under-create/"+modeName(mode))
		a := r.startAttacker(func(int) { exchange(rootfd, "p", "plink") })
		for i := range raceOps(t) {
			r.op()
			name := "n" + strconv.Itoa(i)
			s := "p/" + name
			var err error
			switch i % 8 {
			case 0:
				err = w.fs.Mkdir(w.ctx, p(s), 0o755)
			case 1:
				_, err = w.dir.CreateDir(w.ctx, s)
			case 2:
				err = w.dir.MkdirAll(w.ctx, s+"/x")
			case 3:
				err = w.dir.Symlink(w.ctx, "../victim", s)
			case 4:
				err = w.dir.WriteFile(w.ctx, s, []byte("W"), 0o644)
			case 5:
				_, err = w.dir.CreateFile(w.ctx, s)
			case 6:
				h, oerr := w.dir.Open(w.ctx, s, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err = oerr; err == nil {
					err = h.Close()
				}
			case 7:
				err = w.dir.Link(w.ctx, "victim", s)
			}
			r.failed("create "+s, err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeConflict, vfs.CodeNotDir)
			if existsAt(outfd, name) {
				r.escape("op %d created %s outside the root", i%8, name)
			}
			if i%128 == 127 {
				a.pause()
				emptyDirAt(t, pfd)
				a.resume()
			}
		}
		a.stop()
		w.intact("creating under a swapped directory", before)
		r.finish()
	})
}

// TestRaceSwapUnderRename covers line 42 (attack c, rename): the attacker swaps
// both a and b with links to outside/adir and outside/bdir while the victim
// renames a/x to b/x (backend Rename, Dir.Move, RENAME_NOREPLACE). No file is
// ever moved into outside/bdir, and the decoy outside/adir/x is never pulled in.
func TestRaceSwapUnderRename(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.mkdir("a")
		w.mkdir("b")
		must(t, os.Mkdir(w.out("adir"), 0o755))
		must(t, os.Mkdir(w.out("bdir"), 0o755))
		w.link("../outside/adir", "alink")
		w.link(w.out("bdir"), "blink")
		rootfd, afd, bfd := openPath(t, w.root), openPath(t, w.host("a")), openPath(t, w.host("b"))
		oafd, obfd := openPath(t, w.out("adir")), openPath(t, w.out("bdir"))
		r := newRaceRun(t, w, "swap-under-rename/"+modeName(mode))
		a := r.startAttacker(func(i int) {
			if i%2 == 0 {
				exchange(rootfd, "a", "alink")
			} else {
				exchange(rootfd, "b", "blink")
			}
		})
		for i := range raceOps(t) {
			r.op()
			name := "x" + strconv.Itoa(i)
			for _, dir := range []int{afd, oafd} {
				fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(fd)
			}
			var err error
			switch i % 3 {
			case 0:
				err = w.fs.Rename(w.ctx, p("a/"+name), p("b/"+name), 0)
			case 1:
				err = w.dir.Move(w.ctx, "a/"+name, "b/"+name)
			case 2:
				err = w.fs.Rename(w.ctx, p("a/"+name), p("b/"+name), vfs.RenameNoReplace)
			}
			r.failed("rename a/"+name, err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeConflict)
			if existsAt(obfd, name) {
				r.escape("rename %d moved %s into outside/bdir", i%3, name)
			}
			if !existsAt(oafd, name) {
				r.escape("rename %d took %s out of outside/adir", i%3, name)
			}
			unix.Unlinkat(afd, name, 0)
			unix.Unlinkat(bfd, name, 0)
			unix.Unlinkat(oafd, name, 0)
			unix.Unlinkat(obfd, name, 0)
		}
		a.stop()
		r.finish()
	})
}

// TestRaceSwapUnderRemoveAll covers line 41 (attack c, RemoveAll): in each round
// the victim removes the tree "tree" through a Dir while the attacker swaps
// tree/sub between a directory and a link to outside/victimdir (absolute in even
// rounds, relative in odd ones). Every outside file survives every round. Each
// backend call RemoveAll makes (Lstat, ReadDir, Remove) counts as one raced
// operation: each resolves a path under attack.
func TestRaceSwapUnderRemoveAll(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		vd := w.out("victimdir")
		outsideFiles := []string{"f1", "f2", "d/f3", "d/e/f4"}
		plantOutside := func() {
			for _, f := range outsideFiles {
				must(t, os.MkdirAll(filepath.Dir(filepath.Join(vd, f)), 0o755))
				must(t, os.WriteFile(filepath.Join(vd, f), []byte(outsideData), 0o644))
			}
		}
		plantOutside()
		before := w.outsideSnap()
		rootfd := openPath(t, w.root)
		var treefd atomic.Int64
		treefd.Store(-1)
		plantTree := func(round int) {
			for _, d := range []string{"tree", "tree/sub", "tree/sub/d", "tree/sub/d/e"} {
				must(t, unix.Mkdirat(rootfd, d, 0o755))
			}
			for _, f := range []string{"tree/sub/f1", "tree/sub/f2", "tree/sub/d/f3", "tree/sub/d/e/f4", "tree/g"} {
				fd, err := unix.Openat(rootfd, f, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				must(t, err)
				unix.Close(fd)
			}
			target := vd
			if round%2 == 1 {
				target = "../../outside/victimdir"
			}
			must(t, unix.Symlinkat(target, rootfd, "tree/sublink"))
			fd, err := unix.Openat(rootfd, "tree", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			must(t, err)
			treefd.Store(int64(fd))
		}
		r := newRaceRun(t, w, "swap-under-removeall/"+modeName(mode))
		cb := &countedBackend{Backend: w.fs, n: &r.ops}
		d, _ := dir.New(cb)
		a := r.startAttacker(func(int) {
			if fd := int(treefd.Load()); fd >= 0 {
				exchange(fd, "sub", "sublink")
			}
		})
		a.pause()
		budget := int64(raceOps(t))
		for round := 0; r.ops.Load() < budget; round++ {
			plantTree(round)
			a.resume()
			err := d.RemoveAll(w.ctx, "tree")
			a.pause()
			r.failed("RemoveAll(tree)", err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeNotEmpty, vfs.CodeNotDir, vfs.CodeIsDir, vfs.CodeConflict)
			missing := 0
			for _, f := range outsideFiles {
				if b, err := os.ReadFile(filepath.Join(vd, f)); err != nil || string(b) != outsideData {
					missing++
				}
			}
			if missing > 0 {
				r.escape("round %d: RemoveAll removed or changed %d outside files", round, missing)
				plantOutside()
			}
			unix.Close(int(treefd.Swap(-1)))
			must(t, os.RemoveAll(w.host("tree")))
		}
		a.resume()
		a.stop()
		if r.escapes.Load() == 0 {
			w.intact("RemoveAll rounds", before)
		}
		r.finish()
	})
}

// TestRaceMkdirAll covers line 40 (attack d): N goroutines run MkdirAll on the
// same new path at once, round after round, and all succeed (no spurious
// already_exists); and, with the attacker swapping m for a link to outside/mdir
// and moving it away and back, concurrent MkdirAll calls under m never create
// anything outside.
func TestRaceMkdirAll(t *testing.T) {
	const goroutines = 8
	t.Run("parallel", func(t *testing.T) {
		eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
			w := newWorld(t, mode)
			r := newRaceRun(t, w, "parallel-mkdirall/"+modeName(mode))
			rounds := max(1, raceOps(t)/goroutines)
			for round := range rounds {
				s := "m" + strconv.Itoa(round) + "/x/y/z"
				var wg sync.WaitGroup
				start := make(chan struct{})
				errs := make([]error, goroutines)
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						errs[g] = w.dir.MkdirAll(w.ctx, s)
					}()
				}
				close(start)
				wg.Wait()
				for _, err := range errs {
					r.op()
					if err != nil {
						r.failed("parallel MkdirAll("+s+")", err)
						t.Errorf("parallel MkdirAll(%s): %v", s, err)
					}
				}
				if fi, err := os.Stat(w.host(s)); err != nil || !fi.IsDir() {
					t.Errorf("after parallel MkdirAll, %s: %v", s, err)
				}
			}
			if got := hostEntries(t, w.tmp); !slices.Equal(got, []string{"outside", "root"}) {
				t.Errorf("the root's parent holds %v", got)
			}
			r.finish()
		})
	})
	t.Run("swap", func(t *testing.T) {
		eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
			w := newWorld(t, mode)
			w.mkdir("m")
			must(t, os.Mkdir(w.out("mdir"), 0o755))
			w.link("../outside/mdir", "mlink")
			rootfd, mfd, outfd := openPath(t, w.root), openPath(t, w.host("m")), openPath(t, w.out("mdir"))
			before := w.outsideSnap()
			r := newRaceRun(t, w, "swap-under-mkdirall/"+modeName(mode))
			a := r.startAttacker(func(i int) {
				switch i % 3 {
				case 0, 1:
					exchange(rootfd, "m", "mlink")
				case 2: // away and back: m is missing for a moment
					// NOREPLACE both ways: the attacker never deletes a
					// directory by renaming over it.
					if unix.Renameat2(rootfd, "m", rootfd, "m-away", unix.RENAME_NOREPLACE) == nil {
						unix.Renameat2(rootfd, "m-away", rootfd, "m", unix.RENAME_NOREPLACE)
					}
				}
			})
			rounds := max(1, raceOps(t)/2)
			for round := range rounds {
				name := "r" + strconv.Itoa(round)
				var wg sync.WaitGroup
				for range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := w.dir.MkdirAll(w.ctx, "m/"+name+"/s/t")
						r.op()
						r.failed("MkdirAll(m/"+name+"/s/t)", err, vfs.CodeOutside, vfs.CodeNotFound, vfs.CodeNotDir, vfs.CodeConflict)
					}()
				}
				wg.Wait()
				if existsAt(outfd, name) {
					r.escape("MkdirAll created %s outside", name)
				}
				if round%64 == 63 {
					a.pause()
					emptyDirAt(t, mfd)
					a.resume()
				}
			}
			a.stop()
			w.intact("MkdirAll under a swapped directory", before)
			r.finish()
		})
	})
}
