//go:build linux

package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/materialize/sandbox"
)

// TestMain makes the test binary its own shim, as the capfs command is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		os.Exit(ShimMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestParseAllow(t *testing.T) {
	good := map[string]string{
		"registry.npmjs.org":               "registry.npmjs.org",
		"Example.COM.:443":                 "example.com:443",
		"127.0.0.1:8080, proxy.golang.org": "127.0.0.1:8080,proxy.golang.org",
		"[::1]:80":                         "[::1]:80",
		"[::1]":                            "[::1]",
	}
	for in, want := range good {
		a, err := ParseAllow(in)
		if err != nil || a.String() != want {
			t.Errorf("ParseAllow(%q) = %q, %v; want %q", in, a.String(), err, want)
		}
	}
	for _, in := range []string{"", " ", "a,,b", "*.example.com", "host:0", "host:70000", "host:x", "ex ample.com", "a/b", "-:-"} {
		if a, err := ParseAllow(in); err == nil {
			t.Errorf("ParseAllow(%q) = %v, want an error", in, a)
		}
	}
	a, _ := ParseAllow("example.com:443,10.0.0.1")
	cases := []struct {
		host string
		port int
		want bool
	}{
		{"example.com", 443, true}, {"EXAMPLE.com.", 443, true}, {"example.com", 80, false},
		{"sub.example.com", 443, false}, {"10.0.0.1", 22, true}, {"10.0.0.2", 22, false},
	}
	for _, c := range cases {
		if got := a.Permits(c.host, c.port); got != c.want {
			t.Errorf("Permits(%s, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
}

// recorder collects attempts.
type recorder struct {
	mu  sync.Mutex
	got []Attempt
}

func (r *recorder) record(a Attempt) { r.mu.Lock(); r.got = append(r.got, a); r.mu.Unlock() }

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, a := range r.got {
		s = append(s, fmt.Sprintf("%s %s allowed=%v", a.Method, hostPort(a.Host, a.Port), a.Allowed))
	}
	return s
}

// serveProxy serves p on a loopback listener and returns its URL.
func serveProxy(t *testing.T, p *Proxy) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ln.Close(); p.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.ServeConn(ctx, c)
		}
	}()
	u, _ := url.Parse("http://" + ln.Addr().String())
	return u
}

func TestProxyLetsThroughExactlyTheAllowed(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain:"+r.URL.Path)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls:"+r.URL.Path)
	}))
	defer secure.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a refused request reached the server: %s", r.URL)
	}))
	defer other.Close()

	allow, err := ParseAllow(strings.TrimPrefix(plain.URL, "http://") + "," + strings.TrimPrefix(secure.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var dials []string
	var mu sync.Mutex
	p := &Proxy{Allow: allow, Record: rec.record, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	pu := serveProxy(t, p)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: secure.Client().Transport.(*http.Transport).TLSClientConfig.Clone()}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(plain.URL + "/a"); code != 200 || body != "plain:/a" {
		t.Fatalf("plain HTTP through the proxy: %d %q", code, body)
	}
	if code, body := get(plain.URL + "/b"); code != 200 || body != "plain:/b" {
		t.Fatalf("second plain request: %d %q", code, body)
	}
	if code, body := get(secure.URL + "/c"); code != 200 || body != "tls:/c" {
		t.Fatalf("CONNECT tunnel: %d %q", code, body)
	}
	code, body := get(other.URL + "/x")
	if code != http.StatusForbidden || !strings.Contains(body, "--net allow=") {
		t.Fatalf("refused host: %d %q, want 403 naming the flag", code, body)
	}
	// A refused name is never looked up: the dialer is never called for it.
	code, _ = get("http://secret.invalid/x")
	if code != http.StatusForbidden {
		t.Fatalf("refused name: %d, want 403", code)
	}
	mu.Lock()
	for _, d := range dials {
		if strings.Contains(d, "secret.invalid") || d == strings.TrimPrefix(other.URL, "http://") {
			t.Fatalf("the proxy dialed a refused destination: %v", dials)
		}
	}
	mu.Unlock()
	got := strings.Join(rec.list(), "\n")
	for _, want := range []string{
		"GET " + strings.TrimPrefix(plain.URL, "http://") + " allowed=true",
		"CONNECT " + strings.TrimPrefix(secure.URL, "https://") + " allowed=true",
		"GET " + strings.TrimPrefix(other.URL, "http://") + " allowed=false",
		"GET secret.invalid:80 allowed=false",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("attempts lack %q:\n%s", want, got)
		}
	}
}

func TestProxyRefusesConnectToOtherPorts(t *testing.T) {
	rec := &recorder{}
	p := &Proxy{Allow: Allow{{Host: "127.0.0.1", Port: 1}}, Record: rec.record, Dial: func(context.Context, string, string) (net.Conn, error) {
		t.Error("dialed a refused destination")
		return nil, io.EOF
	}}
	pu := serveProxy(t, p)
	c, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 403")) {
		t.Fatalf("CONNECT to a port not allowed answered %q", b)
	}
}

func TestProxyBoundsHeaders(t *testing.T) {
	p := &Proxy{}
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { p.ServeConn(context.Background(), a); close(done) }()
	go func() {
		io.WriteString(b, "GET http://x/ HTTP/1.1\r\nX: ")
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for i := 0; i < 64; i++ { // 4 MiB of one header line
			if _, err := b.Write(chunk); err != nil {
				return
			}
		}
	}()
	<-done // the proxy gave up on the request rather than buffer it all
	b.Close()
}

func TestShimInSandbox(t *testing.T) {
	bw := sandbox.Bubblewrap(sandbox.BubblewrapOptions{})
	if err := bw.Probe(context.Background()); err != nil {
		t.Skipf("bubblewrap cannot sandbox here, skipping: %v", err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed, skipping the end-to-end egress test")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the host")
	}))
	defer srv.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a refused request reached the host: %s", r.URL)
	}))
	defer denied.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := ParseAllow(strings.TrimPrefix(srv.URL, "http://"))
	rec := &recorder{}
	w := &Wrapper{Allow: allow, Exe: exe, Record: rec.record}
	r := &sandbox.Runner{Wrappers: []sandbox.Wrapper{w, bw}}
	script := `curl -sS -f ` + srv.URL + `/ok; echo " exit=$?"
curl -sS -f ` + denied.URL + `/no 2>/dev/null; echo "denied exit=$?"
curl -sS ` + denied.URL + `/no | head -c 60; echo`
	var out, errb bytes.Buffer
	res, err := r.Run(context.Background(), &sandbox.Launch{Path: "/bin/sh", Args: []string{"-c", script}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.ExitCode, out.String(), errb.String())
	}
	t.Logf("sandbox output:\n%s", out.String())
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 || lines[0] != "hello from the host exit=0" || lines[1] != "denied exit=22" ||
		!strings.HasPrefix(lines[2], "capfs: the sandbox may not reach 127.0.0.1:"+strconv.Itoa(denied.Listener.Addr().(*net.TCPAddr).Port)) {
		t.Fatalf("sandbox output:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	got := strings.Join(rec.list(), "\n")
	if !strings.Contains(got, "allowed=true") || !strings.Contains(got, "allowed=false") {
		t.Fatalf("attempts not recorded:\n%s", got)
	}
	// The shim starts the command through the sandbox's exec check: 127 and
	// the sandbox's own line for a command that is not there.
	errb.Reset()
	res, err = r.Run(context.Background(), &sandbox.Launch{Path: "capfs-no-such-command", Stderr: &errb})
	if err != nil || res.ExitCode != 127 || !strings.Contains(errb.String(), "capfs-no-such-command: command not found") {
		t.Fatalf("missing command: %v, exit %v, stderr %q", err, res, errb.String())
	}
}

// TestProxyNoRebinding: an allowed name that resolves to the host's own or its
// link's addresses (DNS rebinding to 127.0.0.1, the metadata service at
// 169.254.169.254) is not dialed; a rule naming such an address itself is.
func TestProxyNoRebinding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a rebound name reached the host's server: %s", r.URL)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	var dialed []string
	var mu sync.Mutex
	p := &Proxy{
		Allow: Allow{{Host: "rebind.test", Port: port}, {Host: "meta.test", Port: port}},
		Resolver: func(_ context.Context, host string) ([]net.IP, error) {
			if host == "meta.test" {
				return []net.IP{net.ParseIP("169.254.169.254"), net.ParseIP("::1")}, nil
			}
			return []net.IP{net.ParseIP("127.0.0.1")}, nil
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	pu := serveProxy(t, p)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	for _, host := range []string{"rebind.test", "meta.test"} {
		resp, err := client.Get("http://" + host + ":" + strconv.Itoa(port) + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: status %d, want 502", host, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 0 {
		t.Errorf("dialed %v for names that resolve to local addresses", dialed)
	}
}

// TestWrapperNeedsSandbox: under AllowUnsandboxed with no sandbox able to run,
// a run with the egress wrapper is refused (unsandboxed, the command would
// have the host's network and the shim the host's loopback).
func TestWrapperNeedsSandbox(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bw := sandbox.Bubblewrap(sandbox.BubblewrapOptions{Path: "/nonexistent/bwrap"})
	r := &sandbox.Runner{Wrappers: []sandbox.Wrapper{&Wrapper{Exe: exe}, bw}, AllowUnsandboxed: true}
	var out bytes.Buffer
	_, err = r.Run(context.Background(), &sandbox.Launch{Path: "/bin/echo", Args: []string{"ran"}, Stdout: &out})
	if err == nil || !errors.Is(err, sandbox.ErrUnavailable) || out.Len() != 0 {
		t.Fatalf("run: %v, output %q; want refused with ErrUnavailable", err, out.String())
	}
}
