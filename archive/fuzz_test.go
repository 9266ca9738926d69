package archive_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/archive/archivetest"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// FuzzSanitizeName checks the name rules on arbitrary names: an accepted name
// is a clean relative path (ParseGuest agrees, no "..", no "."), within the
// limits, and sanitizing it again gives it back.
func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "./a//b/", "/etc/passwd", "C:\\x", "a\x00b", "caf\u00e9", strings.Repeat("d/", 300), "..", ".", "//h/s", "a/./../b"} {
		f.Add(s, 256)
	}
	f.Fuzz(func(t *testing.T, raw string, depth int) {
		depth = depth % 400
		clean, _, reason := archive.SanitizeName(raw, depth)
		if reason != "" {
			if clean != "" {
				t.Fatalf("refused %q (%s) but returned %q", raw, reason, clean)
			}
			return
		}
		p, err := vfs.ParseGuest(clean)
		if err != nil || p.IsRoot() || p.String() != clean {
			t.Fatalf("%q -> %q: ParseGuest %v %q", raw, clean, err, p.String())
		}
		elems := strings.Split(clean, "/")
		if depth > 0 && len(elems) > depth {
			t.Fatalf("%q -> %q: depth %d > %d", raw, clean, len(elems), depth)
		}
		for _, e := range elems {
			if e == "" || e == "." || e == ".." || len(e) > archive.MaxComponentBytes || strings.ContainsRune(e, '\\') {
				t.Fatalf("%q -> %q: bad component %q", raw, clean, e)
			}
		}
		again, _, r2 := archive.SanitizeName(clean, depth)
		if r2 != "" || again != clean {
			t.Fatalf("not idempotent: %q -> %q -> %q (%s)", raw, clean, again, r2)
		}
	})
}

// FuzzExtract extracts arbitrary bytes (seeded with the whole corpus) into a
// memory root with links allowed: whatever happens, nothing outside the
// destination changes, and a refused archive changes nothing at all.
func FuzzExtract(f *testing.F) {
	for _, c := range archivetest.Corpus() {
		if len(c.Data) < 1<<16 {
			f.Add(c.Data, uint8(1))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		m := memory.New(memory.WithQuota(8 << 20))
		root, _ := dir.New(m)
		root.MkdirAll(bg, "dest/sub")
		root.WriteFile(bg, "dest/existing.txt", []byte("old"), 0o644)
		root.WriteFile(bg, "outside", []byte("keep"), 0o644)
		before := snapshot(t, root)
		opts := archive.Options{
			Limits:    archive.Limits{MaxExtractedBytes: 4 << 20, MaxEntries: 2000, MaxArchiveBytes: 16 << 20},
			Overwrite: flags&2 != 0,
			Strict:    flags&4 != 0,
		}
		if flags&1 != 0 {
			opts.Links = archive.LinksInside
		}
		res, err := archive.ExtractToDir(bg, root, bytes.NewReader(data), int64(len(data)), "dest", opts)
		after := snapshot(t, root)
		if !maps.Equal(without(before, "dest"), without(after, "dest")) {
			t.Fatalf("outside changed: %v -> %v", before, after)
		}
		if err != nil && (res == nil || !res.Merged) && !maps.Equal(before, after) {
			t.Fatalf("refused archive (%v) changed the destination", err)
		}
		if err == nil {
			for _, it := range res.Extracted {
				if _, _, r := archive.SanitizeName(it.Path, 0); r != "" {
					t.Fatalf("extracted unsanitary %q", it.Path)
				}
			}
		}
	})
}

// FuzzZipZstd extracts a one-entry zip whose Zstandard data is mutated (a byte
// changed, bytes or a skippable frame appended): either the entry is refused
// as corrupt, or what is extracted is exactly the original content (and no
// skippable frame was in the data).
func FuzzZipZstd(f *testing.F) {
	f.Add([]byte("hello, world"), uint16(0), byte(0), []byte(nil))
	f.Add(bytes.Repeat([]byte("ab"), 5000), uint16(7), byte(1), []byte("x"))
	f.Add([]byte("hello"), uint16(0), byte(0), archivetest.SkippableFrame("hidden"))
	f.Fuzz(func(t *testing.T, body []byte, at uint16, xor byte, tail []byte) {
		data := archivetest.RawZip([]archivetest.RawLocal{{Name: "a", Data: body, Zstd: true, Trailing: tail}},
			[]archivetest.RawZipEnt{{Name: "a", DeclaredSize: -1}})
		data = bytes.Clone(data)
		if n := len(data) - 31 - 22 - 47; n > 0 { // the compressed bytes, between the headers
			data[31+int(at)%n] ^= xor
		}
		m := memory.New(memory.WithQuota(8 << 20))
		root, _ := dir.New(m)
		root.MkdirAll(bg, "dest")
		_, err := archive.ExtractToDir(bg, root, bytes.NewReader(data), int64(len(data)), "dest",
			archive.Options{Limits: archive.Limits{MaxExtractedBytes: 4 << 20}})
		if err != nil {
			if !errors.Is(err, archive.ErrCorrupt) && !errors.Is(err, archive.ErrLimit) {
				t.Fatalf("refused with %v, want corrupt or limit", err)
			}
			return
		}
		if len(tail) >= 4 && binary.LittleEndian.Uint32(tail)&^0xf == 0x184d2a50 {
			t.Fatalf("a skippable frame after the zstd data (%q) was accepted", tail)
		}
		got, rerr := root.ReadFile(bg, "dest/a")
		if rerr != nil || !bytes.Equal(got, body) {
			t.Fatalf("extracted %d bytes (%v), not the %d compressed", len(got), rerr, len(body))
		}
	})
}
