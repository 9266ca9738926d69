//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/sandbox/egress"
)

// netMode is what --net gives the sandboxed command.
type netMode int

const (
	netOff   netMode = iota // no network (the default)
	netAllow                // the egress proxy, to the hosts listed
	netHost                 // the host's network
)

// netFlags is --net.
type netFlags struct {
	arg   string
	mode  netMode
	allow egress.Allow
}

// netHelp is --net's help text.
const netHelp = `network for the command: off (the default: none; npm is told it is offline), ` +
	`allow=HOST[:PORT],... (an HTTP proxy in the sandbox lets exactly those hosts through, by HTTP CONNECT ` +
	`or plain HTTP, with HTTP_PROXY and HTTPS_PROXY set; every attempt is audited), or host (the host's network, for a trusted command)`

// add declares --net on fs.
func (n *netFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&n.arg, "net", "off", netHelp)
}

// parse reads --net.
func (n *netFlags) parse() error {
	switch v := strings.TrimSpace(n.arg); {
	case v == "" || v == "off" || v == "none":
		n.mode = netOff
	case v == "host":
		n.mode = netHost
	case strings.HasPrefix(v, "allow="):
		a, err := egress.ParseAllow(strings.TrimPrefix(v, "allow="))
		if err != nil {
			return usageErrorf("--net %s: %v", show(n.arg), err)
		}
		n.mode, n.allow = netAllow, a
	default:
		return usageErrorf("--net %s: want off, allow=HOST[:PORT],... or host", show(n.arg))
	}
	return nil
}

// env is what the sandbox's environment gets for the network mode: without a
// network, npm is told it is offline, so it installs from its cache (see capfs
// cache) or fails at once instead of retrying for minutes.
func (n *netFlags) env() []string {
	if n.mode == netOff {
		return []string{"npm_config_offline=true"}
	}
	return nil
}

// wrappers returns the runner's chain around bw: the egress proxy first under
// --net allow (its attempts go to sink, and each refused host is said once on
// warn).
func (n *netFlags) wrappers(bw sandbox.Wrapper, subject string, sink audit.Sink, warn io.Writer) ([]sandbox.Wrapper, error) {
	if n.mode != netAllow {
		return []sandbox.Wrapper{bw}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, failed(fmt.Errorf("--net allow: the capfs binary for the proxy's shim: %v", err))
	}
	rec := &netRecorder{subject: subject, sink: sink, warn: warn, said: map[string]bool{}, allow: n.allow.String()}
	return []sandbox.Wrapper{&egress.Wrapper{Allow: n.allow, Exe: exe, Record: rec.record}, bw}, nil
}

// hint is the line said when a command run without a network failed.
func (n *netFlags) hint() string {
	switch n.mode {
	case netOff:
		return "capfs: run: the sandbox has no network: --net allow=HOST[:PORT] lets chosen hosts through (capfs cache --help says how to build offline)\n"
	case netAllow:
		return "capfs: run: the sandbox reaches only " + show(n.allow.String()) + " (--net allow)\n"
	}
	return ""
}

// netRecorder turns the proxy's attempts into audit events and says each refused
// host once.
type netRecorder struct {
	subject, allow string
	sink           audit.Sink
	warn           io.Writer
	mu             sync.Mutex
	said           map[string]bool
}

// record is the egress Record function.
func (r *netRecorder) record(a egress.Attempt) {
	target := (egress.Rule{Host: a.Host, Port: a.Port}).String()
	ev := audit.Event{Time: time.Now(), Subject: r.subject, Op: "net." + strings.ToLower(a.Method), Path: target, Rule: "net:allow=" + r.allow}
	switch {
	case !a.Allowed:
		ev.Outcome, ev.Code = audit.Denied, "permission_denied"
	case a.Err != nil:
		ev.Outcome, ev.Code = audit.Failed, "io_error"
	default:
		ev.Outcome = audit.OK
	}
	if r.sink != nil {
		r.sink.Record(context.Background(), ev)
	}
	if a.Allowed {
		return
	}
	r.mu.Lock()
	first := !r.said[target]
	r.said[target] = true
	r.mu.Unlock()
	if first {
		fmt.Fprintf(r.warn, "capfs: run: refused the sandbox's connection to %s (not in --net allow=%s)\n", show(target), show(r.allow))
	}
}

// runEgressShim runs the egress shim when capfs was started as one (inside a
// sandbox, by --net allow); it does not return then.
func runEgressShim() {
	if len(os.Args) > 1 && os.Args[1] == egress.ShimArg {
		os.Exit(egress.ShimMain(os.Args[2:]))
	}
}
