package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/mcpserver"
	"github.com/capfs/capfs/vfs"
)

// version is reported to MCP clients.
const version = "dev"

func newMCPCmd(o *globalOptions) *cobra.Command {
	var httpAddr string
	var readOnly bool
	var sessionTimeout time.Duration
	var roots bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the namespace to AI agents over the Model Context Protocol",
		Long: `Serve the namespace as a Model Context Protocol server, over stdio (the
default: register "capfs mcp" as a command with your MCP client) or, with
--http ADDR, over streamable HTTP at http://ADDR/mcp on a loopback address only.

Tools: read, read_many, tail, read_media, write, append, edit, multi_edit,
apply_patch, list, tree, glob, grep, stat, mkdir, move, copy, remove, mounts,
help; each with a title, an output schema and structured results. A bad line
on stdin gets a JSON-RPC error and the server keeps serving; when stdin
closes, every reply in flight is written before the exit. With --roots, each
of the client's roots that lies inside a directory mounted with --mount is
shown under roots/NAME as a view of it (same policy, read-only if the mount
is); other roots, file:/// included, are refused on stderr. Every tool call goes
through the namespace's capability: confined to it, decided by the policy,
and recorded in the audit log, each event tagged with the MCP request. With
--read-only (or when every mount is read-only) no writing tool is offered.
Memory mounts, the default tmp included, are bounded by their quota (256MiB
unless --memory-quota or quota=SIZE says otherwise): past it, writes fail with
quota_exceeded. Names in text results are escaped (\n, \u001b, \u202e, ...),
so a file name cannot forge a line or drive a terminal.

Example client configuration (Claude Desktop, Claude Code's .mcp.json, ...):
  {"mcpServers": {"capfs": {"command": "capfs",
    "args": ["mcp", "--mount", "project=physical:/path/to/project"]}}}`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on this loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT) instead of stdio")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "serve a read-only view: no writing tool is offered")
	cmd.Flags().BoolVar(&roots, "roots", false, "show each of the client's roots (the file:// directories it lists with roots/list) that lies inside a physical mount as roots/NAME, a view of that directory through the namespace (its policy; read-only if the mount is or with --read-only); roots outside every mount, file:/// included, are refused and reported on stderr; a changed list adds the new ones")
	cmd.Flags().BoolVar(&o.ephemeralScratch, "ephemeral-scratch", false, "make the default tmp mount a memory scratch that ends with the session (default: tmp persists across sessions in one SQLite file per project under $XDG_DATA_HOME/capfs/scratch, with the memory quota)")
	cmd.Flags().DurationVar(&sessionTimeout, "http-session-timeout", mcpserver.DefaultSessionTimeout, "with --http: close a session idle for this long (its next request gets 404, and the client starts a new one)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if httpAddr != "" {
			if err := checkLoopback(httpAddr); err != nil {
				return usageError(err)
			}
		}
		tuneServerGC(o.env)
		return action(o, func(ctx context.Context, cmd *cobra.Command, s *session, _ []string) error {
			root := s.Root
			if readOnly {
				root = root.ReadOnly()
			}
			rm := &rootMounts{s: s, root: root, log: cmd.ErrOrStderr(), byURI: map[string]string{}}
			opts := mcpserver.Options{
				Name:    "capfs",
				Version: version,
				Mounts:  func() []mcpserver.MountInfo { return append(mcpMounts(s, readOnly), rm.list()...) },
			}
			if roots {
				opts.Roots = rm.mount
			}
			srv := mcpserver.New(root, opts)
			if httpAddr == "" {
				err := srv.Run(ctx, &mcpserver.StdioTransport{In: cmd.InOrStdin(), Out: cmd.OutOrStdout()})
				if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) {
					return nil
				}
				return err
			}
			return serveHTTP(ctx, cmd, srv, httpAddr, sessionTimeout)
		})(cmd, args)
	}
	return cmd
}

// tuneServerGC trades memory for CPU in the long-running server: the garbage
// collector runs when the heap has grown by 400% over the live data rather
// than 100% (the live heap between calls is a few MiB, so the default
// collected every few hundred KiB of a call's JSON: a quarter to a third of
// the CPU of a list or grep call), with a soft limit of 1 GiB after which it
// collects as often as it must. GOGC or GOMEMLIMIT in env win. Only a
// server that is the process itself tunes it ([environ.ownsProcess]).
func tuneServerGC(env environ) {
	if !env.ownsProcess() {
		return
	}
	if env.env("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if env.env("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}

// rootMounts shows the client's roots (capfs mcp --roots) as views of the
// directories the host mounted: a root only narrows the namespace, it never
// adds a host directory to it.
// maxRoots bounds the distinct root URIs a server handles (each accepted one
// is a mount): a client cannot grow the namespace, its audit trail and the
// listings without end.
const maxRoots = 64

type rootMounts struct {
	s    *session
	root *dir.Dir  // the Dir the server serves (read-only with --read-only)
	log  io.Writer // where refused roots are reported (the host's stderr)
	mu   sync.Mutex
	// views is the Dir the roots' views are Subs of (see viewsDir), made
	// with the first root accepted.
	views *dir.Dir
	// byURI maps each root URI already handled to its mount path ("" when
	// it was refused).
	byURI map[string]string
	infos []mcpserver.MountInfo
}

// mount shows each file:// root not handled yet at roots/NAME (NAME the
// directory's base name, made unique with -2, -3, ...), as a view of the
// directory of a physical mount that holds it (see [rootMounts.view]). A root
// outside every physical mount, or whose path leads out of its mount, is
// refused and reported on r.log; roots that are not file:// URIs are ignored.
//
//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
func (r *rootMounts) mount(ctx context.Context, roots []*mcp.Root) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, root := range roots {
		if root == nil {
			continue
		}
		if _, done := r.byURI[root.URI]; done {
			continue
		}
		host, ok := rootHostPath(root.URI)
		if !ok {
			continue
		}
		if len(r.byURI) >= maxRoots {
			fmt.Fprintf(r.log, "capfs mcp: root %q refused: the client has offered %d roots, the most a session takes\n", root.URI, maxRoots)
			continue
		}
		r.byURI[root.URI] = ""
		at, of, ro, err := r.view(ctx, host)
		if err != nil {
			fmt.Fprintf(r.log, "capfs mcp: root %q refused: %v\n", root.URI, err)
			continue
		}
		r.byURI[root.URI] = "/" + at.String()
		r.infos = append(r.infos, mcpserver.MountInfo{Path: "/" + at.String(), Backend: "view", ReadOnly: ro,
			Note: "a root of the MCP client (" + root.Name + "): a view of /" + of.String() + ", under its policy"})
	}
}

// rootHostPath returns the cleaned host path of a file:// URI naming a local
// absolute path; false for anything else.
func rootHostPath(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) {
		return "", false
	}
	return filepath.Clean(u.Path), true
}

// view mounts at roots/NAME a Sub of the namespace at the guest path of host,
// and returns where, that guest path, and whether the view is read-only. host must lie inside a physical
// mount; Dir.Sub then resolves it within the namespace, so a symlink that
// leads out of the mount, or a place the policy refuses, is refused as it is
// to the guest. The view keeps the mount's and the server's read-only bit.
func (r *rootMounts) view(ctx context.Context, host string) (at, gp vfs.Path, ro bool, err error) {
	gp, m, ok := r.guestPath(host)
	if !ok {
		return at, gp, false, errors.New("not inside a directory mounted with --mount (a root can only narrow the namespace)")
	}
	if r.views == nil {
		if r.views, err = r.viewsDir(); err != nil {
			return at, gp, false, err
		}
	}
	sub, err := r.views.Sub(ctx, gp.String())
	if err != nil {
		return at, gp, false, errors.New(formatError(err))
	}
	ro = m.ReadOnly || r.root.IsReadOnly()
	if ro {
		sub = sub.ReadOnly()
	}
	if at, err = r.freeName(ctx, host); err != nil {
		return at, gp, ro, err
	}
	if err := r.s.NS.Mount(at, sub.Backend(), vfs.MountOptions{ReadOnly: ro}); err != nil {
		return at, gp, ro, errors.New(formatError(err))
	}
	return at, gp, ro, nil
}

// viewsDir returns a Dir over a namespace of the session's own mounts (the
// same backends at the same paths, read-only where they are), with the
// session's policy, audit sink, subject and git guard: the roots' views are
// Subs of it, so every call through roots/NAME is decided on the path it has
// in the mount as well as on roots/NAME. It is not the session's Root itself,
// whose tree lock a call through the view already holds when it reaches the
// view (a Dir mounted in its own namespace would wait on itself).
func (r *rootMounts) viewsDir() (*dir.Dir, error) {
	ns := vfs.NewNamespace()
	for _, m := range r.s.Mounts {
		if err := ns.Mount(m.Path, m.Backend, vfs.MountOptions{ReadOnly: m.ReadOnly}); err != nil {
			return nil, errors.New(formatError(err))
		}
	}
	d, _ := r.s.dirOver(ns, audit.Batching(r.s.Audit))
	if r.root.IsReadOnly() {
		d = d.ReadOnly()
	}
	return d, nil
}

// guestPath translates host into the namespace path it has in the physical
// mount of the session that holds it (the one with the deepest host
// directory, compared as given and with its symlinks resolved), provided no
// other mount covers that path. It is only a translation: what the path
// names is decided when it is resolved through the Dir.
func (r *rootMounts) guestPath(host string) (vfs.Path, *mounted, bool) {
	var best *mounted
	var bestPath vfs.Path
	bestDepth := -1
	for _, m := range r.s.Mounts {
		if !m.WorkTree() {
			continue
		}
		for _, base := range hostForms(m.Host) {
			rel, err := filepath.Rel(base, host)
			if err != nil || climbs(rel) || filepath.IsAbs(rel) {
				continue
			}
			gp := m.Path
			if rel != "." {
				p, err := vfs.ParseGuest(filepath.ToSlash(rel))
				if err != nil {
					continue
				}
				gp = m.Path.Join(p)
			}
			if deepest, _, ok := r.s.mountAt(gp); !ok || deepest != m {
				continue
			}
			if d := strings.Count(base, string(filepath.Separator)); d > bestDepth {
				best, bestPath, bestDepth = m, gp, d
			}
		}
	}
	return bestPath, best, best != nil
}

// hostForms is a mount's host directory as given and, when it differs, with
// its symlinks resolved (a client may name either).
func hostForms(h string) []string {
	forms := []string{h}
	if real, err := filepath.EvalSymlinks(h); err == nil && real != h {
		forms = append(forms, real)
	}
	return forms
}

// freeName returns roots/NAME for host's base name, made unique with -2,
// -3, ... against what the namespace already has.
func (r *rootMounts) freeName(ctx context.Context, host string) (vfs.Path, error) {
	base := filepath.Base(host)
	if base == string(filepath.Separator) || base == "." || strings.ContainsAny(base, `\`) {
		base = "root"
	}
	name := base
	for i := 2; ; i++ {
		mp, err := vfs.ParseGuest("roots/" + name)
		if err != nil {
			return vfs.Path{}, fmt.Errorf("no mount name for %q: %s", base, formatError(err))
		}
		if _, err := r.s.NS.Lstat(ctx, mp); err != nil {
			return mp, nil
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

func (r *rootMounts) list() []mcpserver.MountInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mcpserver.MountInfo(nil), r.infos...)
}

// mcpMounts describes the session's mounts for the mounts tool, without host
// paths: the kind, and a git mount's revision.
func mcpMounts(s *session, readOnly bool) []mcpserver.MountInfo {
	out := make([]mcpserver.MountInfo, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		mi := mcpMountInfo(m, readOnly)
		out = append(out, mi)
	}
	return out
}

// mcpMountInfo describes m for the mounts tool: what it is, asked of its
// traits, and its quota.
func mcpMountInfo(m *mounted, readOnly bool) mcpserver.MountInfo {
	mi := mcpserver.MountInfo{Path: "/" + m.Path.Raw(), Backend: m.Kind, ReadOnly: m.ReadOnly || readOnly}
	switch {
	case m.Revision():
		mi.Note = "revision " + m.Rev + " (read-only)"
	case m.WorkTree():
		mi.Backend = "host directory"
	case m.Ephemeral():
		mi.Note = "in memory: gone when the server exits"
		if m.Quota > 0 {
			mi.Note += "; quota " + formatQuota(m.Quota) + " (file data, names and links; writes past it fail with quota_exceeded)"
		}
	case m.Persistent():
		mi.Note = "persistent scratch: kept across sessions of this project"
		if m.Quota > 0 {
			mi.Note += "; quota " + formatQuota(m.Quota) + " (writes past it fail with quota_exceeded)"
		}
	}
	return mi
}

// checkLoopback accepts only host:port addresses whose host is a loopback IP or
// "localhost": the server has no authentication of its own.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT on a loopback address, e.g. 127.0.0.1:8080", addr)
	}
	if port == "" {
		return fmt.Errorf("--http %q: no port", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--http %q: refusing a non-loopback address (the MCP server has no authentication); use 127.0.0.1, [::1] or localhost", addr)
	}
	return nil
}

// serveHTTP serves srv over streamable HTTP at /mcp until ctx is done.
func serveHTTP(ctx context.Context, cmd *cobra.Command, srv *mcp.Server, addr string, sessionTimeout time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// A name that resolved to something else than loopback is refused too.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return usageErrorf("--http %q: listening address %s is not loopback", addr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.NewHTTPHandler(srv, mcpserver.HTTPOptions{Origins: mcpserver.OwnOrigins(ln.Addr()), SessionTimeout: sessionTimeout}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.ErrOrStderr(), "capfs mcp: serving streamable HTTP at http://%s/mcp\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-done
		return nil
	}
}
