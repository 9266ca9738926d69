package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// casBazelRemote builds bazel-remote v2.6.2 from the tools module once (the
// binary is shared with backends/cas/remote's tests) and returns its path, or
// skips the test saying why it cannot.
var casBazelRemote struct {
	sync.Once
	path string
	err  error
}

func bazelRemoteForCLI(t *testing.T) string {
	t.Helper()
	casBazelRemote.Do(func() {
		bin := filepath.Join(os.TempDir(), "capfs-bazel-remote-v2.6.2")
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
			casBazelRemote.path = bin
			return
		}
		tools, err := filepath.Abs("../../tools")
		if err != nil {
			casBazelRemote.err = err
			return
		}
		tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/buchgr/bazel-remote/v2")
		cmd.Dir = tools
		if out, err := cmd.CombinedOutput(); err != nil {
			casBazelRemote.err = fmt.Errorf("go build bazel-remote in %s: %v: %s", tools, err, bytes.TrimSpace(out))
			return
		}
		casBazelRemote.err = os.Rename(tmp, bin)
		casBazelRemote.path = bin
	})
	if casBazelRemote.err != nil {
		t.Skipf("bazel-remote v2.6.2 (tools/go.mod) cannot be built here, so capfs cas push/pull is not tested against a server: %v", casBazelRemote.err)
	}
	return casBazelRemote.path
}

func casFreePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startBazelRemote starts a bazel-remote on a fresh directory and returns its
// gRPC address and a function that kills it (also run at cleanup).
func startBazelRemote(t *testing.T) (string, func()) {
	bin := bazelRemoteForCLI(t)
	addr := casFreePort(t)
	cmd := exec.Command(bin, "--dir", t.TempDir(), "--max_size", "1", "--grpc_address", addr, "--http_address", casFreePort(t))
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bazel-remote: %v", err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) }
	t.Cleanup(kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr, kill
		}
		if time.Now().After(deadline) {
			t.Fatalf("bazel-remote did not listen on %s: %s", addr, logb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCASPushPullRemote drives capfs cas push and pull through the binary
// against bazel-remote: a snapshot pushed from one store is pulled by name into
// an empty one and by digest into another, mounted from there, and equal; a
// second push sends nothing; errors exit as documented.
func TestCASPushPullRemote(t *testing.T) {
	addr, kill := startBazelRemote(t)
	proj := t.TempDir()
	files := map[string]string{"a.txt": "hello\n", "src/main.go": "package main\n", "big.bin": strings.Repeat("0123456789abcdef", 1<<16)}
	writeTree(t, proj, files)
	os.Symlink("a.txt", filepath.Join(proj, "link"))
	storeA, storeB, storeC := t.TempDir(), t.TempDir(), t.TempDir()

	r := runCapfs(t, proj, "-m", "p=physical:"+proj, "cas", "--store="+storeA, "snapshot", "save", "v1", "p").want(t, 0)
	f := strings.Fields(r.stdout)
	if len(f) != 2 || f[0] != "v1" {
		t.Fatalf("save printed %q", r.stdout)
	}
	digest := f[1]

	r = runCapfs(t, proj, "cas", "--store="+storeA, "push", "v1", "--remote", addr).want(t, 0)
	if !strings.HasPrefix(r.stdout, "v1 "+digest+": ") || strings.Contains(r.stdout, " 0 missing") {
		t.Fatalf("first push printed %q", r.stdout)
	}
	r = runCapfs(t, proj, "cas", "--store="+storeA, "push", "v1", "--remote", "grpc://"+addr).want(t, 0)
	if !strings.Contains(r.stdout, " 0 missing on the server uploaded (0 bytes)") {
		t.Fatalf("second push sent something: %q", r.stdout)
	}

	// By name into an empty store: the name is saved there, so cas:v1 mounts.
	r = runCapfsEnv(t, proj, []string{"CAPFS_CAS_REMOTE=" + addr}, "cas", "--store="+storeB, "pull", "v1").want(t, 0)
	if !strings.HasPrefix(r.stdout, "v1 "+digest+": ") {
		t.Fatalf("pull printed %q", r.stdout)
	}
	r = runCapfs(t, proj, "-m", "s=cas:v1,store="+storeB, "cat", "s/src/main.go").want(t, 0)
	if r.stdout != files["src/main.go"] {
		t.Fatalf("cat after pull = %q", r.stdout)
	}
	r = runCapfs(t, proj, "-m", "s=cas:v1,store="+storeB, "cat", "s/link").want(t, 0)
	if r.stdout != "hello\n" {
		t.Fatalf("cat through the pulled link = %q", r.stdout)
	}
	r = runCapfs(t, proj, "-m", "s=cas:v1,store="+storeB, "cas", "--store="+storeB, "snapshot", "save", "again", "s").want(t, 0)
	if got := strings.Fields(r.stdout)[1]; got != digest {
		t.Fatalf("the pulled tree snapshots to %s, want %s", got, digest)
	}
	runCapfs(t, proj, "cas", "--store="+storeB, "verify").want(t, 0)
	// A second pull fetches nothing.
	r = runCapfs(t, proj, "cas", "--store="+storeB, "pull", "v1", "--remote", addr).want(t, 0)
	if !strings.Contains(r.stdout, " 0 fetched") {
		t.Fatalf("second pull fetched something: %q", r.stdout)
	}

	// By digest into another store, named there with --as; and pushed by digest
	// under another name on the server, which a pull by that name finds.
	runCapfs(t, proj, "cas", "--store="+storeC, "pull", digest, "--as", "fromdigest", "--remote", addr).want(t, 0)
	r = runCapfs(t, proj, "-m", "s=cas:fromdigest,store="+storeC, "cat", "s/big.bin").want(t, 0)
	if r.stdout != files["big.bin"] {
		t.Fatalf("big.bin after a pull by digest: %d bytes", len(r.stdout))
	}
	runCapfs(t, proj, "cas", "--store="+storeA, "push", digest, "--as", "other", "--remote", addr).want(t, 0)
	r = runCapfs(t, proj, "cas", "--store="+t.TempDir(), "pull", "other", "--remote", addr).want(t, 0)
	if !strings.HasPrefix(r.stdout, "other "+digest+": ") {
		t.Fatalf("pull of the name given with --as: %q", r.stdout)
	}
	runCapfs(t, proj, "cas", "--store="+storeA, "push", "v1", "--as", "-bad", "--remote", addr).want(t, 2)

	// --max-download: a tree over it is refused before its files arrive, and
	// the name is not saved; a bad size is a usage error.
	storeD := t.TempDir()
	r = runCapfs(t, proj, "cas", "--store="+storeD, "pull", "v1", "--max-download", "64KiB", "--remote", addr).want(t, 1)
	if !strings.Contains(r.stderr, "quota_exceeded") {
		t.Errorf("pull over --max-download: %q", r.stderr)
	}
	if r := runCapfs(t, proj, "-m", "s=cas:v1,store="+storeD, "cat", "s/a.txt"); r.code == 0 {
		t.Errorf("a refused pull saved its name: cat printed %q", r.stdout)
	}
	runCapfs(t, proj, "cas", "--store="+storeD, "verify").want(t, 0)
	runCapfs(t, proj, "cas", "--store="+storeD, "pull", "v1", "--max-download", "lots", "--remote", addr).want(t, 2)

	// Errors: unknown names exit 1, bad arguments 2, no server 1.
	r = runCapfs(t, proj, "cas", "--store="+storeC, "pull", "nosuch", "--remote", addr).want(t, 1)
	if !strings.Contains(r.stderr, "no snapshot named nosuch") {
		t.Errorf("pull of an unknown name: %q", r.stderr)
	}
	runCapfs(t, proj, "cas", "--store="+storeC, "push", "nosuch", "--remote", addr).want(t, 1)
	runCapfs(t, proj, "cas", "--store="+storeC, "push", "../bad", "--remote", addr).want(t, 2)
	runCapfsEnv(t, proj, []string{"CAPFS_CAS_REMOTE="}, "cas", "--store="+storeA, "push", "v1").want(t, 2)
	kill()
	r = runCapfs(t, proj, "cas", "--store="+storeA, "push", "v1", "--remote", addr).want(t, 1)
	if !strings.Contains(r.stderr, "remote") {
		t.Errorf("push to a dead server: %q", r.stderr)
	}
}

// TestCASNoGRPCInLibraries: gRPC stays out of every library package's import
// graph; only backends/cas/remote (and the capfs command, bench and examples)
// may pull it in.
func TestCASNoGRPCInLibraries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH, so the import graph cannot be listed")
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/capfs/capfs/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(pkg, "github.com/capfs/capfs")
		if strings.HasPrefix(rel, "/cmd/") || strings.HasPrefix(rel, "/bench") || strings.HasPrefix(rel, "/examples/") ||
			rel == "/backends/cas/remote" {
			continue
		}
		checked++
		if strings.Contains(" "+deps+" ", " google.golang.org/grpc ") {
			t.Errorf("%s imports gRPC", pkg)
		}
	}
	if checked < 5 {
		t.Fatalf("only %d library packages listed", checked)
	}
}
