//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Default limits of a bubblewrap sandbox (see BubblewrapOptions).
const (
	// DefaultMaxProcs bounds the processes and threads of a sandbox (threads
	// count: a parallel build on many cores runs many of them, so the default
	// is 128 per CPU when that is more).
	DefaultMaxProcs = 1024
	// DefaultMaxMemory bounds a sandbox's memory where the host's RAM is
	// unknown; otherwise the default is half of the RAM (DefaultMemoryLimit).
	DefaultMaxMemory int64 = 4 << 30
	// DefaultTmpSize bounds a sandbox's /tmp (a tmpfs, so memory).
	DefaultTmpSize int64 = 1 << 30
)

// Limits are the resource limits a run gets: the values (0 when unlimited) and
// the mechanism enforcing the process and memory limits.
type Limits struct {
	// MaxProcs is the most processes and threads the sandbox may hold at once
	// (its own pid 1 included); 0: no limit.
	MaxProcs int
	// MaxMemory is the most memory, in bytes: under a cgroup, everything charged
	// to the sandbox (its processes' memory, its /tmp, page cache); under
	// rlimits, each process's data segment (RLIMIT_DATA). 0: no limit.
	MaxMemory int64
	// TmpSize is the size of /tmp in bytes; 0: the kernel's default (half of RAM).
	TmpSize int64
	// Mechanism names how MaxProcs and MaxMemory are enforced: "cgroup v2",
	// "cgroup v1", "rlimit", or "none".
	Mechanism string
	// Note says what the mechanism leaves unbounded, if anything.
	Note string
}

// String renders the limits for a person, e.g.
// "1024 processes, 4.0 GiB memory, /tmp 1.0 GiB (cgroup v1)".
func (l Limits) String() string {
	procs, mem, tmp := "no process limit", "no memory limit", "/tmp unbounded"
	if l.MaxProcs > 0 {
		procs = strconv.Itoa(l.MaxProcs) + " processes"
	}
	if l.MaxMemory > 0 {
		mem = FormatSize(l.MaxMemory) + " memory"
	}
	if l.TmpSize > 0 {
		tmp = "/tmp " + FormatSize(l.TmpSize)
	}
	s := procs + ", " + mem + ", " + tmp + " (" + l.Mechanism
	if l.Note != "" {
		s += "; " + l.Note
	}
	return s + ")"
}

// FormatSize renders n bytes as "512 B", "64.0 MiB", "4.0 GiB".
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// ParseSize reads a size such as "512M", "4G", "1.5GiB", "65536" (bytes) or
// "0" (no limit). Suffixes are binary: K, M, G, T, with an optional "iB" or "B".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	mult := 1.0
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M, G or T suffix", s)
	}
	return int64(v * mult), nil
}

// DefaultProcLimit is the process limit a run gets by default here:
// DefaultMaxProcs, or 128 per CPU when that is more.
func DefaultProcLimit() int { return max(DefaultMaxProcs, 128*runtime.NumCPU()) }

// DefaultMemoryLimit is the memory limit a run gets by default here: half of
// the host's RAM (the host stays usable whatever the sandbox does), or
// DefaultMaxMemory when the RAM is unknown.
func DefaultMemoryLimit() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		if half := int64(si.Totalram) * int64(si.Unit) / 2; half > 0 {
			return half
		}
	}
	return DefaultMaxMemory
}

// limits resolves the options' limits: defaults for zero fields, none for
// negative ones.
func (o BubblewrapOptions) limits() Limits {
	l := Limits{MaxProcs: o.MaxProcs, MaxMemory: o.MaxMemory, TmpSize: o.TmpSize}
	switch {
	case l.MaxProcs == 0:
		l.MaxProcs = DefaultProcLimit()
	case l.MaxProcs < 0:
		l.MaxProcs = 0
	}
	switch {
	case l.MaxMemory == 0:
		l.MaxMemory = DefaultMemoryLimit()
	case l.MaxMemory < 0:
		l.MaxMemory = 0
	}
	switch {
	case l.TmpSize == 0:
		l.TmpSize = DefaultTmpSize
	case l.TmpSize < 0:
		l.TmpSize = 0
	}
	return l
}

// cgroupRoot is where the cgroup hierarchies are mounted (a variable for tests).
var cgroupRoot = "/sys/fs/cgroup"

// cgroupPlan is where a run's cgroup goes: the parent directories (one per
// hierarchy) under which a child is made for each run.
type cgroupPlan struct {
	version int
	parents map[string]string // controller -> parent directory (v1); "" -> the v2 parent
}

// planCgroup finds the cgroups the caller may create a run's cgroup in with
// the controllers the limits need, or returns nil. v2 (the unified hierarchy
// mounted at cgroupRoot): the parent of the caller's cgroup, when the caller's
// cgroup.controllers lists them (they are enabled for it and its siblings) and
// the caller may write there; at the root, the root itself when its
// subtree_control enables them. v1: the caller's cgroup in the pids and memory
// hierarchies mounted at cgroupRoot/pids and cgroupRoot/memory.
func planCgroup(l Limits) *cgroupPlan {
	need := []string{}
	if l.MaxProcs > 0 {
		need = append(need, "pids")
	}
	if l.MaxMemory > 0 {
		need = append(need, "memory")
	}
	if len(need) == 0 {
		return nil
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var sfs unix.Statfs_t
	if unix.Statfs(cgroupRoot, &sfs) == nil && sfs.Type == unix.CGROUP2_SUPER_MAGIC {
		return planCgroupV2(string(own), need)
	}
	return planCgroupV1(string(own), need)
}

// planCgroupV2 is planCgroup on the unified hierarchy, own being the
// caller's /proc/self/cgroup.
func planCgroupV2(own string, need []string) *cgroupPlan {
	for _, line := range strings.Split(own, "\n") {
		rest, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		// The run's cgroup goes beside the caller's (under its parent, whose
		// subtree_control enables what the caller's cgroup.controllers
		// lists): v2 lets no cgroup both hold processes and hand controllers
		// down, the root excepted, where it goes beneath.
		self := filepath.Join(cgroupRoot, filepath.Clean("/"+rest))
		parent, list := filepath.Dir(self), filepath.Join(self, "cgroup.controllers")
		if self == cgroupRoot {
			parent, list = self, filepath.Join(self, "cgroup.subtree_control")
		}
		ctl, err := os.ReadFile(list)
		if err != nil || unix.Access(parent, unix.W_OK|unix.X_OK) != nil {
			return nil
		}
		have := strings.Fields(string(ctl))
		for _, c := range need {
			if !contains(have, c) {
				return nil
			}
		}
		return &cgroupPlan{version: 2, parents: map[string]string{"": parent}}
	}
	return nil
}

// planCgroupV1 is planCgroup on the v1 hierarchies, own being the caller's
// /proc/self/cgroup.
func planCgroupV1(own string, need []string) *cgroupPlan {
	p := &cgroupPlan{version: 1, parents: map[string]string{}}
	for _, line := range strings.Split(own, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range need {
			if !contains(strings.Split(parts[1], ","), c) {
				continue
			}
			if parent, ok := cgroupV1Parent(c, parts[2]); ok {
				p.parents[c] = parent
			}
		}
	}
	if len(p.parents) != len(need) {
		return nil
	}
	return p
}

// cgroupV1Parent is the caller's cgroup rel in the v1 hierarchy of
// controller c, when that is mounted at cgroupRoot/c and the caller may
// create cgroups in it.
func cgroupV1Parent(c, rel string) (string, bool) {
	var sfs unix.Statfs_t
	mnt := filepath.Join(cgroupRoot, c)
	if unix.Statfs(mnt, &sfs) != nil || sfs.Type != unix.CGROUP_SUPER_MAGIC {
		return "", false
	}
	parent := filepath.Join(mnt, filepath.Clean("/"+rel))
	return parent, unix.Access(parent, unix.W_OK|unix.X_OK) == nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroupMade, when set (by tests), is told of every cgroup directory made.
var cgroupMade func(dir string)

// cgroupRun is the cgroup of one run: the directories made (removed by
// remove) and the cgroup.procs files the launcher writes its pid into.
type cgroupRun struct {
	dirs  []string
	procs []string
}

// create makes the run's cgroup(s) and writes the limits into them.
func (p *cgroupPlan) create(l Limits) (*cgroupRun, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "capfs-run-" + hex.EncodeToString(b[:])
	r := &cgroupRun{}
	var err error
	if p.version == 2 {
		err = r.limitV2(p.parents[""], name, l)
	} else {
		err = r.limitV1(p, name, l)
	}
	if err != nil {
		r.remove()
		return nil, err
	}
	return r, nil
}

// mkdir makes the run's cgroup name under parent.
func (r *cgroupRun) mkdir(parent, name string) (string, error) {
	d := filepath.Join(parent, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		return "", err
	}
	r.dirs = append(r.dirs, d)
	r.procs = append(r.procs, filepath.Join(d, "cgroup.procs"))
	if cgroupMade != nil {
		cgroupMade(d)
	}
	return d, nil
}

// writeCgroup writes v into the control file of cgroup d.
func writeCgroup(d, file, v string) error {
	return os.WriteFile(filepath.Join(d, file), []byte(v), 0)
}

// limitV2 makes the run's cgroup under parent in the unified hierarchy and
// writes the limits into it.
func (r *cgroupRun) limitV2(parent, name string, l Limits) error {
	d, err := r.mkdir(parent, name)
	if err != nil {
		return err
	}
	if l.MaxProcs > 0 {
		if err := writeCgroup(d, "pids.max", strconv.Itoa(l.MaxProcs)); err != nil {
			return err
		}
	}
	if l.MaxMemory > 0 {
		if err := writeCgroup(d, "memory.max", strconv.FormatInt(l.MaxMemory, 10)); err != nil {
			return err
		}
		// No swap: the limit is on memory, not on memory plus swap.
		_ = writeCgroup(d, "memory.swap.max", "0")
	}
	return nil
}

// limitV1 makes the run's cgroups in the v1 pids and memory hierarchies of
// p that the limits need, and writes the limits into them.
func (r *cgroupRun) limitV1(p *cgroupPlan, name string, l Limits) error {
	if l.MaxProcs > 0 {
		d, err := r.mkdir(p.parents["pids"], name)
		if err != nil {
			return err
		}
		if err := writeCgroup(d, "pids.max", strconv.Itoa(l.MaxProcs)); err != nil {
			return err
		}
	}
	if l.MaxMemory <= 0 {
		return nil
	}
	d, err := r.mkdir(p.parents["memory"], name)
	if err != nil {
		return err
	}
	limit := strconv.FormatInt(l.MaxMemory, 10)
	if err := writeCgroup(d, "memory.limit_in_bytes", limit); err != nil {
		return err
	}
	// With swap accounting, memory plus swap gets the same bound (no swap).
	if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
		return writeCgroup(d, "memory.memsw.limit_in_bytes", limit)
	}
	return nil
}

// remove deletes the run's cgroup directories. The sandbox's processes are
// dying by then (its pid namespace dies with its pid 1), but may not all have
// left the cgroup yet: remove kills what is left and retries, for at most
// about five seconds; a directory still busy after that is left behind.
func (r *cgroupRun) remove() {
	for i := len(r.dirs) - 1; i >= 0; i-- {
		d := r.dirs[i]
		// The group is busy until the kernel has released its last task,
		// which lags the exit a little: retry soon, then less often (about
		// five seconds in all), killing what is still in it.
		pause := 200 * time.Microsecond
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := unix.Rmdir(d)
			if err == nil || err == unix.ENOENT || err != unix.EBUSY || time.Now().After(deadline) {
				break
			}
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = unix.Kill(pid, unix.SIGKILL)
					}
				}
			}
			time.Sleep(pause)
			pause = min(2*pause, 10*time.Millisecond)
		}
	}
}

// rlimitNote says what rlimits leave unbounded.
func rlimitNote(l Limits) string {
	var notes []string
	if l.MaxProcs > 0 && os.Geteuid() == 0 {
		notes = append(notes, "processes unbounded: the sandbox's uid is root on the host, which RLIMIT_NPROC exempts")
	}
	if l.MaxMemory > 0 {
		notes = append(notes, "memory bounded per process")
	}
	return strings.Join(notes, "; ")
}

// launcherScript runs before bwrap: it moves itself into the run's cgroups
// (every process bwrap then starts is born in them), sets the rlimits, and
// execs bwrap (ulimit's flag for RLIMIT_NPROC is -u in bash and busybox, -p
// in dash). Arguments: NPROC DATA_KIB PROCS_FILE... -- BWRAP ARGS...;
// "-" for no rlimit.
const launcherScript = `n=$1 d=$2; shift 2
while [ "$1" != -- ]; do
  echo $$ > "$1" || { echo "capfs: cannot join the sandbox's cgroup" >&2; exit 125; }
  shift
done
shift
if [ "$n" != - ]; then ulimit -u "$n" 2>/dev/null || ulimit -p "$n" || { echo "capfs: cannot set the process limit" >&2; exit 125; }; fi
if [ "$d" != - ]; then ulimit -d "$d" || { echo "capfs: cannot set the memory limit" >&2; exit 125; }; fi
exec "$@"`

// launcherShell is the shell running launcherScript.
const launcherShell = "/bin/sh"

// applyLimits returns the launch of bwrap (bin, args) under the limits: a
// launcher that joins a new cgroup (when one can be made here) or sets rlimits,
// then execs bwrap. The cleanup removes the cgroup. With neither a process nor
// a memory limit, bwrap is launched directly.
func applyLimits(l Limits, bin string, args []string) (path string, argv []string, info Limits, cleanup func(), err error) {
	info = l
	if l.MaxProcs <= 0 && l.MaxMemory <= 0 {
		info.Mechanism = "none"
		return bin, args, info, nil, nil
	}
	if _, err := os.Stat(launcherShell); err != nil {
		return "", nil, info, nil, errors.New("the sandbox's limits need " + launcherShell)
	}
	nproc, data := "-", "-"
	var procs []string
	if p := planCgroup(l); p != nil {
		cg, cerr := p.create(l)
		if cerr == nil {
			info.Mechanism = "cgroup v" + strconv.Itoa(p.version)
			procs, cleanup = cg.procs, cg.remove
		}
	}
	if cleanup == nil {
		info.Mechanism, info.Note = "rlimit", rlimitNote(l)
		if l.MaxProcs > 0 {
			nproc = strconv.Itoa(l.MaxProcs)
		}
		if l.MaxMemory > 0 {
			data = strconv.FormatInt((l.MaxMemory+1023)/1024, 10)
		}
	}
	argv = append([]string{"-c", launcherScript, "capfs-limits", nproc, data}, procs...)
	argv = append(argv, "--", bin)
	argv = append(argv, args...)
	return launcherShell, argv, info, cleanup, nil
}
