package sqlite

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// The crash test's files: crashFiles files, the first half rewritten in place at
// a fixed length (one WriteAt), the rest replaced, at a length that changes with
// every version and spans chunks, by FS.WriteFile or by a new file renamed over
// them.
const (
	crashFiles = 10
	crashChunk = 64 << 10
	crashTree  = 5 // files of the tree that appears and goes whole
)

func crashPath(k int) vfs.Path { return P(fmt.Sprintf("d%d/f%d", k%2, k)) }

// crashContent is version v of file k: a header naming both, then filler that
// depends on both, so any mix of two versions is detected.
func crashContent(k, v int) []byte {
	n := 3000 + k*100
	if k >= crashFiles/2 {
		n = 1000 + (v*7919+k*104729)%(3*crashChunk)
	}
	b := make([]byte, n)
	copy(b, fmt.Sprintf("k=%d v=%d\n", k, v))
	h := uint32(k*2654435761 + v*40503 + 1)
	for i := 24; i < n; i++ {
		h = h*1664525 + 1013904223
		b[i] = byte(h >> 24)
	}
	return b
}

// crashVersion parses a file's version, checking the whole content.
func crashVersion(k int, data []byte) (int, error) {
	var kk, v int
	if _, err := fmt.Sscanf(string(data[:min(len(data), 24)]), "k=%d v=%d\n", &kk, &v); err != nil || kk != k {
		return 0, fmt.Errorf("file %d: bad header %q", k, data[:min(len(data), 24)])
	}
	if !bytes.Equal(data, crashContent(k, v)) {
		return 0, fmt.Errorf("file %d: version %d torn (%d bytes)", k, v, len(data))
	}
	return v, nil
}

// TestCrashStress kills a writer process with SIGKILL at random points, over
// and over on the same file. After each kill: PRAGMA integrity_check is ok,
// every file holds exactly one complete version, and that version is the last
// one the writer acknowledged (or the one it was writing): no acknowledged
// operation, Syncs included, is lost. A few iterations in a normal run;
// CAPFS_STRESS=1 runs 1000, CAPFS_SQLITE_CRASH_ITERS any number.
func TestCrashStress(t *testing.T) {
	if db := os.Getenv("CAPFS_SQLITE_CRASH_CHILD"); db != "" {
		crashChild(db)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	iters := 4
	if os.Getenv("CAPFS_STRESS") != "" {
		iters = 1000
	}
	if s := os.Getenv("CAPFS_SQLITE_CRASH_ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	db := t.TempDir() + "/crash.db"
	acked := make([]int, crashFiles)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killPoints := map[int]bool{}
	total, failures := 0, 0
	for it := range iters {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashStress$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CAPFS_SQLITE_CRASH_CHILD="+db, "CAPFS_SQLITE_CRASH_SEED="+strconv.Itoa(it))
		out, err := cmd.StdoutPipe()
		must(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		must(t, cmd.Start())
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		ready := false
		for l := range lines {
			if l == "READY" {
				ready = true
				break
			}
		}
		if !ready {
			cmd.Wait()
			t.Fatalf("iteration %d: the writer did not start: %s", it, stderr.String())
		}
		if it == 0 {
			// A second process cannot open the file the writer holds.
			if g, err := Open(db); !errors.Is(err, ErrLocked) {
				if g != nil {
					g.Close()
				}
				cmd.Process.Kill()
				t.Fatalf("opening the file a writer process holds: %v, want ErrLocked", err)
			}
		}
		// Kill after a random number of acknowledged operations (so the
		// kill points spread over the writer's whole loop whatever the
		// machine's speed), plus up to 3 ms into the next ones.
		ops := 0
		ack := func(l string) {
			var k, v int
			if _, err := fmt.Sscanf(l, "ACK %d %d", &k, &v); err == nil {
				acked[k] = max(acked[k], v)
				ops++
			}
		}
		target, timeout := r.IntN(100), time.After(5*time.Second)
	wait:
		for ops < target {
			select {
			case l, ok := <-lines:
				if !ok {
					break wait
				}
				ack(l)
			case <-timeout:
				break wait
			}
		}
		time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
		cmd.Process.Kill() // SIGKILL
		for l := range lines {
			ack(l)
		}
		cmd.Wait()
		if strings.Contains(stderr.String(), "FAIL") || strings.Contains(stderr.String(), "panic") {
			t.Fatalf("iteration %d: the writer failed: %s", it, stderr.String())
		}
		killPoints[ops] = true
		total += ops
		if err := crashCheck(db, acked); err != nil {
			failures++
			t.Errorf("iteration %d (killed after %d acknowledged operations): %v", it, ops, err)
			if failures > 3 {
				t.FailNow()
			}
		}
	}
	t.Logf("sqlite crash: %d iterations, %d distinct kill points, %d acknowledged operations, %d integrity failures", iters, len(killPoints), total, failures)
}

// crashCheck verifies the file after a kill.
func crashCheck(db string, acked []int) error {
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		return err
	}
	var ic string
	err = raw.QueryRow(`PRAGMA integrity_check`).Scan(&ic)
	raw.Close()
	if err != nil || ic != "ok" {
		return fmt.Errorf("integrity_check: %q, %v", ic, err)
	}
	f, err := Open(db)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer f.Close()
	for k := range crashFiles {
		data, err := vfstest.ReadFile(bg, f, crashPath(k))
		v := 0
		if err == nil {
			if v, err = crashVersion(k, data); err != nil {
				return err
			}
		} else if vfs.CodeOf(err) != vfs.CodeNotFound || acked[k] > 0 {
			return fmt.Errorf("file %d: %v (acknowledged version %d)", k, err, acked[k])
		}
		if v != acked[k] && v != acked[k]+1 {
			return fmt.Errorf("file %d: version %d, acknowledged %d", k, v, acked[k])
		}
		acked[k] = v // a committed but unacknowledged version is now the base
	}
	// The tree is whole or absent: RemoveAll is one transaction.
	if ents, err := f.ReadDir(bg, P("tree")); err == nil {
		if len(ents) != crashTree {
			return fmt.Errorf("tree holds %d entries, want %d or none", len(ents), crashTree)
		}
		for j := range crashTree {
			data, err := vfstest.ReadFile(bg, f, P(fmt.Sprintf("tree/t%d", j)))
			if err != nil || !bytes.Equal(data, crashContent(j, 0)) {
				return fmt.Errorf("tree/t%d: %d bytes, %v", j, len(data), err)
			}
		}
	} else if vfs.CodeOf(err) != vfs.CodeNotFound {
		return fmt.Errorf("tree: %v", err)
	}
	return nil
}

// crashChild is the writer the parent kills: it prints READY once open, then
// "ACK k v" after each operation returns, forever.
func crashChild(db string) {
	die := func(err error) {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(2)
	}
	f, err := Open(db, WithChunkSize(crashChunk))
	if err != nil {
		die(err)
	}
	seed, _ := strconv.Atoi(os.Getenv("CAPFS_SQLITE_CRASH_SEED"))
	r := rand.New(rand.NewPCG(uint64(seed), 99))
	for _, d := range []string{"d0", "d1"} {
		if err := f.Mkdir(bg, P(d), 0o755); err != nil && vfs.CodeOf(err) != vfs.CodeExists {
			die(err)
		}
	}
	ver := make([]int, crashFiles)
	for k := range crashFiles {
		data, err := vfstest.ReadFile(bg, f, crashPath(k))
		if err == nil {
			if ver[k], err = crashVersion(k, data); err != nil {
				die(err)
			}
		}
	}
	os.Stdout.WriteString("READY\n")
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		k := r.IntN(crashFiles)
		v := ver[k] + 1
		data := crashContent(k, v)
		p := crashPath(k)
		if k < crashFiles/2 && ver[k] > 0 {
			h, err := f.OpenFile(bg, p, os.O_RDWR, 0)
			if err != nil {
				die(err)
			}
			if _, err := h.WriteAt(data, 0); err != nil {
				die(err)
			}
			if err := h.Close(); err != nil {
				die(err)
			}
		} else if r.IntN(2) == 0 {
			// One transaction replaces the whole content.
			if err := f.WriteFile(bg, p, data, 0o644); err != nil {
				die(err)
			}
		} else {
			tmp := P(fmt.Sprintf("d%d/.tmp%d", k%2, k))
			if err := vfstest.WriteFile(bg, f, tmp, data); err != nil {
				die(err)
			}
			if err := f.Rename(bg, tmp, p, 0); err != nil {
				die(err)
			}
		}
		ver[k] = v
		fmt.Fprintf(os.Stdout, "ACK %d %d\n", k, v)
		switch i % 16 {
		case 5:
			if err := f.Sync(); err != nil {
				die(err)
			}
		case 13: // a whole tree appears (built aside, renamed in) and goes (RemoveAll)
			if _, err := f.Lstat(bg, P("tree")); err == nil {
				if err := f.RemoveAll(bg, P("tree")); err != nil {
					die(err)
				}
				break
			}
			if err := f.RemoveAll(bg, P(".stage")); err != nil {
				die(err)
			}
			if err := f.Mkdir(bg, P(".stage"), 0o755); err != nil {
				die(err)
			}
			for j := range crashTree {
				if err := vfstest.WriteFile(bg, f, P(fmt.Sprintf(".stage/t%d", j)), crashContent(j, 0)); err != nil {
					die(err)
				}
			}
			if err := f.Rename(bg, P(".stage"), P("tree"), 0); err != nil {
				die(err)
			}
		case 9: // hard links and directories come and go too
			l := P(fmt.Sprintf("d%d/link%d", k%2, k))
			if err := f.Link(bg, p, l); err != nil && vfs.CodeOf(err) != vfs.CodeExists {
				die(err)
			}
			if err := f.Remove(bg, l); err != nil {
				die(err)
			}
			if err := f.Mkdir(bg, P("tmpdir"), 0o755); err != nil && vfs.CodeOf(err) != vfs.CodeExists {
				die(err)
			}
			if err := f.Remove(bg, P("tmpdir")); err != nil {
				die(err)
			}
		}
	}
	f.Close()
	die(fmt.Errorf("not killed in time"))
}
