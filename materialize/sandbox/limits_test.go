//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// forkBomb starts up to 2,000 sleeping processes and prints how many started.
const forkBomb = `sh -c 'i=0; while [ $i -lt 2000 ]; do sleep 1000 & i=$((i+1)); echo $i > /tmp/n; done' 2>/dev/null
read n < /tmp/n; echo "started $n"`

func started(t *testing.T, out string) int {
	t.Helper()
	s, ok := strings.CutPrefix(strings.TrimSpace(out), "started ")
	n, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Fatalf("fork bomb output %q", out)
	}
	return n
}

func needCgroup(t *testing.T, l Limits) {
	t.Helper()
	if planCgroup(l) == nil {
		t.Skip("no cgroup with the pids and memory controllers can be created here (need cgroup v2 delegation or v1 as root), skipping")
	}
}

func TestBwrapLimitsForkBomb(t *testing.T) {
	needBwrap(t)
	needCgroup(t, Limits{MaxProcs: 64, MaxMemory: 1 << 30})
	made := recordCgroups()
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{MaxProcs: 64}), sh(forkBomb))
	if n := started(t, out); n >= 64 {
		t.Fatalf("with 64 processes at most, the fork bomb started %d", n)
	}
	// The bound is the limit: with room for 300, far more start.
	_, out, _ = runOut(t, bwrapRunner(BubblewrapOptions{MaxProcs: 300}), sh(forkBomb))
	if n := started(t, out); n < 250 || n >= 300 {
		t.Fatalf("with 300 processes at most, the fork bomb started %d", n)
	}
	assertNoRunCgroups(t, made)
}

// hog holds 150 MB in the shell's memory and prints its length.
const hog = `x=$(head -c 150000000 /dev/zero | tr '\0' a); echo "held ${#x}"`

func TestBwrapLimitsMemory(t *testing.T) {
	needBwrap(t)
	needCgroup(t, Limits{MaxProcs: 64, MaxMemory: 64 << 20})
	made := recordCgroups()
	res, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{MaxMemory: 64 << 20}), sh(hog))
	if strings.Contains(out, "held") || res.ExitCode == 0 {
		t.Fatalf("a 150 MB hog under a 64 MiB limit: status %d, %q", res.ExitCode, out)
	}
	_, out, _ = runOut(t, bwrapRunner(BubblewrapOptions{MaxMemory: 1 << 30}), sh(hog))
	if out != "held 150000000\n" {
		t.Fatalf("a 150 MB hog under a 1 GiB limit: %q", out)
	}
	assertNoRunCgroups(t, made)
}

// TestBwrapLimitsRlimitFallback hides the cgroup hierarchies: the limits fall
// back to rlimits, and the memory hog's allocation fails.
func TestBwrapLimitsRlimitFallback(t *testing.T) {
	needBwrap(t)
	old := cgroupRoot
	cgroupRoot = t.TempDir()
	defer func() { cgroupRoot = old }()
	w := Bubblewrap(BubblewrapOptions{MaxMemory: 64 << 20, MaxProcs: 64})
	l := w.Limits()
	if l.Mechanism != "rlimit" || !strings.Contains(l.Note, "per process") {
		t.Fatalf("limits without cgroups: %+v", l)
	}
	if os.Geteuid() == 0 && !strings.Contains(l.Note, "processes unbounded") {
		t.Fatalf("as root, the note should say RLIMIT_NPROC does not bind: %+v", l)
	}
	res, out, _ := runOut(t, &Runner{Wrappers: []Wrapper{w}}, sh(hog))
	if strings.Contains(out, "held") || res.ExitCode == 0 {
		t.Fatalf("a 150 MB hog under a 64 MiB RLIMIT_DATA: status %d, %q", res.ExitCode, out)
	}
	_, out, _ = runOut(t, &Runner{Wrappers: []Wrapper{w}}, sh(`ulimit -u 2>/dev/null || ulimit -p; ulimit -d`))
	if out != "64\n65536\n" {
		t.Fatalf("rlimits inside: %q", out)
	}
}

func TestBwrapTmpSizeDefault(t *testing.T) {
	needBwrap(t)
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh(`df -k /tmp | tail -n 1`))
	f := strings.Fields(out)
	if len(f) < 2 || f[1] != strconv.FormatInt(DefaultTmpSize/1024, 10) {
		t.Fatalf("df /tmp with the default size: %q, want %d KiB", out, DefaultTmpSize/1024)
	}
	if l := Bubblewrap(BubblewrapOptions{TmpSize: -1}).Limits(); l.TmpSize != 0 {
		t.Fatalf("TmpSize -1: %+v", l)
	}
}

// assertNoRunCgroups checks that every cgroup the test's runs made was
// removed (other processes on the host may be running sandboxes of their own).
func assertNoRunCgroups(t *testing.T, made *[]string) {
	t.Helper()
	cgroupMade = nil
	if len(*made) == 0 {
		t.Error("no cgroup was made")
	}
	for _, d := range *made {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("a run's cgroup is left behind: %s", d)
		}
	}
}

// recordCgroups starts recording the cgroups made.
func recordCgroups() *[]string {
	var mu sync.Mutex
	var made []string
	cgroupMade = func(d string) {
		mu.Lock()
		made = append(made, d)
		mu.Unlock()
	}
	return &made
}

func TestParseFormatSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "64M": 64 << 20, "4G": 4 << 30, "1.5GiB": 3 << 29, "8KB": 8 << 10, "2t": 2 << 40} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1Q", "1e30"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if s := FormatSize(4 << 30); s != "4.0 GiB" {
		t.Errorf("FormatSize(4 GiB) = %q", s)
	}
	if s := (Limits{MaxProcs: 10, MaxMemory: 1 << 20, Mechanism: "cgroup v1"}).String(); s != "10 processes, 1.0 MiB memory, /tmp unbounded (cgroup v1)" {
		t.Errorf("Limits.String() = %q", s)
	}
}

func TestBwrapReadOnlyPaths(t *testing.T) {
	needBwrap(t)
	src := t.TempDir()
	for _, d := range []string{".git/refs", "sub"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".git/HEAD", ".bashrc", "sub/ok"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := Mount{Source: src, Target: "/w", Writable: true, ReadOnly: []string{".bashrc", ".git"}}
	script := `for p in .git/HEAD .git/refs/new .git/new .bashrc sub/ok new; do
  if { echo y > /w/$p; } 2>/tmp/e; then echo "$p written"; else echo "$p: $(cat /tmp/e)"; fi
done
rm -rf /w/.git 2>/dev/null; mv /w/.bashrc /w/b 2>/dev/null; ls -a /w | tr '\n' ' '`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{}), sh(script, m))
	for _, want := range []string{".git/HEAD: sh: 2: cannot create /w/.git/HEAD: Read-only file system",
		".git/refs/new: sh: 2: cannot create /w/.git/refs/new: Read-only file system",
		".git/new: sh: 2: cannot create /w/.git/new: Read-only file system",
		".bashrc: sh: 2: cannot create /w/.bashrc: Read-only file system",
		"sub/ok written", "new written", ". .. .bashrc .git new sub"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(src, ".git/HEAD")); string(b) != "x\n" {
		t.Errorf(".git/HEAD on the host is %q", b)
	}
	// Through a descriptor grant too.
	m = Mount{File: openPath(t, src), Target: "/w", Writable: true, ReadOnly: []string{".git"}}
	_, out, _ = runOut(t, bwrapRunner(BubblewrapOptions{}), sh(`echo y > /w/.git/HEAD || echo refused`, m))
	if !strings.Contains(out, "refused") {
		t.Errorf("a descriptor grant's read-only path was written: %q", out)
	}
}

func TestWrapValidatesReadOnlyPaths(t *testing.T) {
	bin, _ := fakeBwrap(t, "", 0)
	w := Bubblewrap(BubblewrapOptions{Path: bin})
	for _, ro := range [][]string{{"/abs"}, {"../up"}, {"a/../b"}, {"."}, {""}, {"a//b"}} {
		l := &Launch{Path: "true", Mounts: []Mount{{Source: "/tmp", Target: "/w", Writable: true, ReadOnly: ro}}}
		if _, err := wrapNow(w, l); err == nil {
			t.Errorf("read-only paths %q accepted", ro)
		}
	}
	l := &Launch{Path: "true", Mounts: []Mount{{Source: "/tmp", Target: "/w", ReadOnly: []string{"a"}}}}
	if _, err := wrapNow(w, l); err == nil {
		t.Error("read-only paths in a read-only mount accepted")
	}
}

// TestCgroupCreateFiles checks what a run's cgroup gets written, on a plain
// directory standing in for each hierarchy (cgroup v2 cannot be delegated on
// every test host).
func TestCgroupCreateFiles(t *testing.T) {
	l := Limits{MaxProcs: 77, MaxMemory: 5 << 20}
	for _, p := range []*cgroupPlan{
		{version: 2, parents: map[string]string{"": t.TempDir()}},
		{version: 1, parents: map[string]string{"pids": t.TempDir(), "memory": t.TempDir()}},
	} {
		r, err := p.create(l)
		if err != nil {
			t.Fatalf("v%d: %v", p.version, err)
		}
		want := map[string]string{"pids.max": "77", "memory.max": "5242880", "memory.swap.max": "0"}
		if p.version == 1 {
			want = map[string]string{"pids.max": "77", "memory.limit_in_bytes": "5242880"}
		}
		got := map[string]string{}
		for _, d := range r.dirs {
			if !strings.HasPrefix(filepath.Base(d), "capfs-run-") {
				t.Errorf("v%d: cgroup %s", p.version, d)
			}
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(d, e.Name()))
				got[e.Name()] = string(b)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("v%d: %s = %q, want %q (all: %v)", p.version, k, got[k], v, got)
			}
		}
		if len(r.procs) != len(r.dirs) || len(r.dirs) != len(p.parents) {
			t.Errorf("v%d: dirs %v procs %v", p.version, r.dirs, r.procs)
		}
		// Emptied of their files (a real cgroup's vanish with it), the
		// stand-ins are removed.
		for _, d := range r.dirs {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				os.Remove(filepath.Join(d, e.Name()))
			}
		}
		r.remove()
		for _, d := range r.dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("v%d: %s left", p.version, d)
			}
		}
	}
}
