//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// probeTimeout bounds one probe run.
const probeTimeout = 30 * time.Second

// freshMark reports whether the probe mark file mark ("" for none) is
// there, a regular file, and younger than probeMemory.
func freshMark(mark string) bool {
	if mark == "" {
		return false
	}
	fi, err := os.Lstat(mark)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	age := time.Since(fi.ModTime())
	return age < probeMemory && age >= 0
}

// Probe checks that bwrap exists and can create its namespaces here, by running
// `true` under the same options as a real run (including a descriptor bind). A
// success is remembered; after a failure the next call probes again. The error
// matches ErrUnavailable and carries bwrap's first line of complaint.
func (b *BubblewrapWrapper) Probe(ctx context.Context) error {
	b.mu.Lock()
	ok := b.probed
	b.mu.Unlock()
	if ok {
		return nil
	}
	bin, err := b.binary()
	if err != nil {
		return err
	}
	mark := b.probeMark(bin)
	if freshMark(mark) {
		b.mu.Lock()
		b.probed = true
		b.mu.Unlock()
		return nil
	}
	fd, err := unix.Open("/usr", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unavailable("cannot open /usr for the probe: " + err.Error())
	}
	f := os.NewFile(uintptr(fd), "probe")
	defer f.Close()
	l, err := b.Wrap(ctx, &Launch{Path: "true", Mounts: []Mount{{File: f, Target: "/run/capfs-probe"}}})
	if err != nil {
		return err
	}
	defer func() {
		for i := len(l.Cleanup) - 1; i >= 0; i-- {
			l.Cleanup[i]()
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(pctx, l.Path, l.Args...)
	if l.Argv0 != "" {
		cmd.Args[0] = l.Argv0
	}
	cmd.Env = MinimalEnv()
	cmd.Dir = "/"
	cmd.ExtraFiles = l.ExtraFiles
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return &vfs.Error{Code: vfs.CodeCanceled, Op: "run", Err: ctx.Err()}
		}
		msg := firstLine(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return unavailable("bubblewrap cannot create its sandbox here: " + msg)
	}
	b.mu.Lock()
	b.probed = true
	b.mu.Unlock()
	if mark != "" {
		_ = os.WriteFile(mark, nil, 0o600)
		now := time.Now()
		_ = os.Chtimes(mark, now, now)
	}
	return nil
}

// probeMemory is how long a successful probe is remembered across processes
// (see probeMark).
const probeMemory = time.Hour

// probeMark names the file whose recent modification time records that a
// probe of bin succeeded, so that each capfs run does not start bubblewrap
// twice: under a directory of this user's own (capfs-UID in the temporary
// directory, mode 0700), named after what the probe's answer depends on: the
// bwrap binary (path, size, modification time), the boot (a sysctl change
// needs none, but a reboot re-probes) and the options' ids and limits. The
// answer is trusted for probeMemory; "" when no such directory can be made.
// A host that turns off user namespaces meanwhile gets bubblewrap's own error
// at the run (the command does not start), not an unsandboxed run.
func (b *BubblewrapWrapper) probeMark(bin string) string {
	fi, err := os.Stat(bin)
	if err != nil {
		return ""
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	d := filepath.Join(os.TempDir(), fmt.Sprintf("capfs-%d", os.Getuid()))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return ""
	}
	st, err := os.Lstat(d)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
		return ""
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() {
		return ""
	}
	lim := b.opts.limits()
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%d\x00%s\x00%d/%d\x00%+v", bin, fi.Size(), fi.ModTime().UnixNano(), strings.TrimSpace(string(boot)), b.opts.UID, b.opts.GID, lim)))
	return filepath.Join(d, "bwrap-probe-"+hex.EncodeToString(h[:8]))
}

// limitedWriter keeps the first n bytes written to it and discards the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return cut(s, 300)
}
