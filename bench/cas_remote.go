package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/backends/cas/remote"
)

// BazelRemote is a bazel-remote v2.6.2 process (built from tools/go.mod) the
// bench started on a fresh directory.
type BazelRemote struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
}

var bazelRemoteBuild struct {
	sync.Once
	bin string
	err error
}

// bazelRemoteBin builds bazel-remote once per process.
func bazelRemoteBin() (string, error) {
	bazelRemoteBuild.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			bazelRemoteBuild.err = err
			return
		}
		tools := filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "tools")
		bin := filepath.Join(os.TempDir(), "capfs-bazel-remote-v2.6.2")
		if _, err := os.Stat(bin); err == nil {
			bazelRemoteBuild.bin = bin
			return
		}
		tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/buchgr/bazel-remote/v2")
		cmd.Dir = tools
		if out, err := cmd.CombinedOutput(); err != nil {
			bazelRemoteBuild.err = fmt.Errorf("build bazel-remote in %s: %v: %s", tools, err, out)
			return
		}
		bazelRemoteBuild.err = os.Rename(tmp, bin)
		bazelRemoteBuild.bin = bin
	})
	return bazelRemoteBuild.bin, bazelRemoteBuild.err
}

// StartBazelRemote starts bazel-remote on a new directory under base.
func StartBazelRemote(base string) (*BazelRemote, error) {
	bin, err := bazelRemoteBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "bazel-remote-")
	if err != nil {
		return nil, err
	}
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ""
		}
		defer l.Close()
		return l.Addr().String()
	}
	r := &BazelRemote{Addr: port(), dir: dir}
	r.cmd = exec.Command(bin, "--dir", dir, "--max_size", "4", "--grpc_address", r.Addr, "--http_address", port())
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", r.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return r, nil
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("bazel-remote did not listen on %s", r.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server and removes its directory.
func (r *BazelRemote) Stop() {
	r.cmd.Process.Kill()
	r.cmd.Wait()
	os.RemoveAll(r.dir)
}

// CASUpload uploads the fixture's tree into a fresh bazel-remote per iteration
// (the server's start and stop untimed).
func CASUpload(b *testing.B, fx *CASFixture) {
	for b.Loop() {
		b.StopTimer()
		srv, err := StartBazelRemote(fx.Base)
		if err != nil {
			b.Fatal(err)
		}
		c, err := remote.Dial(srv.Addr, remote.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ts, err := c.Upload(context.Background(), fx.Store, fx.Root)
		b.StopTimer()
		c.Close()
		srv.Stop()
		if err != nil || ts.Missing < ts.Blobs-1 {
			b.Fatalf("upload: %+v, %v", ts, err)
		}
		b.StartTimer()
	}
}

// CASDownload downloads the fixture's tree from a bazel-remote holding it into a
// fresh, empty store per iteration.
func CASDownload(b *testing.B, fx *CASFixture) {
	srv, err := StartBazelRemote(fx.Base)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	c, err := remote.Dial(srv.Addr, remote.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Upload(ctx, fx.Store, fx.Root); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		d := tempIn(b, fx, "dl-")
		st, err := cas.OpenStore(d)
		if err != nil {
			b.Fatal(err)
		}
		ts, err := c.Download(ctx, st, fx.Root)
		if err != nil {
			b.Fatalf("download: %+v, %v", ts, err)
		}
		st.Close()
		removeUntimed(b, d)
	}
}
