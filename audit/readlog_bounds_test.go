package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdBomb returns zstd frames that decompress to n MiB of blank lines (each
// just under the longest line a log may have), between the events of before
// and after: a small file that reads as a valid log of no end.
func zstdBomb(t *testing.T, before, after string, n int) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	out := enc.EncodeAll([]byte(before), nil)
	blank := enc.EncodeAll([]byte(strings.Repeat(" ", 1<<20-1)+"\n"), nil)
	out = append(out, bytes.Repeat(blank, n)...)
	return enc.EncodeAll([]byte(after), out)
}

// TestScanLogBoundsZstdBomb: a rotated file that decompresses past its bound
// (here 20 MiB of blank lines from a file of a few KiB, past a 16 MiB
// bound; the default bound, 256 MiB, is the same code with another number)
// is read to the bound only: its events before it are read, the bound is reported as
// ErrTooLarge for that file, and the scan goes on to the next file. Before
// the bound, ScanLog decompressed the whole file and reported nothing.
func TestScanLogBoundsZstdBomb(t *testing.T) {
	d := t.TempDir()
	path := filepath.Join(d, "audit.jsonl")
	line := func(id string) string {
		return `{"time":"2026-11-28T10:45:00Z","request_id":"` + id + `","op":"read","path":"a","outcome":"ok"}` + "\n"
	}
	bomb := zstdBomb(t, line("before"), line("after"), 20)
	if err := os.WriteFile(filepath.Join(d, "audit-2026-11-28T10-45-00.000.jsonl.zst"), bomb, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(line("current")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []ReadOption
	}{
		{"MaxDecompressed", []ReadOption{MaxDecompressed(16 << 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			var bads []error
			err := ScanLog(path, func(e Event) error {
				ids = append(ids, e.RequestID)
				return nil
			}, func(_ string, err error) error {
				bads = append(bads, err)
				return nil
			}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(ids, " ") != "before current" {
				t.Errorf("events read: %q, want before and current", ids)
			}
			if len(bads) != 1 || !errors.Is(bads[0], ErrTooLarge) {
				t.Errorf("reported: %v, want one ErrTooLarge", bads)
			}
		})
	}
}
