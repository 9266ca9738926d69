package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capfs/capfs/fuseexport"
)

// syncBuffer is a bytes.Buffer safe for the command's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func mountedAt(mp string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == mp {
			return true
		}
	}
	return false
}

// TestMountCommand: capfs mount serves the namespace (here --work of a
// read-write host directory next to a read-only one), the policy hides
// secrets, read-only mounts refuse writes, and cancelling the command (what
// SIGINT does) unmounts and returns 0.
func TestMountCommand(t *testing.T) {
	if err := fuseexport.Available(); err != nil {
		t.Skipf("FUSE is not usable here (needs /dev/fuse and root or fusermount3; make sysdeps installs fuse3): %v", err)
	}
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, ".env"), []byte("SECRET=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mp := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"-m", "w=physical:" + host, "-m", "w/ro=memory:,ro", "--audit", filepath.Join(t.TempDir(), "audit.jsonl"),
			"mount", "--work", "w", mp}, strings.NewReader(""), &syncBuffer{}, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !mountedAt(mp) {
		select {
		case code := <-done:
			t.Fatalf("capfs mount exited %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not appear: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "main.go")); err != nil || string(b) != "package main\n" {
		t.Errorf("main.go: %q, %v", b, err)
	}
	if _, err := os.ReadFile(filepath.Join(mp, ".env")); !os.IsNotExist(err) {
		t.Errorf(".env through the mount: %v; want not found", err)
	}
	if err := os.WriteFile(filepath.Join(mp, "new.go"), []byte("x"), 0o644); err != nil {
		t.Errorf("write in the read-write mount: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mp, "ro/x"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write in the read-only mount: %v; want EROFS", err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "new.go")); string(b) != "x" {
		t.Errorf("host new.go = %q", b)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("capfs mount exited %d after the interrupt: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("capfs mount did not exit after the interrupt")
	}
	if mountedAt(mp) {
		t.Errorf("%s still mounted after the interrupt", mp)
	}
}
