//go:build linux

package syncback_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/syncback"
)

// The crash test's child process reads its orders from these variables.
const (
	envCrashChild = "CAPFS_TEST_SYNCCRASH_CHILD" // the host directory to sync into
	envCrashBase  = "CAPFS_TEST_SYNCCRASH_BASE"  // Options.Base
	envCrashJDir  = "CAPFS_TEST_SYNCCRASH_JDIR"  // SyncOptions.JournalDir
	envCrashSeed  = "CAPFS_TEST_SYNCCRASH_SEED"
	envCrashKill  = "CAPFS_TEST_SYNCCRASH_KILL" // kill itself at this hook call (0: never)
)

var crashTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// crashFixture writes the starting tree: directories, files of assorted
// sizes, modes and times, and symlinks.
func crashFixture(t *testing.T, root string, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	dirs := []string{"a", "a/b", "a/b/c", "d", "d/e", "f"}
	for _, d := range dirs {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for i := range 40 {
		p := filepath.Join(root, dirs[r.IntN(len(dirs))], "file"+strconv.Itoa(i))
		data := make([]byte, r.IntN(5000))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		mode := fs.FileMode(0o644)
		if r.IntN(4) == 0 {
			mode = 0o755
		}
		must(t, os.WriteFile(p, data, mode))
		must(t, os.Chmod(p, mode))
		tm := crashTime.Add(time.Duration(i) * time.Second)
		must(t, os.Chtimes(p, tm, tm))
	}
	must(t, os.Symlink("b/c", filepath.Join(root, "a/link")))
	must(t, os.Symlink("../a", filepath.Join(root, "d/up")))
}

// listFiles returns the regular files under root, sorted.
func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	must(t, filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	}))
	sort.Strings(out)
	return out
}

// crashEdits makes the sandbox's changes in root: edits (some of the same
// size), deletions, mode changes, touches, a file turned into a directory, a
// removed directory, a retargeted symlink, new directories and files. Every
// file written gets a set time, so two runs on equal trees give equal trees.
func crashEdits(t *testing.T, root string, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	n := 0
	stamp := func(p string) {
		n++
		tm := crashTime.Add(time.Hour + time.Duration(n)*time.Second)
		must(t, os.Chtimes(p, tm, tm))
	}
	write := func(rel string, size int) {
		p := filepath.Join(root, rel)
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		must(t, os.WriteFile(p, data, 0o644))
		stamp(p)
	}
	must(t, os.RemoveAll(filepath.Join(root, "d/e")))
	for _, rel := range listFiles(t, root) {
		p := filepath.Join(root, rel)
		switch r.IntN(10) {
		case 0, 1:
			fi, err := os.Stat(p)
			must(t, err)
			size := int(fi.Size())
			if r.IntN(2) == 0 {
				size = r.IntN(6000)
			}
			write(rel, size)
		case 2:
			must(t, os.Remove(p))
		case 3:
			fi, err := os.Stat(p)
			must(t, err)
			must(t, os.Chmod(p, fi.Mode().Perm()^0o100))
		case 4:
			stamp(p) // touched: same bytes, new time
		case 5:
			if r.IntN(3) == 0 {
				must(t, os.Remove(p))
				must(t, os.Mkdir(p, 0o755))
				write(rel+"/inner", 100)
			}
		}
	}
	must(t, os.Remove(filepath.Join(root, "a/link")))
	must(t, os.Symlink("b", filepath.Join(root, "a/link")))
	must(t, os.MkdirAll(filepath.Join(root, "new/x/y"), 0o755))
	must(t, os.Chmod(filepath.Join(root, "new/x"), 0o700))
	for i := range 15 {
		dirs := []string{"new", "new/x", "new/x/y", "a", "f"}
		write(dirs[r.IntN(len(dirs))]+"/added"+strconv.Itoa(i), r.IntN(8000))
	}
}

// snapOS describes every entry under root: files with mode, digest and
// modification time, directories with mode, symlinks with target.
func snapOS(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tg, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l " + tg
		case fi.IsDir():
			out[rel] = "d " + fi.Mode().Perm().String()
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("f %s %s %d", fi.Mode().Perm(), hex.EncodeToString(sum[:8]), fi.ModTime().UnixNano())
		}
		return nil
	}))
	return out
}

// crashChild is the child process: it checks the host directory out, makes
// the sandbox's edits, and syncs back, killing itself (SIGKILL) at the hook
// call it was told to. It prints "committed" once the journal is on disk.
func crashChild(t *testing.T) {
	host := os.Getenv(envCrashChild)
	seed, _ := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	killAt, _ := strconv.Atoi(os.Getenv(envCrashKill))
	b, err := physical.New(host)
	must(t, err)
	d, _ := dir.New(b)
	tr, err := materialize.Checkout(context.Background(), d, materialize.Options{Base: os.Getenv(envCrashBase)})
	must(t, err)
	crashEdits(t, tr.Path(), seed)
	calls := 0
	syncback.SetTestHook(func(point string) {
		if point == "committed" {
			fmt.Println("committed")
		}
		calls++
		if calls == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // dies here
		}
	})
	_, err = syncback.Run(context.Background(), tr, syncback.Options{JournalDir: os.Getenv(envCrashJDir), Label: "crash-test"})
	must(t, err)
	fmt.Println("finished", calls)
}

// TestStressSyncCrash kills a sync-back (kill -9) at random points of its
// apply, in a child process, then runs Recover and checks that no file is
// partly applied (each entry is wholly the old one or wholly the new one, and
// nothing else, such as a temporary file, is left) and no change is lost
// (each is applied, or listed as not applied with the checkout kept). Some
// runs also edit the host between the crash and the recovery: that edit is
// never overwritten. Kills come from a hook at the Nth point of the apply
// (journal records, before, inside and after each step) or from the parent
// after a random delay once the journal is committed. A few iterations
// normally; CAPFS_STRESS=1 runs many.
func TestStressSyncCrash(t *testing.T) {
	if os.Getenv(envCrashChild) != "" {
		crashChild(t)
		return
	}
	iters := 4
	if os.Getenv("CAPFS_STRESS") != "" {
		iters = 150
	}
	seed0 := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed0)
	r := rand.New(rand.NewPCG(seed0, 0))
	var killed, finished, uncommitted, racing, lost int
	for i := range iters {
		seed := r.Uint64()
		// About 210 hook calls: ~100 while the journal is written, then ~110
		// in the apply. Most kills land in the apply.
		killAt := 100 + r.IntN(130)
		if r.IntN(4) == 0 {
			killAt = 1 + r.IntN(110)
		}
		byDelay := r.IntN(4) == 0
		race := r.IntN(3) == 0
		lose := r.IntN(8) == 0 // the checkout is lost before Recover (a reboot emptied /dev/shm)
		// The first four runs cover each kind once: a kill while the journal is
		// written, one in the apply with a host edit before Recover, one with
		// the checkout lost, one by the parent after a delay.
		switch i {
		case 0:
			killAt, byDelay, race, lose = 1+r.IntN(40), false, false, false
		case 1:
			killAt, byDelay, race, lose = 150+r.IntN(40), false, true, false
		case 2:
			killAt, byDelay, race, lose = 150+r.IntN(40), false, false, true
		case 3:
			byDelay, race, lose = true, false, false
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			tmp := t.TempDir()
			host, expect, base, jdir := filepath.Join(tmp, "host"), filepath.Join(tmp, "expect"), filepath.Join(tmp, "base"), filepath.Join(tmp, "journal")
			for _, d := range []string{host, expect, base} {
				must(t, os.Mkdir(d, 0o755))
			}
			crashFixture(t, host, seed)
			crashFixture(t, expect, seed)
			crashEdits(t, expect, seed)
			old, want := snapOS(t, host), snapOS(t, expect)

			cmd := exec.Command(os.Args[0], "-test.run=^TestStressSyncCrash$", "-test.count=1")
			kill := strconv.Itoa(killAt)
			if byDelay {
				kill = "0"
			}
			cmd.Env = append(os.Environ(), envCrashChild+"="+host, envCrashBase+"="+base, envCrashJDir+"="+jdir,
				envCrashSeed+"="+strconv.FormatUint(seed, 10), envCrashKill+"="+kill)
			out, err := cmd.StdoutPipe()
			must(t, err)
			cmd.Stderr = os.Stderr
			must(t, cmd.Start())
			sc := bufio.NewScanner(out)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if byDelay && sc.Text() == "committed" {
					// The handshake: the apply has begun. Kill it at some point
					// of it (or after it: both are fine).
					go func(d time.Duration) {
						time.Sleep(d)
						cmd.Process.Signal(syscall.SIGKILL)
					}(time.Duration(r.IntN(30000)) * time.Microsecond)
				}
			}
			werr := cmd.Wait()
			var ee *exec.ExitError
			wasKilled := errors.As(werr, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
			if werr != nil && !wasKilled {
				t.Fatalf("child: %v\n%s", werr, strings.Join(lines, "\n"))
			}
			js, err := syncback.Pending(jdir)
			must(t, err)
			if !wasKilled || len(js) == 0 {
				// Finished (a delayed kill may land after the journal is gone).
				finished++
				if len(js) != 0 {
					t.Fatalf("finished sync left journals %+v", js)
				}
				sameMap(t, snapOS(t, host), want)
				return
			}
			killed++
			if len(js) != 1 || js[0].Busy || js[0].Label != "crash-test" {
				t.Fatalf("journals %+v", js)
			}
			// A host edit between the crash and the recovery, on a file the
			// new tree has.
			racePath, raceWant := "", ""
			if race {
				var files []string
				for p, v := range want {
					if strings.HasPrefix(v, "f ") && strings.HasPrefix(old[p], "f ") {
						files = append(files, p)
					}
				}
				sort.Strings(files)
				racePath = files[r.IntN(len(files))]
				must(t, os.WriteFile(filepath.Join(host, racePath), []byte("the host's edit"), 0o644))
				raceWant = snapOS(t, host)[racePath]
				racing++
			}
			if lose && js[0].Committed {
				must(t, os.RemoveAll(js[0].Checkout))
				lost++
			}
			hb, err := physical.New(host)
			must(t, err)
			defer hb.Close()
			d, _ := dir.New(hb)
			rep, rerr := syncback.Recover(context.Background(), d, js[0].Path, syncback.RecoverOptions{OnReject: syncback.RejectApplyRest})
			if rep == nil {
				t.Fatalf("Recover: %v", rerr)
			}
			if rest, _ := syncback.Pending(jdir); len(rest) != 0 {
				t.Fatalf("journal left after Recover: %+v", rest)
			}
			got := snapOS(t, host)
			if racePath != "" {
				if got[racePath] != raceWant {
					t.Fatalf("the host's edit of %s was overwritten: %s", racePath, got[racePath])
				}
				delete(got, racePath)
				delete(old, racePath)
				delete(want, racePath)
			}
			if !js[0].Committed {
				// Nothing was applied; the checkout holds every change.
				uncommitted++
				sameMap(t, got, old)
				if rep.Checkout == "" || len(rep.Applied) != 0 {
					t.Fatalf("uncommitted: %v %+v", rerr, rep)
				}
				co := snapOS(t, rep.Checkout)
				delete(co, racePath)
				sameMap(t, co, want)
				return
			}
			// Wholly old or wholly new, and nothing else.
			for p, v := range got {
				if v != old[p] && v != want[p] {
					t.Errorf("%s: %s, neither old (%s) nor new (%s)", p, v, old[p], want[p])
				}
			}
			for p := range old {
				if _, ok := got[p]; !ok && want[p] != "" {
					t.Errorf("%s: gone, but in the old and new trees", p)
				}
			}
			for p := range want {
				if _, ok := got[p]; !ok && old[p] != "" {
					t.Errorf("%s: missing", p)
				}
			}
			// Every change applied or listed.
			listed := map[string]string{}
			for _, c := range rep.Applied {
				listed[c.Path] = "applied"
			}
			for _, u := range rep.NotApplied {
				listed[u.Change.Path] = "not applied"
			}
			changed := map[string]bool{}
			for p := range old {
				changed[p] = old[p] != want[p]
			}
			for p := range want {
				changed[p] = old[p] != want[p]
			}
			for p, ch := range changed {
				if !ch || p == racePath {
					continue
				}
				switch listed[p] {
				case "applied":
					if got[p] != want[p] {
						t.Errorf("%s: listed applied, is %q, want %q", p, got[p], want[p])
					}
				case "not applied":
					if got[p] != old[p] {
						t.Errorf("%s: listed not applied, is %q, was %q", p, got[p], old[p])
					}
				default:
					t.Errorf("%s: changed (%q -> %q) but not listed", p, old[p], want[p])
				}
			}
			if len(rep.NotApplied) > 0 {
				if lose {
					// Listed, with the reason: the checkout is gone.
					if rerr == nil || rep.Checkout != js[0].Checkout {
						t.Errorf("checkout lost: error %v, checkout %q", rerr, rep.Checkout)
					}
					return
				}
				if _, err := os.Stat(rep.Checkout); err != nil || rerr == nil {
					t.Errorf("not applied %+v, checkout %q (%v), error %v", rep.NotApplied, rep.Checkout, err, rerr)
				}
				for _, u := range rep.NotApplied {
					if u.Change.Path != racePath {
						t.Errorf("not applied without a reason to: %+v", u)
					}
				}
			} else {
				if rerr != nil || rep.Checkout != "" {
					t.Errorf("Recover: %v, checkout %q", rerr, rep.Checkout)
				}
				sameMap(t, got, want)
			}
		})
	}
	t.Logf("%d runs: %d killed (%d before the journal was committed, %d with a host edit before Recover, %d with the checkout lost), %d finished",
		iters, killed, uncommitted, racing, lost, finished)
}
