//go:build linux

package sandbox

import (
	"net"
	"strconv"
	"testing"
)

func TestBwrapShareNet(t *testing.T) {
	needBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	script := `if bash -c 'echo hi > /dev/tcp/127.0.0.1/` + port + `' 2>/dev/null; then echo connected; else echo unreachable; fi`
	_, out, _ := runOut(t, bwrapRunner(BubblewrapOptions{ShareNet: true}), sh(script))
	if out != "connected\n" {
		t.Fatalf("with ShareNet the host's loopback listener was %q, want connected", out)
	}
}
