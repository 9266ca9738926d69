package cas

import (
	"bytes"
	"errors"
	"testing"
)

// goldenTree builds the example tree: a (empty), bar = "hello" (0644),
// empty/, foo/baz = "#!/bin/sh\n" (0755), link -> foo/baz.
func goldenTree(t testing.TB) (root, foo *Directory) {
	t.Helper()
	empty := &Directory{}
	ed, err := empty.Digest()
	if err != nil {
		t.Fatal(err)
	}
	foo = &Directory{Files: []FileNode{{Name: "baz", Digest: DigestOf([]byte("#!/bin/sh\n")), Executable: true}}}
	fd, err := foo.Digest()
	if err != nil {
		t.Fatal(err)
	}
	root = &Directory{
		Files:    []FileNode{{Name: "a", Digest: DigestOf(nil)}, {Name: "bar", Digest: DigestOf([]byte("hello"))}},
		Dirs:     []DirNode{{Name: "empty", Digest: ed}, {Name: "foo", Digest: fd}},
		Symlinks: []SymlinkNode{{Name: "link", Target: "foo/baz"}},
	}
	return root, foo
}

func TestGoldenVectors(t *testing.T) {
	ed, err := (&Directory{}).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ed.String(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/0"; got != want {
		t.Errorf("empty directory = %s, want %s", got, want)
	}
	root, foo := goldenTree(t)
	fd, _ := foo.Digest()
	if got, want := fd.String(), "55c5e11657f77eb26d51a45c126caa66e5905f0b290bf0f3d3788388df3d9e87/79"; got != want {
		t.Errorf("foo = %s, want %s", got, want)
	}
	rd, _ := root.Digest()
	if got, want := rd.String(), "4503a5ef32acd84cd91114435c7fe60c864a08ea558e888872a3e149f088f5a0/321"; got != want {
		t.Errorf("root = %s, want %s", got, want)
	}
	// Decoding the encoding gives the same message back.
	b, _ := root.Encode()
	back, err := DecodeDirectory(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := back.Encode()
	if !bytes.Equal(b, b2) {
		t.Error("decode/encode is not the identity")
	}
}

// FuzzDecodeDirectory: DecodeDirectory never panics; what it accepts encodes
// again, and that encoding decodes to the same message (the canonical form is a
// fixed point).
func FuzzDecodeDirectory(f *testing.F) {
	root, foo := goldenTree(f)
	for _, d := range []*Directory{root, foo, {}} {
		b, _ := d.Encode()
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x00})
	f.Add([]byte{0x2a, 0x02, 0x08, 0x01}) // node properties, skipped
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDirectory(b)
		if err != nil {
			return
		}
		enc, err := d.Encode()
		if err != nil {
			t.Fatalf("accepted %x but cannot encode it: %v", b, err)
		}
		d2, err := DecodeDirectory(enc)
		if err != nil {
			t.Fatalf("canonical encoding %x does not decode: %v", enc, err)
		}
		enc2, _ := d2.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixed point: %x vs %x", enc, enc2)
		}
	})
}

func FuzzParseDigest(f *testing.F) {
	f.Add("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/0")
	f.Add("4503a5ef32acd84cd91114435c7fe60c864a08ea558e888872a3e149f088f5a0/321")
	f.Add("x/1")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		back, err := ParseDigest(d.String())
		if err != nil || back != d || d.Size < 0 {
			t.Fatalf("%q parsed to %v, which does not round-trip: %v", s, d, err)
		}
	})
}

func TestDecodeRejects(t *testing.T) {
	root, _ := goldenTree(t)
	good, _ := root.Encode()
	for name, b := range map[string][]byte{
		"truncated":     good[:len(good)-3],
		"unknown field": append(append([]byte{}, good...), 0x20, 0x01),
		"unsorted":      mustEncodeRaw(&Directory{Files: []FileNode{{Name: "b", Digest: EmptyDigest}, {Name: "a", Digest: EmptyDigest}}}),
		"duplicate":     mustEncodeRaw(&Directory{Files: []FileNode{{Name: "a", Digest: EmptyDigest}}, Dirs: []DirNode{{Name: "a", Digest: EmptyDigest}}}),
		"dotdot":        mustEncodeRaw(&Directory{Dirs: []DirNode{{Name: "..", Digest: EmptyDigest}}}),
		"slash":         mustEncodeRaw(&Directory{Symlinks: []SymlinkNode{{Name: "a/b", Target: "x"}}}),
		"not utf-8":     mustEncodeRaw(&Directory{Files: []FileNode{{Name: "\xff", Digest: EmptyDigest}}}),
		"no digest":     {0x0a, 0x03, 0x0a, 0x01, 'a'},
	} {
		if _, err := DecodeDirectory(b); !errors.Is(err, ErrBadTree) {
			t.Errorf("%s: %v, want ErrBadTree", name, err)
		}
	}
}

// mustEncodeRaw encodes d without validating it (to build bad input).
func mustEncodeRaw(d *Directory) []byte { return d.appendEncoded(nil) }
