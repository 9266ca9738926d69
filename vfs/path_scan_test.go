package vfs

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// checkCleanWords checks cleanWords against scanBytes on s: it may only say clean
// when scanBytes does, and it must say so for every clean path it is meant to
// recognize (no segment starting with "." and none longer than 247 bytes).
func checkCleanWords(t *testing.T, s string) {
	t.Helper()
	if s == "" {
		return
	}
	fast, slow := cleanWords(s), scanBytes(s)
	if fast && slow != scanClean {
		t.Fatalf("cleanWords(%q) = true, scanBytes = %d", s, slow)
	}
	if slow != scanClean {
		return
	}
	for _, seg := range strings.Split(s, "/") {
		if strings.HasPrefix(seg, ".") || len(seg) > MaxNameLen-8 {
			return
		}
	}
	if !fast {
		t.Fatalf("cleanWords(%q) = false for a clean path", s)
	}
}

// TestCleanWords checks the word-at-a-time scan on crafted and random paths:
// every byte class at every offset within a word and across word boundaries,
// segment lengths around MaxNameLen, and tails of every length.
func TestCleanWords(t *testing.T) {
	for _, s := range []string{
		"a", "a/b", "files/f00001", "d00/d01/d02/d03/d04/d05/d06/d07/d08/d09/d10/d11/d12/d13/d14/d15/leaf",
		"/", "/a", "a/", "a//b", "abcdefg//hijk", "abcdefgh/", "abcdefg/", "./a", "a/.", "a/..", "..",
		".git/config", "a/.b", "abcdefg/.hidden", "a.b/c.d", "a..b", "...", "a/.../b",
		"a\x00b", "abcdefgh\\", "abcdefghijklmno\x00", strings.Repeat("n", 255), strings.Repeat("n", 256),
		"a/" + strings.Repeat("n", 255), "a/" + strings.Repeat("n", 256) + "/b", strings.Repeat("n", 247) + "/x",
		strings.Repeat("abc/", 1000) + "z",
	} {
		checkCleanWords(t, s)
	}
	// Every special byte at every position of paths of 1 to 24 bytes.
	for n := 1; n <= 24; n++ {
		for i := 0; i < n; i++ {
			for _, c := range []byte{'/', '.', 0, '\\', 'x', 0x80, 0xff, '/' ^ 0x80, '.' + 1} {
				b := []byte(strings.Repeat("q", n))
				b[i] = c
				checkCleanWords(t, string(b))
				if i+1 < n {
					b[i+1] = c
					checkCleanWords(t, string(b))
				}
			}
		}
	}
	// Segment lengths around the limit, at every alignment.
	for pre := 0; pre < 9; pre++ {
		for l := MaxNameLen - 10; l <= MaxNameLen+2; l++ {
			s := strings.Repeat("p/", pre) + strings.Repeat("n", l)
			checkCleanWords(t, s)
			checkCleanWords(t, s+"/x")
		}
	}
	// Random paths over a small alphabet rich in separators and dots.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab/./..//\\\x00cd")
	for range 200_000 {
		b := make([]byte, 1+r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		checkCleanWords(t, string(b))
	}
}

// FuzzCleanWords is TestCleanWords' property on any input.
func FuzzCleanWords(f *testing.F) {
	f.Add("files/f00001")
	f.Add("a//b/./c")
	f.Add(strings.Repeat("n", 250) + "/x")
	f.Fuzz(func(t *testing.T, s string) { checkCleanWords(t, s) })
}
