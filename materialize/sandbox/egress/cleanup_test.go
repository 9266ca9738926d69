//go:build linux

package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnectTunnelEndsWithContext: a tunnel whose client has half-closed and
// whose upstream stays open and silent ends when the context is done, so the
// wrapper's cleanup (which waits for every connection) cannot hang.
func TestConnectTunnelEndsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c // accepted, never read from, never closed
		}
	}()
	defer func() {
		select {
		case c := <-held:
			c.Close()
		default:
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	a, err := ParseAllow("127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Allow: a}
	ctx, cancel := context.WithCancel(context.Background())
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); p.ServeConn(ctx, server) }()
	if _, err := io.WriteString(client, "CONNECT 127.0.0.1:"+port+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	client.Close() // the client is gone; the upstream stays open
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ServeConn did not return after its context was done: a silent upstream holds the tunnel")
	}
}
