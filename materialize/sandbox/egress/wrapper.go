//go:build linux

package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/materialize/sandbox"
)

// Wrapper is a [sandbox.Wrapper] that gives the command the proxy's door to the
// hosts Allow permits. It must come before the sandbox in the Runner's chain, so
// that the shim runs inside it.
type Wrapper struct {
	// Allow lists the hosts let through; empty lets nothing through, but the
	// command still gets the proxy, which answers each attempt with a refusal
	// that names the flag (a fast failure instead of retries into an empty
	// network).
	Allow Allow
	// Exe is a binary that runs [ShimMain] when its first argument is
	// [ShimArg] (the capfs command is one). It is copied into a sealed memory
	// file for each run, so no host path of it is shown in the sandbox.
	Exe string
	// Record receives every attempt; nil drops them.
	Record func(Attempt)
	// Dial connects to allowed hosts (nil: the system's dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Name is "egress".
func (w *Wrapper) Name() string { return "egress" }

// NeedsSandbox is true: outside a sandbox the command has the host's network
// and the shim would listen on the host's loopback, so a run that cannot be
// sandboxed is refused (see [sandbox.NeedsSandbox]).
func (w *Wrapper) NeedsSandbox() bool { return true }

// ProxyURL is the proxy's address as the command sees it.
var ProxyURL = "http://127.0.0.1:" + strconv.Itoa(Port)

// Env is what the wrapper adds to the command's environment: the standard proxy
// variables, in both cases, and npm's.
func Env() []string {
	var out []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy"} {
		out = append(out, k+"="+ProxyURL)
	}
	return append(out, "NO_PROXY=", "no_proxy=")
}

// Wrap returns l run by the shim, and starts the proxy that serves it until the
// launch's cleanup.
func (w *Wrapper) Wrap(ctx context.Context, l *sandbox.Launch) (*sandbox.Launch, error) {
	if w.Exe == "" {
		return nil, errors.New("egress: no shim binary (Wrapper.Exe)")
	}
	img, err := sealedImage(w.Exe)
	if err != nil {
		return nil, fmt.Errorf("egress: shim image: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		img.Close()
		return nil, fmt.Errorf("egress: %w", err)
	}
	inside := os.NewFile(uintptr(pair[1]), "egress-control")
	hostFile := os.NewFile(uintptr(pair[0]), "egress-control")
	hc, err := net.FileConn(hostFile)
	hostFile.Close()
	if err != nil {
		img.Close()
		inside.Close()
		return nil, fmt.Errorf("egress: %w", err)
	}
	p := &Proxy{Allow: w.Allow, Dial: w.Dial, Record: w.Record}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveControl(sctx, hc.(*net.UnixConn), p)
	}()

	exeFD := 3 + len(l.ExtraFiles)
	ctlFD := exeFD + 1
	out := *l
	out.ExtraFiles = append(append([]*os.File(nil), l.ExtraFiles...), img, inside)
	out.Path = "/proc/self/fd/" + strconv.Itoa(exeFD)
	out.Args = append([]string{ShimArg, strconv.Itoa(ctlFD), strconv.Itoa(exeFD), "--", l.Path}, l.Args...)
	out.Env = append(append([]string(nil), l.Env...), Env()...)
	out.Cleanup = []func(){func() {
		img.Close()
		inside.Close()
		stop()
		hc.Close()
		<-done
		p.Close()
	}}
	return &out, nil
}

// maxConns bounds the connections the proxy serves at once for one sandbox:
// past it, a new one is answered 503 and closed, so that the sandbox cannot make
// the host hold unbounded descriptors, goroutines and header buffers (a
// variable for tests).
var maxConns = 256

// serveControl receives the connections the shim hands over on ctl and serves
// each with p, until ctl ends or ctx is done; it waits for the connections.
func serveControl(ctx context.Context, ctl *net.UnixConn, p *Proxy) {
	stop := context.AfterFunc(ctx, func() { ctl.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	active := make(chan struct{}, maxConns)
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		_, oobn, _, _, err := ctl.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		for _, fd := range receivedFDs(oob[:oobn]) {
			f := os.NewFile(uintptr(fd), "egress")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				continue
			}
			select {
			case active <- struct{}{}:
			default:
				// A deadline: a peer that reads nothing cannot hold the loop.
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				reply(c, http.StatusServiceUnavailable, "capfs: the sandbox has "+strconv.Itoa(maxConns)+" connections open through the egress proxy, its most")
				c.Close()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-active }()
				p.ServeConn(ctx, c)
			}()
		}
	}
}

// receivedFDs returns the descriptors an SCM_RIGHTS control message carries.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range got {
			unix.CloseOnExec(fd)
			fds = append(fds, fd)
		}
	}
	return fds
}

// sealedImage copies the executable at exe into a sealed memory file the
// sandbox can execute and cannot change.
func sealedImage(exe string) (*os.File, error) {
	src, err := os.Open(exe)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return sandbox.SealedFile("capfs-egress", src, true)
}
