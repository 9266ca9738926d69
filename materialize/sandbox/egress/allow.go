//go:build linux

// Package egress lets a sandboxed command reach exactly the network hosts the host
// allows, through an HTTP proxy that decides and audits every attempt.
//
// A sandbox made by package sandbox has no network: its namespace holds a
// loopback interface and nothing else. [Wrapper] adds one door. Inside the
// sandbox a small shim (the capfs binary itself, run from a sealed in-memory copy)
// listens on 127.0.0.1:[Port] and starts the command with the standard proxy
// variables (HTTP_PROXY, HTTPS_PROXY and their lower-case forms, and npm's own)
// pointing there. Each connection the shim accepts is handed, as a descriptor over
// a socket pair made before the sandbox started, to the [Proxy] outside, which
// speaks HTTP CONNECT and plain absolute-URI HTTP. The proxy lets through a
// request whose host and port match an [Allow] rule and refuses every other one
// with 403 before anything is looked up, so a refused name never reaches DNS.
// Every attempt, let through or refused, is recorded.
//
// Nothing else leaves the sandbox: a program that ignores the proxy variables
// meets the empty network namespace, as before.
//
// What a rule does not bound: an allowed name is resolved by the host, and an
// answer on the host itself or its link (loopback, link-local: DNS rebinding
// toward 127.0.0.1 or a cloud's metadata service) is not dialed, but any other
// address the name resolves to is, private ranges included (an internal
// registry lives there). A CONNECT tunnel carries what the client sends: TLS to
// a shared front (a CDN address serving many names) reaches whichever name the
// client asks for inside, which the proxy cannot see without intercepting TLS.
// Allow only hosts you would let the command reach by any name they serve. The
// wrapper needs a sandbox ([sandbox.NeedsSandbox]): a run that would go
// unsandboxed is refused.
package egress

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Rule lets one host through: Host, compared without regard to case, and Port
// (0: any port).
type Rule struct {
	Host string
	Port int
}

// String is the rule as [ParseAllow] reads it.
func (r Rule) String() string {
	h := r.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if r.Port == 0 {
		return h
	}
	return h + ":" + strconv.Itoa(r.Port)
}

// Allow is a set of rules; the zero value allows nothing.
type Allow []Rule

// Permits reports whether a connection to host:port is allowed.
func (a Allow) Permits(host string, port int) bool {
	host = normHost(host)
	for _, r := range a {
		if r.Host == host && (r.Port == 0 || r.Port == port) {
			return true
		}
	}
	return false
}

// String lists the rules, comma-separated.
func (a Allow) String() string {
	s := make([]string, len(a))
	for i, r := range a {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// ParseAllow reads a comma-separated list of HOST or HOST:PORT ([ADDR]:PORT for
// an IPv6 address). A host is a DNS name (letters, digits, '-', '.', '_') or an
// IP address; a port is 1-65535. An empty list, an empty entry, a wildcard or any
// other character is an error: the list says exactly which hosts.
func ParseAllow(s string) (Allow, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty host list")
	}
	var out Allow
	for _, e := range strings.Split(s, ",") {
		r, err := parseRule(strings.TrimSpace(e))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// parseRule reads one HOST[:PORT] entry.
func parseRule(e string) (Rule, error) {
	if e == "" {
		return Rule{}, fmt.Errorf("empty entry in the host list")
	}
	host, port := e, 0
	if h, p, err := net.SplitHostPort(e); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, fmt.Errorf("%q: port must be 1-65535", e)
		}
		host, port = h, n
	} else if strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
		host = e[1 : len(e)-1]
	}
	host = normHost(host)
	if net.ParseIP(host) == nil && !validName(host) {
		return Rule{}, fmt.Errorf("%q: not a host name or IP address", e)
	}
	return Rule{Host: host, Port: port}, nil
}

// normHost lower-cases a name, drops one trailing dot and brackets, and writes an
// IP address in its canonical form.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// validName reports whether h is a DNS name of letters, digits, '-', '_' and
// non-empty dot-separated labels.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}
