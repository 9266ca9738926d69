//go:build linux

package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// handTo sends one end of a new socket pair over ctl, as the shim does, and
// returns the other end.
func handTo(t *testing.T, ctl int) net.Conn {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Sendmsg(ctl, []byte{0}, unix.UnixRights(fds[1]), nil, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "client")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeControlBoundsConnections: past maxConns connections at once, the
// proxy answers a new one 503 instead of serving it, so a sandbox cannot make
// the host hold unbounded connections (descriptors, goroutines, header
// buffers); once one ends, the next is served.
func TestServeControlBoundsConnections(t *testing.T) {
	old := maxConns
	maxConns = 1
	t.Cleanup(func() { maxConns = old })
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[1])
	hf := os.NewFile(uintptr(pair[0]), "control")
	hc, err := net.FileConn(hf)
	hf.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); serveControl(ctx, hc.(*net.UnixConn), &Proxy{}) }()
	defer func() { cancel(); <-done }()

	ask := func(c net.Conn) int {
		t.Helper()
		// A connection past the bound is answered 503 and closed without being
		// read, perhaps before the request is written: the write then fails
		// with EPIPE, and the answer waits in the socket all the same.
		if _, err := io.WriteString(c, "CONNECT refused.invalid:443 HTTP/1.1\r\nHost: refused.invalid:443\r\n\r\n"); err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	idle := handTo(t, pair[1]) // held open, sends nothing: the one connection allowed
	extra := handTo(t, pair[1])
	if code := ask(extra); code != http.StatusServiceUnavailable {
		t.Fatalf("a connection past the bound answered %d, want 503", code)
	}
	extra.Close()
	idle.Close()
	// The idle connection's slot is freed when its ServeConn ends; a later
	// connection is then served (a refusal, 403), perhaps after a 503 or two.
	for {
		c := handTo(t, pair[1])
		code := ask(c)
		c.Close()
		if code == http.StatusForbidden {
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("answered %d, want 403 (or 503 while the slot is held)", code)
		}
	}
}
