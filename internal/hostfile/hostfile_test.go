//go:build unix

package hostfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, st, err := ReadRegular(small, 3); err != nil || string(b) != "abc" || st.Size() != 3 {
		t.Fatalf("ReadRegular(small, 3) = %q, %v, %v", b, st, err)
	}
	if _, _, err := ReadRegular(small, 2); err == nil {
		t.Error("a file past the bound was read")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		if _, _, err := ReadRegular(fifo, 10); !errors.Is(err, ErrNotRegular) {
			t.Errorf("FIFO: %v, want ErrNotRegular", err)
		}
	}
	if _, _, err := ReadRegular("/dev/zero", 10); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: %v, want ErrNotRegular", err)
	}
}
