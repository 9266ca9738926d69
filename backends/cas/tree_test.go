package cas

import (
	"bytes"
	"testing"
)

// goldenTree builds the example tree: a (empty), bar = "hello" (0644),
// empty/, foo/baz = "#!/bin/sh\n" (0755), link -> foo/baz.
func goldenTree(t *testing.T) (root, foo *Directory) {
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
