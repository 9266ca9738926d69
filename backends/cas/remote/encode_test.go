package remote

import (
	"bytes"
	"math/rand/v2"
	"sort"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/capfs/capfs/backends/cas"
)

// marshalPB encodes d with the remote-apis Go types and proto.Marshal: the
// independent encoder cas.Directory.Encode must agree with.
func marshalPB(t *testing.T, d *cas.Directory) []byte {
	t.Helper()
	m := &repb.Directory{}
	for _, f := range d.Files {
		m.Files = append(m.Files, &repb.FileNode{Name: f.Name, Digest: pb(f.Digest), IsExecutable: f.Executable})
	}
	for _, s := range d.Dirs {
		m.Directories = append(m.Directories, &repb.DirectoryNode{Name: s.Name, Digest: pb(s.Digest)})
	}
	for _, l := range d.Symlinks {
		m.Symlinks = append(m.Symlinks, &repb.SymlinkNode{Name: l.Name, Target: l.Target})
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodingMatchesProtoMarshal(t *testing.T) {
	// The golden tree.
	empty := &cas.Directory{}
	ed, _ := empty.Digest()
	foo := &cas.Directory{Files: []cas.FileNode{{Name: "baz", Digest: cas.DigestOf([]byte("#!/bin/sh\n")), Executable: true}}}
	fb := marshalPB(t, foo)
	root := &cas.Directory{
		Files:    []cas.FileNode{{Name: "a", Digest: cas.DigestOf(nil)}, {Name: "bar", Digest: cas.DigestOf([]byte("hello"))}},
		Dirs:     []cas.DirNode{{Name: "empty", Digest: ed}, {Name: "foo", Digest: cas.DigestOf(fb)}},
		Symlinks: []cas.SymlinkNode{{Name: "link", Target: "foo/baz"}},
	}
	rb := marshalPB(t, root)
	if got := cas.DigestOf(rb).String(); got != "4503a5ef32acd84cd91114435c7fe60c864a08ea558e888872a3e149f088f5a0/321" {
		t.Fatalf("proto.Marshal gives root %s", got)
	}
	if got := cas.DigestOf(fb).String(); got != "55c5e11657f77eb26d51a45c126caa66e5905f0b290bf0f3d3788388df3d9e87/79" {
		t.Fatalf("proto.Marshal gives foo %s", got)
	}
	// Random directories: names of every length and byte, sizes needing every
	// varint length, long targets, executables.
	r := rand.New(rand.NewPCG(7, 7))
	alphabet := []rune("abcXYZ019._- \tλ€😀\u00e9\u200b~")
	name := func() string {
		var b []rune
		for n := 1 + r.IntN(60); len(b) < n; {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		if s := string(b); s == "." || s == ".." {
			return "dot"
		}
		return string(b)
	}
	for iter := range 300 {
		d := &cas.Directory{}
		used := map[string]bool{}
		pick := func() string {
			for {
				n := name()
				if !used[n] {
					used[n] = true
					return n
				}
			}
		}
		size := func() int64 { return r.Int64N(1 << uint(r.IntN(62))) }
		for range r.IntN(20) {
			d.Files = append(d.Files, cas.FileNode{Name: pick(), Digest: cas.Digest{Hash: randHash(r), Size: size()}, Executable: r.IntN(2) == 0})
		}
		for range r.IntN(10) {
			d.Dirs = append(d.Dirs, cas.DirNode{Name: pick(), Digest: cas.Digest{Hash: randHash(r), Size: size()}})
		}
		for range r.IntN(10) {
			d.Symlinks = append(d.Symlinks, cas.SymlinkNode{Name: pick(), Target: name() + "/" + name()})
		}
		sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Name < d.Files[j].Name })
		sort.Slice(d.Dirs, func(i, j int) bool { return d.Dirs[i].Name < d.Dirs[j].Name })
		sort.Slice(d.Symlinks, func(i, j int) bool { return d.Symlinks[i].Name < d.Symlinks[j].Name })
		ours, err := d.Encode()
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if theirs := marshalPB(t, d); !bytes.Equal(ours, theirs) {
			t.Fatalf("iteration %d: Encode differs from proto.Marshal\nours   %x\ntheirs %x", iter, ours, theirs)
		}
		// And proto.Unmarshal reads our bytes back to the same message.
		var back repb.Directory
		if err := proto.Unmarshal(ours, &back); err != nil || len(back.Files) != len(d.Files) {
			t.Fatalf("iteration %d: proto.Unmarshal: %v", iter, err)
		}
	}
}

func randHash(r *rand.Rand) (h [32]byte) {
	for i := range h {
		h[i] = byte(r.Uint32())
	}
	return h
}
