package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPPattern is the regular expression the grep workloads search for: Go
// constructor declarations, a few hundred lines of GOROOT/src.
const MCPPattern = `func New[A-Z][a-zA-Z]*\(`

// MCPReadPath and MCPReadLines are what the read round trip asks for: the first
// 100 lines of io/io.go.
const (
	MCPReadPath  = "io/io.go"
	MCPReadLines = 100
)

// MCPFixture is what the MCP workloads (issues 6 and 12) run on: a copy of a
// tree served read-only by a real `capfs mcp` subprocess (built from this
// module) over stdio, the npm reference server (@modelcontextprotocol/
// server-filesystem, installed into the user's cache directory when npm is
// available) over stdio on the same copy, and the same copy for rg and grep.
type MCPFixture struct {
	Src string // the tree served: a copy of $(go env GOROOT)/src
	// Lines and Files are what grep -rnIE and grep -rlIE find for MCPPattern:
	// every implementation must find the same.
	Lines, Files int
	// ListDir, TreeDir and GlobDir are the directories (relative to Src) the
	// list, tree and glob workloads use; Entries is how many ListDir holds.
	ListDir, TreeDir, GlobDir string
	Entries                   int
	// RefNote says why the reference server's workloads are missing (npm
	// unavailable, install failed), or which version ran.
	RefNote string

	proc  *mcp.ClientSession // capfs mcp
	pid   int                // capfs mcp's process id
	ref   *mcp.ClientSession // the reference server, or nil
	close func()
}

// MCPGlob is the glob pattern of the glob workload.
const MCPGlob = "**/*_test.go"

// NewMCPFixture copies $(go env GOROOT)/src to a temporary directory and
// serves it.
func NewMCPFixture() (*MCPFixture, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	tmp, err := os.MkdirTemp("", "capfs-mcp-bench-")
	if err != nil {
		return nil, err
	}
	cp := filepath.Join(tmp, "src")
	if out, err := exec.Command("cp", "-a", src, cp).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("copying %s: %v: %s", src, err, out)
	}
	fx, err := mcpFixtureAt(cp, "cmd/go/testdata/script", "net/http", "net")
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	inner := fx.close
	fx.close = func() {
		inner()
		os.RemoveAll(tmp)
	}
	return fx, nil
}

// capfsBinary builds capfs into dir.
func capfsBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "capfs")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/capfs/capfs/cmd/capfs").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building capfs: %v: %s", err, out)
	}
	return bin, nil
}

// referenceServer returns the command line of the npm reference server,
// installing it into the user's cache directory if needed, or a note saying
// why it cannot.
func referenceServer() ([]string, string) {
	if _, err := exec.LookPath("npm"); err != nil {
		return nil, "npm is not installed: the reference server's workloads are skipped"
	}
	if _, err := exec.LookPath("node"); err != nil {
		return nil, "node is not installed: the reference server's workloads are skipped"
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	prefix := filepath.Join(cache, "capfs-bench", "npm")
	entry := filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			return nil, err.Error()
		}
		cmd := exec.Command("npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "@modelcontextprotocol/server-filesystem")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("npm install @modelcontextprotocol/server-filesystem failed (%v): the reference server's workloads are skipped\n%s", err, out)
		}
	}
	version := "?"
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(entry)), "package.json")); err == nil {
		if m := regexp.MustCompile(`"version":\s*"([^"]+)"`).FindSubmatch(data); m != nil {
			version = string(m[1])
		}
	}
	return []string{"node", entry}, "@modelcontextprotocol/server-filesystem " + version
}

func connectCommand(cmd *exec.Cmd) (*mcp.ClientSession, error) {
	cmd.Stderr = nil
	return mcp.NewClient(&mcp.Implementation{Name: "capfs-bench", Version: "v0"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
}

func mcpFixtureAt(src, listDir, treeDir, globDir string) (*MCPFixture, error) {
	fx := &MCPFixture{Src: src, ListDir: listDir, TreeDir: treeDir, GlobDir: globDir}
	lines, err := grepCLI(src, "-rnIE")
	if err != nil {
		return nil, err
	}
	files, err := grepCLI(src, "-rlIE")
	if err != nil {
		return nil, err
	}
	fx.Lines, fx.Files = lines, files
	ents, err := os.ReadDir(filepath.Join(src, filepath.FromSlash(listDir)))
	if err != nil {
		return nil, err
	}
	fx.Entries = len(ents)
	bindir, err := os.MkdirTemp("", "capfs-bench-bin-")
	if err != nil {
		return nil, err
	}
	bin, err := capfsBinary(bindir)
	if err != nil {
		os.RemoveAll(bindir)
		return nil, err
	}
	state, _ := os.MkdirTemp("", "capfs-bench-state-")
	cmd := exec.Command(bin, "mcp", "--read-only", "-m", "src=physical:"+src)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	fx.proc, err = connectCommand(cmd)
	if err != nil {
		os.RemoveAll(bindir)
		return nil, fmt.Errorf("starting capfs mcp: %w", err)
	}
	fx.pid = cmd.Process.Pid
	argv, note := referenceServer()
	fx.RefNote = note
	if argv != nil {
		if fx.ref, err = connectCommand(exec.Command(argv[0], append(argv[1:], src)...)); err != nil {
			fx.RefNote = fmt.Sprintf("starting the reference server: %v: its workloads are skipped", err)
			fx.ref = nil
		}
	}
	fx.close = func() {
		fx.proc.Close()
		if fx.ref != nil {
			fx.ref.Close()
		}
		os.RemoveAll(bindir)
		os.RemoveAll(state)
	}
	return fx, nil
}

// Close ends the servers and removes what the fixture made.
func (fx *MCPFixture) Close() {
	if fx.close != nil {
		fx.close()
		fx.close = nil
	}
}

// grepCLI runs grep with flags for MCPPattern in src (byte semantics, LC_ALL=C)
// and returns the number of lines it prints.
func grepCLI(src, flags string) (int, error) {
	cmd := exec.Command("grep", flags, MCPPattern, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("grep %s: %w", flags, err)
	}
	return bytes.Count(out, []byte("\n")), nil
}

// MCPImpl is one way of doing an MCP workload: through capfs's server, or the
// peer it is measured against.
type MCPImpl struct {
	Name string
	Peer bool
	Run  func(b *testing.B, fx *MCPFixture)
}

// MCPWorkload is one MCP workload with its implementations, capfs's first.
type MCPWorkload struct {
	Name  string
	Impls []MCPImpl
}

// MCPWorkloads returns every MCP workload (see MCPWorkloadsFor).
func MCPWorkloads() []MCPWorkload { return MCPWorkloadsFor(nil) }

// MCPWorkloadsFor returns issue 12's benchmark for fx (all of it for nil):
// grep through `capfs mcp` (content and files_with_matches) beside rg -n/-l
// and grep -rn/-rl, and list, tree, read and glob beside the reference
// server's list_directory, directory_tree, read_text_file and search_files
// (left out when fx has no reference server).
func MCPWorkloadsFor(fx *MCPFixture) []MCPWorkload {
	ws := []MCPWorkload{
		{Name: "grep -n " + MCPPattern + " (vs rg)", Impls: []MCPImpl{
			{Name: "capfs mcp grep, output_mode content", Run: mcpGrepContent},
			{Name: "rg -n", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { rgPeer(b, fx, "-n", fx.Lines) }},
		}},
		{Name: "grep -n " + MCPPattern + " (vs grep)", Impls: []MCPImpl{
			{Name: "capfs mcp grep, output_mode content", Run: mcpGrepContent},
			{Name: "grep -rnIE", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { grepPeer(b, fx, "-rnIE", fx.Lines) }},
		}},
		{Name: "grep -l " + MCPPattern + " (vs rg)", Impls: []MCPImpl{
			{Name: "capfs mcp grep, output_mode files_with_matches", Run: mcpGrepFiles},
			{Name: "rg -l", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { rgPeer(b, fx, "-l", fx.Files) }},
		}},
		{Name: "grep -l " + MCPPattern + " (vs grep)", Impls: []MCPImpl{
			{Name: "capfs mcp grep, output_mode files_with_matches", Run: mcpGrepFiles},
			{Name: "grep -rlIE", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { grepPeer(b, fx, "-rlIE", fx.Files) }},
		}},
	}
	if fx != nil && fx.ref == nil {
		return ws
	}
	return append(ws,
		MCPWorkload{Name: "list a directory", Impls: []MCPImpl{
			{Name: "capfs mcp list sizes=false", Run: func(b *testing.B, fx *MCPFixture) { mcpList(b, fx, false) }},
			{Name: "reference list_directory", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { refList(b, fx, "list_directory") }},
		}},
		MCPWorkload{Name: "list a directory with sizes", Impls: []MCPImpl{
			{Name: "capfs mcp list", Run: func(b *testing.B, fx *MCPFixture) { mcpList(b, fx, true) }},
			{Name: "reference list_directory_with_sizes", Peer: true, Run: func(b *testing.B, fx *MCPFixture) { refList(b, fx, "list_directory_with_sizes") }},
		}},
		MCPWorkload{Name: "tree of a directory", Impls: []MCPImpl{
			{Name: "capfs mcp tree (all levels)", Run: mcpTree},
			{Name: "reference directory_tree", Peer: true, Run: refTree},
		}},
		MCPWorkload{Name: fmt.Sprintf("read %d lines of %s", MCPReadLines, MCPReadPath), Impls: []MCPImpl{
			{Name: "capfs mcp read", Run: mcpRead},
			{Name: "reference read_text_file head", Peer: true, Run: refRead},
		}},
		MCPWorkload{Name: "glob " + MCPGlob, Impls: []MCPImpl{
			{Name: "capfs mcp glob", Run: mcpGlob},
			{Name: "reference search_files", Peer: true, Run: refGlob},
		}},
	)
}

// call makes one tool call on s and returns its text, failing on a tool error.
func call(b *testing.B, s *mcp.ClientSession, name string, args map[string]any) string {
	if s == nil {
		b.Skip("no reference server")
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Content) == 0 {
		b.Fatalf("%s: empty result", name)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		b.Fatalf("%s: error result %s", name, text.String())
	}
	return text.String()
}

// call makes one capfs tool call.
func (fx *MCPFixture) call(b *testing.B, name string, args map[string]any) string {
	return call(b, fx.proc, name, args)
}

func (fx *MCPFixture) hostPath(rel string) string {
	return filepath.Join(fx.Src, filepath.FromSlash(rel))
}

func mcpList(b *testing.B, fx *MCPFixture, sizes bool) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "list", map[string]any{"path": "src/" + fx.ListDir, "sizes": sizes})
		if i == 0 && strings.Count(out, "\n") != fx.Entries {
			b.Fatalf("capfs list: %d lines, %d entries", strings.Count(out, "\n"), fx.Entries)
		}
	}
}

func refList(b *testing.B, fx *MCPFixture, tool string) {
	for i := 0; i < b.N; i++ {
		out := call(b, fx.ref, tool, map[string]any{"path": fx.hostPath(fx.ListDir)})
		if i == 0 && strings.Count(out, "[DIR]")+strings.Count(out, "[FILE]") != fx.Entries {
			b.Fatalf("reference %s: %d entries shown, %d in the directory:\n%.300s", tool, strings.Count(out, "[DIR]")+strings.Count(out, "[FILE]"), fx.Entries, out)
		}
	}
}

func mcpTree(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "tree", map[string]any{"path": "src/" + fx.TreeDir, "depth": 1000, "head_limit": 1 << 20})
		if i == 0 && strings.Contains(out, "more entries not shown") {
			b.Fatalf("capfs tree was cut: %.300s", out)
		}
	}
}

func refTree(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		call(b, fx.ref, "directory_tree", map[string]any{"path": fx.hostPath(fx.TreeDir)})
	}
}

func refRead(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := call(b, fx.ref, "read_text_file", map[string]any{"path": fx.hostPath(MCPReadPath), "head": MCPReadLines})
		if i == 0 && strings.Count(out, "\n") < MCPReadLines-1 {
			b.Fatalf("reference read: %d lines", strings.Count(out, "\n"))
		}
	}
}

// globCount is how many paths under GlobDir match MCPGlob.
func globCount(b *testing.B, fx *MCPFixture) int {
	n := 0
	err := filepath.WalkDir(fx.hostPath(fx.GlobDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			n++
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func mcpGlob(b *testing.B, fx *MCPFixture) {
	want := globCount(b, fx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "glob", map[string]any{"pattern": MCPGlob, "path": "src/" + fx.GlobDir, "head_limit": 1 << 20})
		if i == 0 && strings.Count(out, "\n") != want {
			b.Fatalf("capfs glob: %d paths, want %d", strings.Count(out, "\n"), want)
		}
	}
}

func refGlob(b *testing.B, fx *MCPFixture) {
	want := globCount(b, fx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := call(b, fx.ref, "search_files", map[string]any{"path": fx.hostPath(fx.GlobDir), "pattern": MCPGlob})
		if i == 0 && strings.Count(out, "\n")+1 != want {
			b.Fatalf("reference search_files: %d paths, want %d", strings.Count(out, "\n")+1, want)
		}
	}
}

// rgPeer runs rg with flag (-n or -l) for MCPPattern in src and checks it
// prints want lines.
func rgPeer(b *testing.B, fx *MCPFixture, flag string, want int) {
	if _, err := exec.LookPath("rg"); err != nil {
		b.Skip("rg is not installed (make sysdeps installs ripgrep)")
	}
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("rg", flag, "--no-messages", MCPPattern, ".")
		cmd.Dir = fx.Src
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		if n := bytes.Count(out, []byte("\n")); err != nil || n != want {
			b.Fatalf("rg %s: %d lines (want %d), %v", flag, n, want, err)
		}
	}
}

// grepLine is a line of grep's content output: path:line:text.
var grepLine = regexp.MustCompile(`(?m)^[^:\n]+:[0-9]+:`)

func mcpGrepContent(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "grep", map[string]any{"pattern": MCPPattern, "output_mode": "content", "head_limit": 1 << 20})
		if i == 0 {
			if n := len(grepLine.FindAllStringIndex(out, -1)); n != fx.Lines {
				b.Fatalf("MCP grep: %d matching lines, grep -rn %d:\n%.2000s", n, fx.Lines, out)
			}
		}
	}
}

func mcpGrepFiles(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "grep", map[string]any{"pattern": MCPPattern, "output_mode": "files_with_matches", "head_limit": 1 << 20})
		if i == 0 {
			n := 0 // one path a line, then notes in parentheses
			for _, l := range strings.Split(out, "\n") {
				if l != "" && !strings.HasPrefix(l, "(") {
					n++
				}
			}
			if n != fx.Files {
				b.Fatalf("MCP grep: %d files, grep -rl %d:\n%.2000s", n, fx.Files, out)
			}
		}
	}
}

func grepPeer(b *testing.B, fx *MCPFixture, flags string, want int) {
	for i := 0; i < b.N; i++ {
		n, err := grepCLI(fx.Src, flags)
		if err != nil || n != want {
			b.Fatalf("grep %s: %d lines (want %d), %v", flags, n, want, err)
		}
	}
}

func mcpRead(b *testing.B, fx *MCPFixture) {
	for i := 0; i < b.N; i++ {
		out := fx.call(b, "read", map[string]any{"path": "src/" + MCPReadPath, "limit": MCPReadLines})
		if i == 0 && strings.Count(out, "\n") < MCPReadLines-1 {
			b.Fatalf("MCP read: %d lines:\n%.500s", strings.Count(out, "\n"), out)
		}
	}
}

// GrepCPU is the CPU time (user and system) of one grep, by implementation:
// the capfs mcp server process's (from /proc/PID/stat around n calls: the
// client's decoding is not counted), and rg's and grep's (their rusage), on
// the same tree and pattern. On a machine shared with other work, CPU time
// moves far less with the load than wall time.
type GrepCPU struct {
	CapfsContent, CapfsFiles time.Duration
	RgN, RgL, GrepN, GrepL   time.Duration
}

// MeasureGrepCPU measures GrepCPU over n runs of each (Linux only: it reads
// /proc; an error elsewhere).
func (fx *MCPFixture) MeasureGrepCPU(n int) (GrepCPU, error) {
	var c GrepCPU
	server := func(mode string) (time.Duration, error) {
		before, err := procCPU(fx.pid)
		if err != nil {
			return 0, err
		}
		for range n {
			res, err := fx.proc.CallTool(context.Background(), &mcp.CallToolParams{Name: "grep",
				Arguments: map[string]any{"pattern": MCPPattern, "output_mode": mode, "head_limit": 1 << 20}})
			if err != nil || res.IsError {
				return 0, fmt.Errorf("capfs mcp grep: %v", err)
			}
		}
		after, err := procCPU(fx.pid)
		return (after - before) / time.Duration(n), err
	}
	peer := func(name string, args ...string) (time.Duration, error) {
		if _, err := exec.LookPath(name); err != nil {
			return 0, nil
		}
		var total time.Duration
		for range n {
			cmd := exec.Command(name, append(args, MCPPattern, ".")...)
			cmd.Dir = fx.Src
			cmd.Env = append(os.Environ(), "LC_ALL=C")
			if err := cmd.Run(); err != nil {
				return 0, fmt.Errorf("%s: %v", name, err)
			}
			total += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		return total / time.Duration(n), nil
	}
	var err error
	if c.CapfsContent, err = server("content"); err != nil {
		return c, err
	}
	if c.CapfsFiles, err = server("files_with_matches"); err != nil {
		return c, err
	}
	if c.RgN, err = peer("rg", "-n", "--no-messages"); err != nil {
		return c, err
	}
	if c.RgL, err = peer("rg", "-l", "--no-messages"); err != nil {
		return c, err
	}
	if c.GrepN, err = peer("grep", "-rnIE"); err != nil {
		return c, err
	}
	c.GrepL, err = peer("grep", "-rlIE")
	return c, err
}

// procCPU is process pid's user and system CPU time so far.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(u+st) * tick, nil
}
