package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

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
closes, every reply in flight is written before the exit. With --roots, the
client's roots are mounted under roots/NAME. Every tool call goes
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
	cmd.Flags().BoolVar(&roots, "roots", false, "mount the client's roots (the file:// directories it lists with roots/list) under roots/NAME, as physical mounts under the session's policy (read-only with --read-only); a changed list adds the new ones")
	cmd.Flags().BoolVar(&o.ephemeralScratch, "ephemeral-scratch", false, "make the default tmp mount a memory scratch that ends with the session (default: tmp persists across sessions in one SQLite file per project under $XDG_DATA_HOME/capfs/scratch, with the memory quota)")
	cmd.Flags().DurationVar(&sessionTimeout, "http-session-timeout", mcpserver.DefaultSessionTimeout, "with --http: close a session idle for this long (its next request gets 404, and the client starts a new one)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if httpAddr != "" {
			if err := checkLoopback(httpAddr); err != nil {
				return usageError(err)
			}
		}
		tuneServerGC()
		return action(o, func(ctx context.Context, cmd *cobra.Command, s *session, _ []string) error {
			root := s.Root
			if readOnly {
				root = root.ReadOnly()
			}
			rm := &rootMounts{s: s, readOnly: readOnly, byURI: map[string]string{}}
			opts := mcpserver.Options{
				Name:    "capfs",
				Version: version,
				Mounts:  func() []mcpserver.MountInfo { return append(mcpMounts(s, readOnly), rm.list()...) },
			}
			if roots {
				opts.Roots = rm.mount
			}
			srv := mcpserver.New(root, opts)
			defer rm.close()
			if httpAddr == "" {
				err := srv.Run(ctx, &mcpserver.StdioTransport{In: os.Stdin, Out: os.Stdout})
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
// collects as often as it must. GOGC or GOMEMLIMIT in the environment win.
func tuneServerGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}

// rootMounts mounts the client's roots (capfs mcp --roots).
type rootMounts struct {
	s        *session
	readOnly bool
	mu       sync.Mutex
	byURI    map[string]string // root URI -> mount path
	infos    []mcpserver.MountInfo
	closers  []func() error
}

// mount mounts each file:// root not mounted yet at roots/NAME (NAME the
// directory's base name, made unique with -2, -3, ...). Roots that are not
// local directories are ignored.
//
//lint:ignore SA1019 roots are deprecated by SEP-2577 but still part of the session protocols capfs serves (issue 12 asks for them)
func (r *rootMounts) mount(_ context.Context, roots []*mcp.Root) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, root := range roots {
		if root == nil || r.byURI[root.URI] != "" {
			continue
		}
		u, err := url.Parse(root.URI)
		if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) {
			continue
		}
		host := filepath.Clean(u.Path)
		if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
			continue
		}
		base := filepath.Base(host)
		if base == "/" || base == "." || strings.ContainsAny(base, `\`) {
			base = "root"
		}
		name := base
		var mp vfs.Path
		for i := 2; ; i++ {
			mp, err = vfs.ParseGuest("roots/" + name)
			if err != nil {
				break
			}
			if _, serr := r.s.NS.Lstat(context.Background(), mp); serr != nil {
				break
			}
			name = fmt.Sprintf("%s-%d", base, i)
		}
		if err != nil {
			continue
		}
		m, err := openMount(mountSpec{Path: mp, Kind: kindPhysical, Source: root.URI, Host: host, ReadOnly: r.readOnly, Origin: "roots"}, 0)
		if err != nil {
			continue
		}
		if err := r.s.NS.Mount(mp, m.Backend, vfs.MountOptions{ReadOnly: r.readOnly}); err != nil {
			if c, ok := m.Backend.(io.Closer); ok {
				c.Close()
			}
			continue
		}
		if c, ok := m.Backend.(io.Closer); ok {
			r.closers = append(r.closers, c.Close)
		}
		r.byURI[root.URI] = "/" + mp.String()
		r.infos = append(r.infos, mcpserver.MountInfo{Path: "/" + mp.String(), Backend: "host directory", ReadOnly: r.readOnly,
			Note: "a root of the MCP client (" + root.Name + ")"})
	}
}

func (r *rootMounts) list() []mcpserver.MountInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mcpserver.MountInfo(nil), r.infos...)
}

func (r *rootMounts) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.closers {
		_ = c()
	}
	r.closers = nil
}

// mcpMounts describes the session's mounts for the mounts tool, without host
// paths: the kind, and a git mount's revision.
func mcpMounts(s *session, readOnly bool) []mcpserver.MountInfo {
	out := make([]mcpserver.MountInfo, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		mi := mcpserver.MountInfo{Path: "/" + m.Path.Raw(), Backend: m.Kind, ReadOnly: m.ReadOnly || readOnly}
		switch m.Kind {
		case kindGit:
			mi.Backend, mi.Note = "git", "revision "+m.Rev+" (read-only)"
		case kindPhysical:
			mi.Backend = "host directory"
		case kindMemory:
			mi.Note = "in memory: gone when the server exits"
			if m.Quota > 0 {
				mi.Note += "; quota " + formatQuota(m.Quota) + " (file data, names and links; writes past it fail with quota_exceeded)"
			}
		case "sqlite":
			mi.Backend, mi.Note = "sqlite", "persistent scratch: kept across sessions of this project"
			if m.Quota > 0 {
				mi.Note += "; quota " + formatQuota(m.Quota) + " (writes past it fail with quota_exceeded)"
			}
		}
		out = append(out, mi)
	}
	return out
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
