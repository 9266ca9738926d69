//go:build linux

package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/vfs"
)

// Mount is one grant of the subject: a host directory (or file) made visible inside
// the sandbox at Target.
type Mount struct {
	// Source is the host path to bind. It is ignored when File is set.
	Source string
	// File is an optional open descriptor (typically an O_PATH directory fd) of what
	// to bind. It is passed to the wrapper's process and bound as /proc/self/fd/N,
	// so the host path is never resolved again. The caller keeps ownership: Run does
	// not close it.
	File *os.File
	// Target is the absolute, clean path inside the sandbox.
	Target string
	// Writable binds the grant read-write; otherwise it is read-only.
	Writable bool
	// ReadOnly lists paths inside a writable grant, relative to it (clean,
	// slash-separated, no ".."), to bind read-only over themselves: directories
	// and regular files that already exist in the grant and that the command must
	// not change (it gets EROFS at once). Each is bound from the grant's source by
	// the same name; the grant must hold no symlink on the way to it (materialize's
	// checkouts do not).
	ReadOnly []string
}

// Launch is the launch context a wrapper receives and returns: what to run, where,
// with which environment, grants and streams.
type Launch struct {
	// Path is the program. When it contains no slash it is looked up in the PATH of
	// the environment it runs in (inside the sandbox, the sandbox's PATH).
	Path string
	// Argv0, if set, is the program's argv[0] (what it and /proc/PID/cmdline
	// show as its name); "" means Path.
	Argv0 string
	// Args are the arguments after the program name (argv[1:]).
	Args []string
	// Dir is the working directory inside the sandbox; "" means the Target of the
	// first writable mount, else "/".
	Dir string
	// Env holds "KEY=value" entries added to the minimal environment (MinimalEnv),
	// replacing entries with the same key. The caller's environment is never
	// inherited.
	Env []string
	// Mounts are the subject's grants.
	Mounts []Mount
	// Subject names who runs the command, for the audit trail.
	Subject string
	// Stdin, Stdout and Stderr are the command's standard streams; nil means
	// /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// ExtraFiles are descriptors passed to the final process as fd 3, 4, ...
	// (see os/exec.Cmd.ExtraFiles). A wrapper that needs a descriptor in the
	// process it starts appends it here.
	ExtraFiles []*os.File
	// Wrappers lists, in order, the names of the wrappers that have handled this
	// launch so far. The Runner maintains it; wrappers read it.
	Wrappers []string
	// Terminal, when set, is the slave side of a pseudo-terminal to be the
	// command's controlling terminal: the process starts in a new session with
	// Terminal as its controlling terminal, so job control works inside (an
	// interactive shell's Ctrl-C and Ctrl-Z reach its foreground job) and the
	// kernel sends SIGWINCH when the caller resizes the terminal. Stdin must be
	// Terminal itself (it becomes fd 0, the descriptor made controlling);
	// Stdout and Stderr usually are too. The bubblewrap wrapper then leaves out
	// --new-session: the command may push input (TIOCSTI) into this terminal,
	// which only the command itself reads, never into the caller's. Without
	// Terminal the command has no controlling terminal.
	Terminal *os.File
	// Signals, when set, are forwarded while the command runs: each signal
	// received is sent to the command's process group and, with a Terminal, to
	// the terminal's foreground process group as well (a job an interactive
	// shell inside started). Run stops reading it when the command exits.
	Signals <-chan os.Signal
	// Cleanup holds functions to call once the command has exited (or could not
	// start), such as removing what a wrapper made for the run. A wrapper sets
	// it on the launch it returns; the Runner takes them from every launch (and
	// clears the field before handing the launch on) and calls them all, the
	// last added first.
	Cleanup []func()
}

// clone returns a copy of l whose slices can be changed without touching l's.
func (l *Launch) clone() *Launch {
	c := *l
	c.Args = append([]string(nil), l.Args...)
	c.Env = append([]string(nil), l.Env...)
	c.Mounts = append([]Mount(nil), l.Mounts...)
	c.ExtraFiles = append([]*os.File(nil), l.ExtraFiles...)
	c.Wrappers = append([]string(nil), l.Wrappers...)
	c.Cleanup = append([]func(){}, l.Cleanup...)
	for i := range c.Mounts {
		c.Mounts[i].ReadOnly = append([]string(nil), l.Mounts[i].ReadOnly...)
	}
	return &c
}

// Wrapper is one link of the chain. Wrap receives the launch as the previous
// wrappers left it and returns the launch to hand on: usually a new program that
// runs the old one. It may modify l and return it, or return a new Launch.
// Implementations must be safe for concurrent use.
type Wrapper interface {
	// Name is a stable identifier, reported in Result.Wrappers and the audit trail.
	Name() string
	// Wrap returns the next launch, or an error to refuse the run.
	Wrap(ctx context.Context, l *Launch) (*Launch, error)
}

// Sandbox is a Wrapper that is an isolation boundary. Probe reports whether it can
// work on this host; the Runner calls it before every run.
type Sandbox interface {
	Wrapper
	Probe(ctx context.Context) error
}

// NeedsSandbox is a Wrapper that means nothing outside a sandbox (a door in the
// sandbox's walls): the Runner refuses the run rather than run it unsandboxed
// under AllowUnsandboxed.
type NeedsSandbox interface {
	NeedsSandbox() bool
}

// ErrUnavailable is matched (errors.Is) by the error of a run refused because no
// sandbox can work here (a probe failed, or the chain has none).
var ErrUnavailable = errors.New("sandbox unavailable")

// Runner runs launches through a chain of wrappers. Its fields must not change while
// runs are in progress; Run is safe for concurrent use if the wrappers are.
type Runner struct {
	// Wrappers are applied in registration order (index 0 first).
	Wrappers []Wrapper
	// AllowUnsandboxed lets a run go ahead without its Sandbox wrappers when a probe
	// fails (or the chain has none). Such a run is audited as unsandboxed.
	AllowUnsandboxed bool
	// Audit, if set, receives a "run" event for every run (and a "sandbox_probe"
	// event when a probe fails).
	Audit audit.Sink
	// WaitDelay bounds how long Run waits for the standard streams after the
	// process exits or is killed (a daemonized grandchild holding a pipe);
	// 0 means 5 seconds.
	WaitDelay time.Duration
}

// Result is the outcome of a run that started.
type Result struct {
	// ExitCode is the command's exit status; 128+N when it was killed by signal N.
	// Under a sandbox it is the sandbox tool's status, which is the command's own
	// (bubblewrap exits 1 with a message on stderr when it cannot start the command).
	ExitCode int
	// Wrappers names, in order, the wrappers that handled the run.
	Wrappers []string
	// Sandboxed reports whether a Sandbox wrapper isolated the run.
	Sandboxed bool
	// Duration is the wall time from start to exit.
	Duration time.Duration
}

// Default returns a Runner whose chain is the bubblewrap sandbox (with the host's
// Go toolchain and module cache, read-only: see DetectGoRoot, DetectGoModCache),
// probed at each run, refusing unsandboxed runs.
func Default() *Runner {
	return &Runner{Wrappers: []Wrapper{Bubblewrap(DefaultOptions())}}
}

// DefaultOptions returns the options of Default's bubblewrap sandbox: the host's
// Go toolchain and module cache, the default limits.
func DefaultOptions() BubblewrapOptions {
	return BubblewrapOptions{GoRoot: DetectGoRoot(), GoModCache: DetectGoModCache()}
}

// Probe probes every Sandbox in the chain and returns the first failure, or an
// error matching ErrUnavailable if the chain has no Sandbox.
func (r *Runner) Probe(ctx context.Context) error {
	n := 0
	for _, w := range r.Wrappers {
		if s, ok := w.(Sandbox); ok {
			n++
			if err := s.Probe(ctx); err != nil {
				return err
			}
		}
	}
	if n == 0 {
		return unavailable("no sandbox wrapper is configured")
	}
	return nil
}

func unavailable(detail string) error {
	return &vfs.Error{Code: vfs.CodeNotSupported, Op: "run", Err: fmt.Errorf("%w: %s", ErrUnavailable, detail)}
}

// Run applies the wrappers to a copy of l and runs the final command, wiring its
// standard streams. A command that runs and exits non-zero is not an error: its
// status is in Result.ExitCode. An error is returned (a *vfs.Error) when the run is
// refused (no working sandbox without AllowUnsandboxed: not_supported matching
// ErrUnavailable; a launch a wrapper rejects), when the process cannot start, or
// when ctx ends first: the whole process group is then killed, and the error has
// code canceled and wraps ctx's error (the Result is returned as well). A ctx that
// has ended before the start is never taken for a sandbox failure: it does not lead
// to an unsandboxed run. When the process has exited but its output streams stay
// open (a daemonized descendant of an unsandboxed run holding a pipe), Run waits
// WaitDelay, then returns the Result with an io_error.
//
// One audit event is recorded per call: op "run", path the command line, dest the
// working directory, outcome ok (exit 0), failed (non-zero exit, code
// "exit_status_N"; start failure or cancellation, with the error's code) or denied
// (refused), and rule "sandboxed wrappers=a,b" or "unsandboxed wrappers=..." once
// the chain is decided, "sandbox_required" when refused for want of a sandbox,
// "not_started" when refused earlier (an invalid launch, an ended ctx).
func (r *Runner) Run(ctx context.Context, l *Launch) (res *Result, err error) {
	if l == nil {
		return nil, &vfs.Error{Code: vfs.CodeInvalidPath, Op: "run", Err: errors.New("nil launch")}
	}
	rec := &runRecord{mode: "not_started", ev: audit.Event{
		Time:      time.Now(),
		RequestID: newRunID(),
		Subject:   l.Subject,
		Op:        "run",
		Path:      commandLine(l.Path, l.Args),
		Dest:      l.Dir,
	}}
	defer func() { r.record(ctx, rec.event(res, err)) }()
	if err := validateLaunch(l); err != nil {
		rec.ev.Outcome = audit.Denied
		return nil, err
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, &vfs.Error{Code: vfs.CodeCanceled, Op: "run", Err: cerr}
	}
	sandboxed, err := r.decideSandbox(ctx, l, rec)
	if err != nil {
		return nil, err
	}
	cur, cleanup, err := r.wrap(ctx, l, sandboxed, rec)
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	if err != nil {
		return nil, err
	}
	return r.start(ctx, l, cur, sandboxed, rec.names)
}

// runRecord is what Run's audit event records as the run goes.
type runRecord struct {
	ev    audit.Event
	mode  string   // the rule: not_started, sandbox_required, sandboxed or unsandboxed
	names []string // the wrappers applied
}

// event is the run's audit event once Run returns res and err.
func (rr *runRecord) event(res *Result, err error) audit.Event {
	ev := rr.ev
	ev.Duration = time.Since(ev.Time)
	ev.Rule = rr.mode
	if rr.mode == "sandboxed" || rr.mode == "unsandboxed" {
		ev.Rule += " wrappers=" + strings.Join(rr.names, ",")
	}
	switch {
	case err != nil:
		if ev.Outcome == "" {
			ev.Outcome = audit.Failed
		}
		ev.Code = string(vfs.CodeOf(err))
	case res.ExitCode != 0:
		ev.Outcome = audit.Failed
		ev.Code = "exit_status_" + strconv.Itoa(res.ExitCode)
	default:
		ev.Outcome = audit.OK
	}
	return ev
}

// decideSandbox probes the sandboxes and reports whether the run is
// sandboxed. Without a working sandbox the run goes on unsandboxed only with
// AllowUnsandboxed (the failed probe is audited either way); an ended ctx is
// never a reason to fall back to an unsandboxed run.
func (r *Runner) decideSandbox(ctx context.Context, l *Launch, rec *runRecord) (bool, error) {
	probeErr := r.probe(ctx)
	if probeErr == nil {
		rec.mode = "sandboxed"
		return true, nil
	}
	if ctx.Err() != nil || vfs.CodeOf(probeErr) == vfs.CodeCanceled {
		if cerr := ctx.Err(); cerr != nil {
			return false, &vfs.Error{Code: vfs.CodeCanceled, Op: "run", Err: cerr}
		}
		return false, probeErr
	}
	pe := audit.Event{
		Time: time.Now(), RequestID: rec.ev.RequestID, Subject: l.Subject,
		Op: "sandbox_probe", Path: rec.ev.Path, Outcome: audit.Failed,
		Code: string(vfs.CodeNotSupported), Rule: "sandbox_required",
	}
	if r.AllowUnsandboxed {
		pe.Rule = "allow_unsandboxed"
	}
	r.record(ctx, pe)
	if !r.AllowUnsandboxed {
		rec.mode = "sandbox_required"
		rec.ev.Outcome = audit.Denied
		return false, probeErr
	}
	rec.mode = "unsandboxed"
	return false, nil
}

// probe probes the sandbox wrappers, returning the first failure, or
// unavailable when there is none.
func (r *Runner) probe(ctx context.Context) error {
	var probeErr error
	nsb := 0
	for _, w := range r.Wrappers {
		if s, ok := w.(Sandbox); ok {
			nsb++
			if probeErr == nil {
				probeErr = s.Probe(ctx)
			}
		}
	}
	if nsb == 0 {
		return unavailable("no sandbox wrapper is configured")
	}
	return probeErr
}

// wrap applies the wrappers in order to a copy of l (skipping the sandboxes
// of an unsandboxed run) and returns the final launch and every cleanup
// gathered so far, also when a wrapper refuses.
func (r *Runner) wrap(ctx context.Context, l *Launch, sandboxed bool, rec *runRecord) (*Launch, []func(), error) {
	cur := l.clone()
	cur.Wrappers = nil
	cleanup := cur.Cleanup
	cur.Cleanup = nil
	for _, w := range r.Wrappers {
		if _, ok := w.(Sandbox); ok && !sandboxed {
			continue
		}
		next, err := wrapOne(ctx, w, cur, sandboxed)
		if err != nil {
			rec.ev.Outcome = audit.Denied
			return nil, cleanup, err
		}
		rec.names = append(rec.names, w.Name())
		next.Wrappers = append(append([]string(nil), cur.Wrappers...), w.Name())
		cleanup = append(cleanup, next.Cleanup...)
		next.Cleanup = nil
		cur = next
	}
	return cur, cleanup, nil
}

// wrapOne applies w to cur, refusing a wrapper that needs a sandbox when
// there is none, and one that returns no launch.
func wrapOne(ctx context.Context, w Wrapper, cur *Launch, sandboxed bool) (*Launch, error) {
	if n, ok := w.(NeedsSandbox); ok && n.NeedsSandbox() && !sandboxed {
		return nil, fmt.Errorf("%w: the %s wrapper works only inside a sandbox, and none can run here", ErrUnavailable, w.Name())
	}
	next, err := w.Wrap(ctx, cur)
	if err != nil {
		return nil, err
	}
	if next == nil {
		return nil, &vfs.Error{Code: vfs.CodeInvalidPath, Op: "run", Err: fmt.Errorf("wrapper %q returned no launch", w.Name())}
	}
	return next, nil
}

// start runs the final launch cur of l, forwarding l's signals, and waits for
// it.
func (r *Runner) start(ctx context.Context, l, cur *Launch, sandboxed bool, names []string) (*Result, error) {
	cmd, err := r.command(ctx, cur, sandboxed)
	if err != nil {
		return nil, err
	}
	closeOnExec()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, startError(cur.Path, err)
	}
	stopForward := forwardSignals(cmd.Process.Pid, l.Signals, l.Terminal)
	werr := cmd.Wait()
	stopForward()
	res := &Result{
		ExitCode:  exitCode(cmd.ProcessState),
		Wrappers:  names,
		Sandboxed: sandboxed,
		Duration:  time.Since(start),
	}
	if cerr := ctx.Err(); cerr != nil {
		return res, &vfs.Error{Code: vfs.CodeCanceled, Op: "run", Err: cerr}
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		// The process ran but copying its streams failed, or WaitDelay expired.
		return res, &vfs.Error{Code: vfs.CodeIO, Op: "run", Err: werr}
	}
	return res, nil
}

// forwardSignals sends every signal from sigs to process group pgid and, when
// tty is set, to tty's foreground process group, until the returned function is
// called.
func forwardSignals(pgid int, sigs <-chan os.Signal, tty *os.File) (stop func()) {
	if sigs == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				sig, ok := s.(syscall.Signal)
				if !ok {
					continue
				}
				_ = syscall.Kill(-pgid, sig)
				if tty != nil {
					if fg, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP); err == nil && fg > 0 && fg != pgid {
						_ = syscall.Kill(-fg, sig)
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func (r *Runner) record(ctx context.Context, e audit.Event) {
	if r.Audit != nil {
		r.Audit.Record(context.WithoutCancel(ctx), e)
	}
}

// command builds the exec.Cmd of the final launch. When the run is unsandboxed,
// the working directory is mapped from the grant holding it to the host.
func (r *Runner) command(ctx context.Context, l *Launch, sandboxed bool) (*exec.Cmd, error) {
	env := mergeEnv(MinimalEnv(), l.Env)
	prog := l.Path
	if !strings.Contains(prog, "/") {
		p, err := lookPath(prog, envValue(env, "PATH"))
		if err != nil {
			return nil, &vfs.Error{Code: vfs.CodeNotFound, Op: "run", Path: l.Path, Err: errors.New("executable not found in PATH")}
		}
		prog = p
	}
	cmd := exec.CommandContext(ctx, prog, l.Args...)
	cmd.Args[0] = l.Path
	if l.Argv0 != "" {
		cmd.Args[0] = l.Argv0
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = l.Stdin, l.Stdout, l.Stderr
	cmd.ExtraFiles = l.ExtraFiles
	cmd.Dir = l.Dir
	if !sandboxed {
		d, err := hostDir(l)
		if err != nil {
			return nil, err
		}
		cmd.Dir = d
	}
	// A new session (and so a new process group, killed as one on cancel) with no
	// controlling terminal: the command cannot inject input into the caller's
	// terminal (TIOCSTI), and reading a terminal stdin does not stop it (SIGTTIN)
	// as it would a background process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if l.Terminal != nil {
		// The terminal is the command's own (a pseudo-terminal the caller made):
		// it becomes the new session's controlling terminal.
		if f, ok := l.Stdin.(*os.File); !ok || f != l.Terminal {
			return nil, &vfs.Error{Code: vfs.CodeInvalidPath, Op: "run", Path: l.Path, Err: errors.New("a launch with a Terminal must have it as Stdin")}
		}
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
	}
	cmd.Cancel = func() error {
		// The negative pid names the process group Setsid created.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = r.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	return cmd, nil
}

// closeOnExec marks close-on-exec every descriptor of this process above 2 that is
// not: descriptors inherited from the process's own parent (a shell, a supervisor)
// would otherwise leak into every command, sandboxed or not, since neither os/exec
// nor bubblewrap closes them. Descriptors Go opens are close-on-exec already;
// those a launch passes on purpose (ExtraFiles) are made inheritable again in the
// child by os/exec.
func closeOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
	}
}

func startError(prog string, err error) error {
	var errno syscall.Errno
	code := vfs.CodeIO
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			code = vfs.CodeNotFound
		case syscall.EACCES, syscall.EPERM:
			code = vfs.CodePermission
		case syscall.ENOEXEC:
			code = vfs.CodeNotSupported
		}
		return &vfs.Error{Code: code, Op: "run", Path: prog, Err: errno}
	}
	return &vfs.Error{Code: code, Op: "run", Path: prog, Err: errors.New("cannot start the process")}
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}
