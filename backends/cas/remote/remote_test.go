package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capfs/capfs/backends/cas"
)

var bg = context.Background()

// bazelRemoteBin builds bazel-remote v2.6.2 from the tools module once and
// returns its path, or skips the test saying why it cannot.
var buildOnce struct {
	sync.Once
	path string
	err  error
}

func bazelRemoteBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		tools, err := filepath.Abs("../../../tools")
		if err != nil {
			buildOnce.err = err
			return
		}
		bin := filepath.Join(os.TempDir(), "capfs-bazel-remote-v2.6.2")
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
			buildOnce.path = bin
			return
		}
		tmp := bin + fmt.Sprintf(".%d", os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/buchgr/bazel-remote/v2")
		cmd.Dir = tools
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build bazel-remote in %s: %v: %s", tools, err, bytes.TrimSpace(out))
			return
		}
		buildOnce.err = os.Rename(tmp, bin)
		buildOnce.path = bin
	})
	if buildOnce.err != nil {
		t.Skipf("bazel-remote v2.6.2 (tools/go.mod) cannot be built here, so the REAPI integration tests do not run: %v", buildOnce.err)
	}
	return buildOnce.path
}

// server is a bazel-remote process the test started.
type server struct {
	t          *testing.T
	bin, dir   string
	grpc, http string
	mu         sync.Mutex
	cmd        *exec.Cmd
}

// freePorts returns n loopback addresses free now, all different: each
// listener stays open until all are taken, so the kernel cannot hand the
// same port out twice (bazel-remote refuses one port for gRPC and HTTP).
func freePorts(t *testing.T, n int) []string {
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
}

func startServer(t *testing.T) *server {
	ports := freePorts(t, 2)
	s := &server{t: t, bin: bazelRemoteBin(t), dir: t.TempDir(), grpc: ports[0], http: ports[1]}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, "--dir", s.dir, "--max_size", "1", "--grpc_address", s.grpc, "--http_address", s.http)
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start bazel-remote: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.grpc, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("bazel-remote did not listen on %s: %s", s.grpc, logb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

func newStore(t *testing.T) *cas.Store {
	st, err := cas.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sampleTree writes a tree with every kind of blob the transfer paths treat
// differently and snapshots it into st.
func sampleTree(t *testing.T, st *cas.Store, seed uint64) cas.Digest {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(seed, 2))
	write := func(name string, b []byte, perm os.FileMode) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, perm); err != nil {
			t.Fatal(err)
		}
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for i := range 40 {
		write(fmt.Sprintf("src/p%d/f%d.txt", i%5, i), []byte(strings.Repeat(fmt.Sprintf("line %d %d\n", seed, i), 50+i)), 0o644)
	}
	write("empty", nil, 0o644)
	write("bin/tool", []byte("#!/bin/sh\necho hi\n"), 0o755)
	// Over the 4 MiB batch limit: ByteStream, zstd-compressed on the wire.
	write("big/text", bytes.Repeat([]byte(fmt.Sprintf("compressible %d ", seed)), 300_000), 0o644)
	write("big/random", random(4<<20+8192), 0o644)
	os.MkdirAll(filepath.Join(dir, "emptydir"), 0o755)
	os.Symlink("bin/tool", filepath.Join(dir, "link"))
	d, err := st.SnapshotHost(bg, dir, cas.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func dial(t *testing.T, s *server, opts Options) *Client {
	c, err := Dial(s.grpc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRoundTripThroughBazelRemote(t *testing.T) {
	srv := startServer(t)
	a := newStore(t)
	root := sampleTree(t, a, 1)
	c := dial(t, srv, Options{})
	ts, err := c.Upload(bg, a, root)
	if err != nil {
		t.Fatal(err)
	}
	// Servers always hold the empty blob (here both the empty file and the
	// empty directory).
	if ts.Missing != ts.Blobs-1 || ts.Streams != 2 || !c.zstd {
		t.Errorf("first upload: %+v (zstd %v): want every blob but the empty one missing, 2 through ByteStream, zstd advertised", ts, c.zstd)
	}
	if ts, err = c.Upload(bg, a, root); err != nil || ts.Missing != 0 {
		t.Fatalf("second upload: %+v, %v: want nothing missing", ts, err)
	}
	if _, err := c.SaveRoot(bg, a, "snap", root); err != nil {
		t.Fatal(err)
	}
	// Another machine: a new client and an empty store fetch it by name.
	c2 := dial(t, srv, Options{})
	got, err := c2.FetchRoot(bg, "snap")
	if err != nil || got != root {
		t.Fatalf("FetchRoot = %s, %v; want %s", got, err, root)
	}
	b := newStore(t)
	ds, err := c2.Download(bg, b, got)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.VerifyTree(bg, got); err != nil {
		t.Fatalf("downloaded tree: %v", err)
	}
	if ds.Streams != 2 || ds.TreeDirs == 0 {
		t.Errorf("download stats %+v: want the 2 large blobs streamed and the directories from GetTree", ds)
	}
	// Same bytes: materialize both and snapshot each checkout again.
	for _, st := range []*cas.Store{a, b} {
		out := filepath.Join(t.TempDir(), "m")
		if _, err := st.Materialize(bg, got, out, cas.MaterializeOptions{}); err != nil {
			t.Fatal(err)
		}
		if again, err := newStore(t).SnapshotHost(bg, out, cas.SnapshotOptions{}); err != nil || again != root {
			t.Fatalf("checkout snapshots to %s, %v", again, err)
		}
	}
	if _, err := c2.FetchRoot(bg, "nosuch"); !errors.Is(err, ErrNoRoot) {
		t.Errorf("FetchRoot of an unknown name: %v", err)
	}
}

// TestEviction: a server that lost blobs makes Download fail with ErrMissing,
// and SaveRoot (Upload) sends them again.
func TestEviction(t *testing.T) {
	srv := startServer(t)
	a := newStore(t)
	root := sampleTree(t, a, 2)
	c := dial(t, srv, Options{})
	if _, err := c.SaveRoot(bg, a, "s", root); err != nil {
		t.Fatal(err)
	}
	// Evict every file blob the server keeps for "big/text" (its name holds the hash).
	m, _ := a.Mount(bg, root, time.Time{})
	info, err := m.Stat(bg, mustPath("big/text"))
	if err != nil {
		t.Fatal(err)
	}
	victim := info.Sys.(*cas.Entry).Digest
	removed := 0
	filepath.Walk(srv.dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.Contains(filepath.Base(p), victim.Hex()) {
			if os.Remove(p) == nil {
				removed++
			}
		}
		return nil
	})
	if removed == 0 {
		t.Skip("cannot find bazel-remote's file for the blob to evict it")
	}
	// bazel-remote keeps an index in memory: restart it on the same directory.
	srv.kill()
	srv.start()
	_, err = c.Download(bg, newStore(t), root)
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("download of an evicted blob: %v, want ErrMissing", err)
	}
	ts, err := c.SaveRoot(bg, a, "s", root)
	if err != nil || ts.Missing != 1 {
		t.Fatalf("re-save: %+v, %v: want exactly the evicted blob re-uploaded", ts, err)
	}
	if _, err := c.Download(bg, newStore(t), root); err != nil {
		t.Fatalf("download after the re-upload: %v", err)
	}
}

// TestKillServerMidUpload kills bazel-remote after a few blobs of an upload
// and starts it again: the upload retries and completes, and the tree can be
// fetched whole.
func TestKillServerMidUpload(t *testing.T) {
	srv := startServer(t)
	a := newStore(t)
	root := sampleTree(t, a, 3)
	var n atomic.Int32
	var restarted sync.WaitGroup
	c := dial(t, srv, Options{Concurrency: 1, MaxBackoff: 500 * time.Millisecond, Retries: 20, OnBlob: func(cas.Digest) {
		if n.Add(1) == 3 {
			srv.kill()
			restarted.Go(func() {
				time.Sleep(300 * time.Millisecond)
				srv.start()
			})
		}
	}})
	ts, err := c.Upload(bg, a, root)
	restarted.Wait()
	if err != nil {
		t.Fatalf("upload across a server restart: %v", err)
	}
	if n.Load() <= 3 {
		t.Fatalf("the server was not killed mid-upload (%d blobs sent)", n.Load())
	}
	if _, err := c.Download(bg, newStore(t), root); err != nil {
		t.Fatalf("download after the interrupted upload: %v (%+v)", err, ts)
	}
}

// TestMismatchIsNotRetried sends bytes under another digest: bazel-remote
// answers INTERNAL (the specification says INVALID_ARGUMENT); both are a
// mismatch, returned at once.
func TestMismatchIsNotRetried(t *testing.T) {
	srv := startServer(t)
	c := dial(t, srv, Options{})
	if err := c.capabilities(bg); err != nil {
		t.Fatal(err)
	}
	d := cas.DigestOf([]byte("the real bytes"))
	start := time.Now()
	err := c.batchUploadData(bg, map[cas.Digest][]byte{d: []byte("other bytes!!!")})
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("upload of wrong bytes: %v, want ErrMismatch", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a mismatch took %s: retried?", time.Since(start))
	}
}

func TestRetryClassification(t *testing.T) {
	for code, want := range map[codes.Code]bool{
		codes.Unavailable: true, codes.ResourceExhausted: true, codes.Aborted: true, codes.DeadlineExceeded: true,
		codes.InvalidArgument: false, codes.Internal: false, codes.NotFound: false, codes.PermissionDenied: false,
	} {
		if got := retryable(status.Error(code, "x")); got != want {
			t.Errorf("%s retryable = %v", code, got)
		}
	}
	for _, code := range []codes.Code{codes.InvalidArgument, codes.Internal} {
		if !mismatch(status.Error(code, "x")) {
			t.Errorf("%s is not a mismatch", code)
		}
	}
	c := &Client{opts: Options{Retries: 3, MaxBackoff: time.Millisecond}}
	calls := 0
	err := c.retry(bg, func(context.Context) error { calls++; return status.Error(codes.Unavailable, "down") })
	if calls != 4 || status.Code(err) != codes.Unavailable {
		t.Errorf("retry: %d calls, %v", calls, err)
	}
	calls = 0
	c.retry(bg, func(context.Context) error { calls++; return status.Error(codes.Internal, "mismatch") })
	if calls != 1 {
		t.Errorf("a non-retryable error was tried %d times", calls)
	}
}
