//go:build linux

package main

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/capfs/capfs/materialize/sandbox"
)

// runTerm is the pseudo-terminal a command runs on when capfs has a terminal:
// the command's controlling terminal (job control, Ctrl-C and Ctrl-Z for its
// foreground job, SIGWINCH), with capfs copying between it and its own
// terminal, which is in raw mode meanwhile (so that Ctrl-C is a byte for the
// command's terminal, not a signal for capfs).
type runTerm struct {
	ptmx, tty *os.File
	in        *os.File // capfs's terminal input (nil: not a terminal)
	inFd      int
	restore   *term.State
	wake      [2]int // a pipe that stops the input copy
	inDone    chan struct{}
	outDone   chan struct{}
	winch     chan os.Signal
	once      sync.Once
}

// startTerminal gives l a pseudo-terminal of its own when --tty says so (auto:
// when capfs's stdin and stdout are terminals). It returns nil when l keeps
// capfs's streams.
func (r *runner) startTerminal(l *sandbox.Launch) (*runTerm, error) {
	if r.tty == "never" {
		return nil, nil
	}
	in, inOK := r.stdin.(*os.File)
	out, outOK := r.stdout.(*os.File)
	isTerm := inOK && outOK && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
	if !isTerm && r.tty != "always" {
		return nil, nil
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	t := &runTerm{ptmx: ptmx, tty: tty, inFd: -1, inDone: make(chan struct{}), outDone: make(chan struct{})}
	if err := unix.Pipe2(t.wake[:], unix.O_CLOEXEC); err != nil {
		ptmx.Close()
		tty.Close()
		return nil, err
	}
	if isTerm {
		t.in, t.inFd = in, int(in.Fd())
		_ = pty.InheritSize(in, ptmx)
		st, err := term.MakeRaw(t.inFd)
		if err == nil {
			t.restore = st
		}
		t.winch = make(chan os.Signal, 1)
		signal.Notify(t.winch, syscall.SIGWINCH)
		go func() {
			for range t.winch {
				_ = pty.InheritSize(in, ptmx)
			}
		}()
	}
	l.Stdin, l.Stdout, l.Terminal = tty, tty, tty
	if ef, ok := r.stderr.(*os.File); ok && term.IsTerminal(int(ef.Fd())) {
		l.Stderr = tty
	}
	go func() {
		defer close(t.outDone)
		_, _ = io.Copy(r.stdout, ptmx) // ends with EIO once no process holds the terminal
	}()
	go t.copyInput(r.stdin)
	return t, nil
}

// copyInput copies capfs's input to the terminal until finish: a terminal is
// polled (with the wake pipe), so no byte typed after the command exited is
// taken from the next reader (the ask prompt, the shell); other input is copied
// until its end, then the terminal gets an end of file (Ctrl-D).
func (t *runTerm) copyInput(src io.Reader) {
	defer close(t.inDone)
	if t.inFd < 0 {
		_, _ = io.Copy(t.ptmx, src)
		_, _ = t.ptmx.Write([]byte{4})
		return
	}
	buf := make([]byte, 4096)
	for {
		fds := []unix.PollFd{{Fd: int32(t.inFd), Events: unix.POLLIN}, {Fd: int32(t.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			continue
		}
		n, err := unix.Read(t.inFd, buf)
		if n > 0 {
			if _, werr := t.ptmx.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil && err != unix.EINTR && err != unix.EAGAIN || n == 0 && err == nil {
			return
		}
	}
}

// finish is called once the command exited: the rest of its output is copied,
// capfs's terminal is restored, and the pseudo-terminal closed.
func (t *runTerm) finish() {
	t.once.Do(func() {
		t.tty.Close()
		select {
		case <-t.outDone:
		case <-time.After(2 * time.Second):
			// A process outside the sandbox's pid namespace cannot hold the
			// terminal; this bounds a stuck writer only.
		}
		_, _ = unix.Write(t.wake[1], []byte{0})
		if t.inFd >= 0 {
			<-t.inDone
		}
		if t.winch != nil {
			signal.Stop(t.winch)
			close(t.winch)
		}
		if t.restore != nil {
			_ = term.Restore(t.inFd, t.restore)
		}
		t.ptmx.Close()
		unix.Close(t.wake[0])
		unix.Close(t.wake[1])
	})
}
