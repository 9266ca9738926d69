//go:build linux

package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxHeader bounds the bytes of one request's line and headers: a client cannot
// make the proxy buffer more.
const maxHeader = 1 << 20

// Attempt is one connection or request the sandbox tried, as the proxy decided it.
type Attempt struct {
	Method  string // CONNECT, or the HTTP method of a plain request
	Host    string // as the client named it, normalized (see [Allow])
	Port    int
	Allowed bool
	// Err is why an allowed attempt failed (the dial or the request), or nil.
	Err error
}

// Proxy is an HTTP proxy that lets through exactly what Allow permits. Its zero
// value refuses everything. Fields must not change while it serves.
type Proxy struct {
	Allow Allow
	// Dial connects to an allowed address (an IP address and port: a name is
	// resolved first, see Resolver); nil means a net.Dialer with a 30 s
	// timeout. It is called only after the rule check, so a refused name is
	// never resolved.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Record, when set, receives every attempt. It must be safe for concurrent use.
	Record func(Attempt)
	// Resolver looks an allowed name up; nil means the system's resolver.
	// Addresses on the host or its link (loopback, link-local) are dropped
	// from its answer: only a rule naming such an address reaches it.
	Resolver func(ctx context.Context, host string) ([]net.IP, error)

	once sync.Once
	tr   *http.Transport
}

// ServeConn serves the proxy protocol on c until the client closes it, a CONNECT
// tunnel ends, or ctx is done; it closes c.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	lr := &io.LimitedReader{R: c, N: maxHeader}
	br := bufio.NewReader(lr)
	for {
		lr.N = maxHeader
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		lr.N = math.MaxInt64
		if req.Method == http.MethodConnect {
			p.connect(ctx, c, br, req)
			return
		}
		if !p.forward(ctx, c, req) {
			return
		}
	}
}

// decide checks host:port (defaulting the port to def) against the rules and
// records a refusal; it returns the normalized host, the port and the verdict.
func (p *Proxy) decide(method, hostport string, def int) (string, int, bool) {
	host, port := hostport, def
	if h, ps, err := net.SplitHostPort(hostport); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			p.record(Attempt{Method: method, Host: normHost(hostport)})
			return "", 0, false
		}
		host, port = h, n
	}
	host = normHost(host)
	if host == "" || port == 0 || !p.Allow.Permits(host, port) {
		p.record(Attempt{Method: method, Host: host, Port: port})
		return host, port, false
	}
	return host, port, true
}

// connect serves a CONNECT request: a tunnel to an allowed host:port.
func (p *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, ok := p.decide(req.Method, req.Host, 0)
	if !ok {
		refuse(c, host, port)
		return
	}
	up, err := p.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	p.record(Attempt{Method: req.Method, Host: host, Port: port, Allowed: true, Err: err})
	if err != nil {
		reply(c, http.StatusBadGateway, "capfs: egress to "+hostPort(host, port)+" failed: "+err.Error())
		return
	}
	defer up.Close()
	// Closing c when ctx ends does not wake a copy blocked reading a silent
	// upstream: close that side too, so the tunnel ends with ctx.
	stopUp := context.AfterFunc(ctx, func() { up.Close() })
	defer stopUp()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	pipe(c, up)
}

// forward serves one plain-HTTP request in absolute form; it reports whether the
// client's connection may carry another request.
func (p *Proxy) forward(ctx context.Context, c net.Conn, req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		reply(c, http.StatusBadRequest, "capfs: egress proxy: want CONNECT or an absolute http:// URL")
		return false
	}
	host, port, ok := p.decide(req.Method, req.URL.Host, 80)
	if !ok {
		refuse(c, host, port)
		return false
	}
	req.RequestURI = ""
	req.URL.Host = hostPort(host, port)
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	resp, err := p.transport().RoundTrip(req.WithContext(ctx))
	p.record(Attempt{Method: req.Method, Host: host, Port: port, Allowed: true, Err: err})
	if err != nil {
		reply(c, http.StatusBadGateway, "capfs: egress to "+hostPort(host, port)+" failed: "+err.Error())
		return false
	}
	defer resp.Body.Close()
	if err := resp.Write(c); err != nil {
		return false
	}
	return !req.Close && !resp.Close
}

// transport is the proxy's client for plain HTTP: no proxy of its own, dials
// through p.dial.
func (p *Proxy) transport() *http.Transport {
	p.once.Do(func() {
		p.tr = &http.Transport{
			Proxy:                 nil,
			DialContext:           p.dial,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 5 * time.Minute,
			DisableCompression:    true,
		}
	})
	return p.tr
}

// dial connects to addr, which the caller has already allowed.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) != nil {
		return p.dialIP(ctx, network, addr) // an address the rule names itself
	}
	ips, err := p.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, ip := range ips {
		if localIP(ip) {
			continue
		}
		c, err := p.dialIP(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%s resolves only to loopback or link-local addresses, which a rule must name as addresses", host)
	}
	return nil, firstErr
}

// lookup resolves an allowed name (Resolver, else the system's).
func (p *Proxy) lookup(ctx context.Context, host string) ([]net.IP, error) {
	if p.Resolver != nil {
		return p.Resolver(ctx, host)
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	return ips, nil
}

// dialIP connects to addr, an IP address and port.
func (p *Proxy) dialIP(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.Dial != nil {
		return p.Dial(ctx, network, addr)
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	return d.DialContext(ctx, network, addr)
}

// localIP reports whether ip is the host's own or its link's: loopback,
// link-local (the cloud metadata service at 169.254.169.254 among them),
// unspecified or multicast. An allowed name that resolves there (DNS
// rebinding) is not dialed; a rule naming such an address is.
func localIP(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified()
}

// record hands a to Record, when set.
func (p *Proxy) record(a Attempt) {
	if p.Record != nil {
		p.Record(a)
	}
}

// Close releases the proxy's idle upstream connections.
func (p *Proxy) Close() {
	if p.tr != nil {
		p.tr.CloseIdleConnections()
	}
}

// RefusedMessage is the body of the 403 answer to a refused host:port.
func RefusedMessage(host string, port int) string {
	return fmt.Sprintf("capfs: the sandbox may not reach %s (capfs run --net allow=%s lets it through)", hostPort(host, port), Rule{Host: host, Port: port})
}

// refuse answers 403 for host:port.
func refuse(c net.Conn, host string, port int) {
	reply(c, http.StatusForbidden, RefusedMessage(host, port))
}

// reply writes a complete response with a text body and closes the exchange.
func reply(c net.Conn, code int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// hostPort joins host and port, bracketing an IPv6 address.
func hostPort(host string, port int) string {
	if port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// pipe copies both ways between a and b until both directions end.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyClose(a, b) }()
	go func() { defer wg.Done(); copyClose(b, a) }()
	wg.Wait()
}

// copyClose copies src to dst, then closes dst for writing (or entirely).
func copyClose(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := dst.(closeWriter); ok && err == nil {
		_ = cw.CloseWrite()
		return
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		_ = src.Close()
	}
	_ = dst.Close()
}
