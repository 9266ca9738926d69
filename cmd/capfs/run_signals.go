//go:build linux

package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// killGrace is how long a command has to exit after capfs passed it a SIGTERM,
// SIGHUP or SIGINT before it is killed (SIGKILL). A second signal kills it at
// once.
const killGrace = 10 * time.Second

// runSignals is capfs run's signal handling. From the start of the command
// line to its end:
//
//   - before the command runs (the checkouts), SIGINT, SIGTERM and SIGHUP
//     cancel the set-up: what was made is removed, nothing runs;
//   - while it runs, they are passed on to the command (its process group, and
//     its terminal's foreground job): the command decides, and capfs waits for
//     it; a second signal, or killGrace without an exit, kills it;
//   - after it exited (review, sync-back), they cancel what is under way: a
//     sync stops between files (its journal lets the next run finish it) and
//     the checkout holding what was not applied is kept;
//   - SIGPIPE never ends capfs: a closed stdout or stderr loses the messages
//     written to it, not the checkout (which is still removed or kept).
//
// Whatever happened, capfs removes its checkouts (or keeps them under --keep)
// before it exits, and reports the first signal it caught (caught).
type runSignals struct {
	ch      chan os.Signal
	forward chan os.Signal // read by the sandbox runner while the command runs
	done    chan struct{}

	mu     sync.Mutex
	phase  int // 0 set-up, 1 running, 2 exited
	first  os.Signal
	count  int
	cancel context.CancelFunc
	timer  *time.Timer
}

func newRunSignals() *runSignals {
	s := &runSignals{
		ch:      make(chan os.Signal, 8),
		forward: make(chan os.Signal, 8),
		done:    make(chan struct{}),
	}
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	go s.loop()
	return s
}

// context returns a context that ends when capfs is signalled outside the
// command's run; the parent's own cancellation (main's signal context) is not
// inherited, since capfs run decides what a signal does.
func (s *runSignals) context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	return ctx
}

func (s *runSignals) loop() {
	for {
		select {
		case <-s.done:
			return
		case sg := <-s.ch:
			if sg == syscall.SIGPIPE {
				continue // writes to the closed pipe fail with EPIPE instead
			}
			s.handle(sg)
		}
	}
}

func (s *runSignals) handle(sg os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	if s.first == nil {
		s.first = sg
	}
	switch s.phase {
	case 1:
		if s.count > 1 {
			s.send(syscall.SIGKILL)
			return
		}
		s.send(sg)
		s.timer = time.AfterFunc(killGrace, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.phase == 1 {
				s.send(syscall.SIGKILL)
			}
		})
	default:
		if s.cancel != nil {
			s.cancel()
		}
	}
}

// send passes sg to the command without blocking (the runner reads forward
// while the command runs). Called with s.mu held.
func (s *runSignals) send(sg os.Signal) {
	select {
	case s.forward <- sg:
	default:
	}
}

// running marks the start of the command: signals are passed on from now.
func (s *runSignals) running() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = 1
	if s.first != nil {
		// Caught during the set-up, after the last check: the command gets it.
		s.send(s.first)
	}
}

// exited marks the end of the command.
func (s *runSignals) exited() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = 2
	if s.timer != nil {
		s.timer.Stop()
	}
}

// caught returns the first signal (other than SIGPIPE) capfs received, or nil.
func (s *runSignals) caught() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// stop ends the handling. SIGPIPE stays caught until capfs exits, so that the
// last messages to a closed pipe do not kill it with a status of its own.
func (s *runSignals) stop() {
	signal.Stop(s.ch)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	close(s.done)
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
}

// signalName names a signal as shells do ("SIGTERM").
func signalName(sg os.Signal) string {
	switch sg {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return sg.String()
}

// signalStatus is the exit status of a process killed by sg: 128+N.
func signalStatus(sg os.Signal) int {
	if n, ok := sg.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitInterrupted
}
