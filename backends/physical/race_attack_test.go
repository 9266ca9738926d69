//go:build linux

package physical_test

// Race tests where the victim reads (or writes in place) while the attacker swaps
// names: THREATS.md lines 31, 32, 37, 38, 39, 44 and 46.

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// exchangeSetup plants the tree of attack (a): root/a/f = "OK", root/evil -> the
// outside directory (relative or absolute), outside/f = outsideData and
// outside/only-outside. It returns an O_PATH handle of the root for the
// attacker, and the inode of outside/f.
func exchangeSetup(t testing.TB, w *world, absolute bool) (rootfd int, outsideIno uint64) {
	t.Helper()
	w.file("a/f", "OK")
	must(t, os.WriteFile(w.out("f"), []byte(outsideData), 0o644))
	must(t, os.WriteFile(w.out("only-outside"), nil, 0o644))
	target := "../outside"
	if absolute {
		target = w.outside
	}
	w.link(target, "evil")
	outfd := openPath(t, w.outside)
	return openPath(t, w.root), inodeAt(t, outfd, "f")
}

// TestRaceExchangeDirWithLink covers line 37 (attack a): the attacker swaps
// directory a and the link evil -> outside with RENAME_EXCHANGE, as fast as it
// can, while the victim opens and reads a/f (backend and Dir), stats it and lists
// a. No read returns outside content, no Stat returns the outside inode, no
// listing shows an outside name.
func TestRaceExchangeDirWithLink(t *testing.T) {
	for _, abs := range []bool{false, true} {
		name := "relative"
		if abs {
			name = "absolute"
		}
		t.Run(name, func(t *testing.T) {
			eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
				w := newWorld(t, mode)
				rootfd, outIno := exchangeSetup(t, w, abs)
				r := newRaceRun(t, w, "exchange-dir-with-link/"+name+"/"+modeName(mode))
				a := r.startAttacker(func(int) { exchange(rootfd, "a", "evil") })
				n := raceOps(t)
				for i := range n {
					r.op()
					switch i % 4 {
					case 0:
						got, err := w.readBackend("a/f")
						r.failed("backend read a/f", err)
						if err == nil && got != "OK" {
							r.escape("backend read of a/f returned %q", got)
						}
					case 1:
						got, err := w.dir.ReadFile(w.ctx, "a/f")
						r.failed("Dir.ReadFile(a/f)", err)
						if err == nil && string(got) != "OK" {
							r.escape("Dir.ReadFile(a/f) returned %q", got)
						}
					case 2:
						info, err := w.fs.Stat(w.ctx, p("a/f"))
						r.failed("backend Stat(a/f)", err)
						if err == nil && info.ID == outIno {
							r.escape("Stat(a/f) returned the outside file's inode")
						}
					case 3:
						names, err := w.dir.List(w.ctx, "a")
						r.failed("Dir.List(a)", err)
						if slices.Contains(names, "only-outside") {
							r.escape("List(a) listed the outside directory: %v", names)
						}
					}
				}
				a.stop()
				r.finish()
			})
		})
	}
}

func modeName(mode physical.ResolverMode) string {
	switch mode {
	case physical.ResolverOpenat2:
		return "openat2"
	case physical.ResolverPortable:
		return "portable"
	}
	return "auto"
}

// TestRaceRenameOutMidWalk covers line 38 (attack b): the victim resolves links
// whose targets walk down into a/b and climb back with ".." (guest paths are
// cleaned lexically, so the ".." must come from link targets), while the attacker
// moves a/b out of the root (into outside/x) and back. Were ".." taken from the
// moved directory, it would reach outside/a/f; no read ever returns it.
func TestRaceRenameOutMidWalk(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("a/f", "OK")
		w.mkdir("a/b/c/d")
		w.link("a/b/../../a/f", "l1")
		w.link("a/b/c/../../../a/f", "l2")
		w.link("a/b/c/d/../../../../a/f", "l3")
		w.link("b/c/../../f", "a/l4")
		must(t, os.MkdirAll(w.out("x"), 0o755))
		must(t, os.MkdirAll(w.out("a"), 0o755))
		must(t, os.WriteFile(w.out("a/f"), []byte(outsideData), 0o644))
		must(t, os.WriteFile(w.out("f"), []byte(outsideData), 0o644))
		afd, xfd := openPath(t, w.host("a")), openPath(t, w.out("x"))
		r := newRaceRun(t, w, "rename-out-mid-walk/"+modeName(mode))
		a := r.startAttacker(func(i int) {
			if i%2 == 0 {
				unix.Renameat(afd, "b", xfd, "b")
			} else {
				unix.Renameat(xfd, "b", afd, "b")
			}
		})
		links := []string{"l1", "l2", "l3", "a/l4"}
		for i := range raceOps(t) {
			r.op()
			l := links[i%len(links)]
			var got []byte
			var err error
			if i%2 == 0 {
				got, err = w.dir.ReadFile(w.ctx, l)
			} else {
				var s string
				s, err = w.readBackend(l)
				got = []byte(s)
			}
			r.failed("read "+l, err, vfs.CodeNotFound, vfs.CodeOutside, vfs.CodeConflict, vfs.CodeIO)
			if err == nil && string(got) != "OK" {
				r.escape("read of %s returned %q", l, got)
			}
		}
		a.stop()
		r.finish()
	})
}

// TestRaceRootSwap covers line 39 (and the race form of 51): the attacker swaps
// the root directory itself with a decoy beside it (RENAME_EXCHANGE of their
// host names) while the victim reads and writes: every call stays on the
// original directory, through its handle.
func TestRaceRootSwap(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("f", "OK")
		w.file("d/g", "OK")
		decoy := filepath.Join(w.tmp, "decoy")
		must(t, os.MkdirAll(filepath.Join(decoy, "d"), 0o755))
		must(t, os.WriteFile(filepath.Join(decoy, "f"), []byte(outsideData), 0o644))
		must(t, os.WriteFile(filepath.Join(decoy, "d", "g"), []byte(outsideData), 0o644))
		tmpfd, rootfd, decoyfd := openPath(t, w.tmp), openPath(t, w.root), openPath(t, decoy)
		r := newRaceRun(t, w, "root-swap/"+modeName(mode))
		a := r.startAttacker(func(int) { exchange(tmpfd, "root", "decoy") })
		for i := range raceOps(t) {
			r.op()
			switch i % 3 {
			case 0, 1:
				s := []string{"f", "d/g"}[i%3]
				got, err := w.dir.ReadFile(w.ctx, s)
				r.failed("ReadFile("+s+")", err)
				if err != nil || string(got) != "OK" {
					r.escape("ReadFile(%s) = %q, %v; want the original root's file", s, got, err)
				}
			case 2:
				name := "w" + strconv.Itoa(i)
				err := w.dir.WriteFile(w.ctx, name, []byte("W"), 0o644)
				r.failed("WriteFile", err)
				if existsAt(decoyfd, name) {
					r.escape("WriteFile(%s) landed in the decoy", name)
				}
				if err == nil && !existsAt(rootfd, name) {
					r.escape("WriteFile(%s) did not land in the original root", name)
				}
				unix.Unlinkat(rootfd, name, 0)
			}
		}
		a.stop()
		r.finish()
	})
}

// TestRaceFileSwappedForLink covers lines 44 and 32 (race form): the attacker
// swaps the regular file f, in turn, with a link to the outside secret and with a
// FIFO, while the victim reads f and writes to it in place: a read returns "OK"
// or fails (never outside content, never blocks on the FIFO), and a write never
// reaches the outside file.
func TestRaceFileSwappedForLink(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("f", "OK")
		w.link("../outside/secret", "evil")
		must(t, unix.Mkfifo(w.host("fifo"), 0o666))
		rootfd := openPath(t, w.root)
		r := newRaceRun(t, w, "file-swapped-for-link-or-fifo/"+modeName(mode))
		var progress atomic.Int64
		watchdog := startWatchdog(t, &progress, releaseFIFO(w.host("fifo")))
		a := r.startAttacker(func(i int) {
			if i%2 == 0 {
				exchange(rootfd, "f", "evil")
			} else {
				exchange(rootfd, "f", "fifo")
			}
		})
		for i := range raceOps(t) {
			r.op()
			progress.Add(1)
			switch i % 4 {
			case 0:
				got, err := w.dir.ReadFile(w.ctx, "f")
				r.failed("ReadFile(f)", err, vfs.CodeOutside, vfs.CodeNotRegular, vfs.CodeNotFound, vfs.CodeConflict)
				if err == nil && string(got) != "OK" {
					r.escape("ReadFile(f) returned %q", got)
				}
			case 1:
				got, err := w.readBackend("f")
				r.failed("backend read f", err, vfs.CodeOutside, vfs.CodeNotRegular, vfs.CodeNotFound, vfs.CodeConflict)
				if err == nil && got != "OK" {
					r.escape("backend read of f returned %q", got)
				}
			case 2:
				// A FIFO swapped in between the type check and the open (on the
				// fallback path) makes the non-blocking open fail with ENXIO (no
				// reader): not_regular_file.
				h, err := w.dir.Open(w.ctx, "f", os.O_WRONLY, 0)
				r.failed("Open(f, O_WRONLY)", err, vfs.CodeOutside, vfs.CodeNotRegular, vfs.CodeNotFound, vfs.CodeConflict)
				if err == nil {
					h.WriteAt([]byte("OK"), 0)
					h.Close()
				}
			case 3:
				err := w.dir.Append(w.ctx, "f", nil)
				r.failed("Append(f)", err, vfs.CodeOutside, vfs.CodeNotRegular, vfs.CodeNotFound, vfs.CodeConflict)
			}
			if i%16 == 15 {
				if b, _ := os.ReadFile(w.out("secret")); string(b) != outsideData {
					r.escape("outside/secret changed to %q", b)
					os.WriteFile(w.out("secret"), []byte(outsideData), 0o644)
				}
			}
		}
		a.stop()
		watchdog()
		if b, _ := os.ReadFile(w.out("secret")); string(b) != outsideData {
			r.escape("outside/secret changed to %q", b)
		}
		r.finish()
	})
}

// startWatchdog fails t if progress stops moving for hangLimit (a victim call
// blocked, as os.Root blocks on a FIFO), calling release to unblock it. The
// returned function stops the watchdog. It asserts nothing about speed.
func startWatchdog(t testing.TB, progress *atomic.Int64, release func()) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last, since := progress.Load(), time.Now()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if n := progress.Load(); n != last {
					last, since = n, time.Now()
				} else if time.Since(since) > hangLimit {
					t.Errorf("a victim call has been blocked for %v", hangLimit)
					release()
					since = time.Now()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// TestRaceHardLinkTruncate covers line 31 (race form): the attacker swaps the
// private file f with hl, a hard link to the outside secret, while the victim
// writes f every way there is (O_TRUNC, in place at 0, O_APPEND, atomic
// WriteFile). The outside file never changes: writes through a name with other
// links go to a private copy.
func TestRaceHardLinkTruncate(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("f", "PRIVATE")
		must(t, os.Link(w.out("secret"), w.host("hl")))
		rootfd := openPath(t, w.root)
		r := newRaceRun(t, w, "hard-link-truncate/"+modeName(mode))
		a := r.startAttacker(func(int) { exchange(rootfd, "f", "hl") })
		allowed := []vfs.Code{vfs.CodeConflict, vfs.CodeNotFound}
		for i := range raceOps(t) {
			r.op()
			var err error
			switch i % 4 {
			case 0:
				h, oerr := w.dir.Open(w.ctx, "f", os.O_WRONLY|os.O_TRUNC, 0)
				if err = oerr; err == nil {
					h.Write([]byte("GUEST"))
					err = h.Close()
				}
			case 1:
				f, oerr := w.fs.OpenFile(w.ctx, p("f"), os.O_RDWR, 0)
				if err = oerr; err == nil {
					f.WriteAt([]byte("GU"), 0)
					err = f.Close()
				}
			case 2:
				err = w.dir.Append(w.ctx, "f", []byte("+"))
			case 3:
				err = w.dir.WriteFile(w.ctx, "f", []byte("GUEST"), 0o644)
			}
			r.failed("write f", err, allowed...)
			if b, _ := os.ReadFile(w.out("secret")); !bytes.Equal(b, []byte(outsideData)) {
				r.escape("outside/secret changed to %q (op %d)", b, i%4)
				os.WriteFile(w.out("secret"), []byte(outsideData), 0o644)
			}
			if i%64 == 63 {
				// Keep the race going: hl must stay a second name of the secret.
				// The attacker may have paused with f and hl exchanged (f then names
				// the secret): remove both names before writing f anew, or this
				// very restore would write through the link.
				a.pause()
				unix.Unlinkat(rootfd, "hl", 0)
				unix.Unlinkat(rootfd, "f", 0)
				os.Link(w.out("secret"), w.host("hl"))
				os.WriteFile(w.host("f"), []byte("PRIVATE"), 0o644)
				a.resume()
			}
		}
		a.stop()
		r.finish()
	})
}

// TestRaceEAGAINStorm covers line 46: other goroutines rename directories of the
// same filesystem (outside the root) as fast as they can, which makes the kernel
// fail openat2 resolutions that climb ".." with EAGAIN; the victim resolves
// ".."-climbing link targets meanwhile. Each result is the right content or a
// typed error (io_error naming EAGAIN once the bounded retries run out); no
// untyped error, no wrong content. The resolver stays what it was forced to: New
// with ResolverOpenat2 has no fallback.
func TestRaceEAGAINStorm(t *testing.T) {
	eachResolver(t, func(t *testing.T, mode physical.ResolverMode) {
		w := newWorld(t, mode)
		w.file("a/f", "OK")
		w.mkdir("a/b/c")
		w.link("a/b/c/../../../a/b/../f", "l")
		storm := openPath(t, w.outside)
		for i := range 4 {
			must(t, os.Mkdir(w.out("s"+strconv.Itoa(i)), 0o755))
		}
		r := newRaceRun(t, w, "eagain-storm/"+modeName(mode))
		a1 := r.startAttacker(func(i int) {
			from, to := "s0", "t0"
			if i%2 == 1 {
				from, to = to, from
			}
			unix.Renameat(storm, from, storm, to)
		})
		a2 := r.startAttacker(func(int) { exchange(storm, "s1", "s2") })
		eagain, raw := 0, 0
		rootfd := openPath(t, w.root)
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
		for i := range raceOps(t) {
			r.op()
			if mode == physical.ResolverOpenat2 && i%2 == 1 {
				// A raw openat2 without retries, climbing ".." itself, shows the
				// storm at work (the kernel's EAGAIN).
				fd, err := unix.Openat2(rootfd, "a/b/c/../../../a/f", &how)
				if err == nil {
					unix.Close(fd)
				} else if err == unix.EAGAIN {
					raw++
				}
			}
			got, err := w.readBackend("l")
			r.failed("read l", err, vfs.CodeIO)
			if err != nil {
				eagain++
				continue
			}
			if got != "OK" {
				r.escape("read of l returned %q", got)
			}
		}
		a1.stop()
		a2.stop()
		t.Logf("%d backend reads failed with a typed EAGAIN after the bounded retries; %d raw openat2 calls (no retry) saw EAGAIN", eagain, raw)
		r.finish()
	})
}
