//go:build linux

package materialize

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseGitCache: a history scan cache file is an outside file. Whatever
// it holds, parsing does not panic, and a file it accepts is exactly the
// encoding of what it returns (no two files mean the same history), with
// sorted, distinct, non-empty paths.
func FuzzParseGitCache(f *testing.F) {
	var fp [32]byte
	fp[0], fp[31] = 0xab, 0x01
	for _, h := range []*GitHistory{
		{Complete: true},
		{Paths: []string{".env", "a/b.go", "z"}, Trees: 3, Complete: true},
		{Paths: []string{"a"}, Trees: 9, Complete: true, Unnamed: []string{"objects/ab/cdef"}, UnnamedPacked: 2},
		{Paths: []string{"a", "b"}, Trees: 100},
	} {
		good := encodeGitCache(fp, 100, h)
		f.Add(good)
		f.Add(good[:len(good)-1])
		f.Add(append(bytes.Clone(good), 0))
		f.Add(bytes.Replace(good, []byte("complete 1"), []byte("complete 2"), 1))
		f.Add(bytes.Replace(good, []byte("paths "), []byte("paths 0"), 1))
		f.Add(bytes.Replace(good, []byte("trees "), []byte("trees  "), 1))
		f.Add(bytes.ToUpper(good))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, budget, ok := parseGitCache(bufio.NewReader(bytes.NewReader(data)), fp)
		if !ok {
			return
		}
		if again := encodeGitCache(fp, budget, h); !bytes.Equal(again, data) {
			t.Fatalf("accepted a file that is not the encoding of what it read:\n%q\nre-encoded:\n%q", data, again)
		}
		for i, p := range h.Paths {
			if p == "" || (i > 0 && h.Paths[i-1] >= p) {
				t.Fatalf("paths %q", h.Paths)
			}
		}
	})
}

// TestGitFingerprintRefusesBorrowedObjects: a git directory, or one of its
// modules, that borrows objects (alternates, a commondir) or holds a symlink
// beneath objects/ cannot be fingerprinted, so its scan is never cached.
func TestGitFingerprintRefusesBorrowedObjects(t *testing.T) {
	for name, files := range map[string][]string{
		"alternates":        {"objects/info/alternates"},
		"commondir":         {"commondir"},
		"module alternates": {"modules/m/objects/info/alternates"},
		"module commondir":  {"modules/m/commondir"},
	} {
		gitdir := t.TempDir()
		for _, f := range files {
			p := filepath.Join(gitdir, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("/elsewhere\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := gitFingerprint(gitdir); err == nil {
			t.Errorf("%s: fingerprinted", name)
		}
	}
	gitdir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(gitdir, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gitFingerprint(gitdir); err != nil {
		t.Fatalf("a plain objects/: %v", err)
	}
	if err := os.Symlink("/etc", filepath.Join(gitdir, "objects", "ab")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gitFingerprint(gitdir); err == nil {
		t.Error("a symlink beneath objects/: fingerprinted")
	}
}
