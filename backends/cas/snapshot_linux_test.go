package cas

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

type hostSourceForTest struct{}

// check lists host through the host walker after one of its directories was
// swapped for a link to outside: the listing fails instead of following it.
func (hostSourceForTest) check(t *testing.T, host, outside string) error {
	os.Mkdir(filepath.Join(host, "sub"), 0o755)
	fd, err := os.Open(host)
	if err != nil {
		return err
	}
	defer fd.Close()
	h := &hostSource{root: int(fd.Fd())}
	os.Remove(filepath.Join(host, "sub"))
	os.Symlink(outside, filepath.Join(host, "sub"))
	if _, err := h.list(bg, "sub"); err == nil {
		t.Error("listing a directory swapped for a link followed it")
	}
	if _, err := h.open(bg, "sub/secret"); err == nil {
		t.Error("opening through a swapped link followed it")
	}
	if _, err := h.open(bg, "l"); err == nil {
		t.Error("opening a symlink as a file followed it")
	}
	return nil
}

func mkfifo(t *testing.T, p string) {
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}
