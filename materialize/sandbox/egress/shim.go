//go:build linux

package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/materialize/sandbox"
)

// ShimArg is the first argument that makes a program run [ShimMain]: a binary
// given as [Wrapper].Exe must check for it at the start of main, before anything
// else, as the capfs command does.
const ShimArg = "__capfs-egress-shim"

// Port is where the shim listens inside the sandbox, on 127.0.0.1.
const Port = 3128

// ShimMain is the shim inside the sandbox; args are what follows [ShimArg]:
// the control descriptor, the descriptor of the shim's own image, "--", then the
// command and its arguments. It listens on 127.0.0.1:[Port], hands every
// connection it accepts to the proxy outside, runs the command, and returns the
// exit status to exit with (the command's, or 128+N for a signal N it could not
// re-raise; 126 and 127 as a shell would when the command cannot run).
func ShimMain(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "capfs: egress shim: bad arguments")
		return 125
	}
	ctlFD, err1 := strconv.Atoi(args[0])
	exeFD, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil || ctlFD < 3 || exeFD < 3 {
		fmt.Fprintln(os.Stderr, "capfs: egress shim: bad descriptors")
		return 125
	}
	_ = unix.Close(exeFD)
	unix.CloseOnExec(ctlFD)
	ctl, err := net.FileConn(os.NewFile(uintptr(ctlFD), "egress-control"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "capfs: egress shim: %v\n", err)
		return 125
	}
	uc, ok := ctl.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, "capfs: egress shim: the control descriptor is not a unix socket")
		return 125
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(Port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "capfs: egress shim: %v\n", err)
		return 125
	}
	go acceptLoop(ln, uc)
	return runCommand(args[3], args[4:])
}

// acceptLoop hands every connection ln accepts to the proxy over ctl.
func acceptLoop(ln net.Listener, ctl *net.UnixConn) {
	var mu sync.Mutex
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			if err := handOver(c, ctl, &mu); err != nil {
				c.Close()
			}
		}()
	}
}

// handOver makes a socket pair, sends one end to the proxy over ctl (under mu:
// one message at a time) and copies between c and the other end.
func handOver(c net.Conn, ctl *net.UnixConn, mu *sync.Mutex) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	mu.Lock()
	_, _, err = ctl.WriteMsgUnix([]byte{0}, unix.UnixRights(fds[1]), nil)
	mu.Unlock()
	_ = unix.Close(fds[1])
	if err != nil {
		_ = unix.Close(fds[0])
		return err
	}
	f := os.NewFile(uintptr(fds[0]), "egress")
	up, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	pipe(c, up)
	return nil
}

// runCommand runs path with args on the shim's streams and environment and
// returns the status to exit with. Where /bin/sh exists the command starts
// through the sandbox's own exec check ([sandbox.ExecCheck]: 127 when it is not
// found, 126 when it cannot be executed, said as the sandbox says it), which
// execs it in its place.
func runCommand(path string, args []string) int {
	cmd := exec.Command(path, args...)
	if _, err := os.Stat("/bin/sh"); err == nil {
		cmd = exec.Command("/bin/sh", append([]string{"-c", sandbox.ExecCheck, "capfs", path}, args...)...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The command shares the shim's process group: a signal to the group reaches
	// it directly. The shim only outlives it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for range sigs {
		}
	}()
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(os.Stderr, "capfs: run: %s: %v\n", path, err)
			return 126
		}
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = unix.Kill(os.Getpid(), ws.Signal())
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
