package treediff

import (
	"bytes"
	"context"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// build makes a memory tree from spec, best effort: entries are separated by
// ';', each "name=data" ("|" in data is a newline); a name ending in "*" is
// executable, in "@" a symlink to data, in "/" a directory. Entries that
// cannot be made (a file under a file) are skipped.
func build(spec string) vfs.Backend {
	ctx := context.Background()
	m := memory.New()
	for ent := range strings.SplitSeq(spec, ";") {
		name, data, _ := strings.Cut(ent, "=")
		data = strings.ReplaceAll(data, "|", "\n")
		kind := byte(0)
		if n := len(name); n > 0 && strings.ContainsRune("*@/", rune(name[n-1])) {
			name, kind = name[:n-1], name[n-1]
		}
		p, err := vfs.ParseGuest(name)
		if err != nil || p.IsRoot() || vfstest.MkdirAll(ctx, m, p.Dir(), 0o755) != nil {
			continue
		}
		switch kind {
		case '/':
			_ = m.Mkdir(ctx, p, 0o755)
		case '@':
			_ = m.Symlink(ctx, data, p)
		case '*':
			if vfstest.WriteFile(ctx, m, p, []byte(data)) == nil {
				_ = m.Chmod(ctx, p, 0o755)
			}
		default:
			_ = vfstest.WriteFile(ctx, m, p, []byte(data))
		}
	}
	return m
}

type leafState struct {
	mode fs.FileMode
	id   string
}

// leaves lists every leaf of b with its mode and id, walking b directly.
func leaves(t *testing.T, b vfs.Backend) map[string]leafState {
	ctx := context.Background()
	out := map[string]leafState{}
	var walk func(p vfs.Path)
	walk = func(p vfs.Path) {
		es, err := b.ReadDir(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			cp, _ := p.Child(e.Name)
			i, err := b.Lstat(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			if i.Mode.IsDir() {
				walk(cp)
				continue
			}
			var data string
			if i.Mode&fs.ModeSymlink != 0 {
				data, err = b.Readlink(ctx, cp)
			} else {
				var raw []byte
				raw, err = vfstest.ReadFile(ctx, b, cp)
				data = string(raw)
			}
			if err != nil {
				t.Fatal(err)
			}
			out[cp.String()] = leafState{leafMode(i), blobID(data)}
		}
	}
	walk(vfs.Path{})
	return out
}

// applyHunks applies WriteHunks' output to x.
func applyHunks(t *testing.T, x []string, hunks string) []string {
	var out []string
	xi := 0
	lines := SplitLines(hunks)
	for k := 0; k < len(lines); k++ {
		l := lines[k]
		switch {
		case strings.HasPrefix(l, "@@ -"):
			r, _, _ := strings.Cut(l[4:], " ")
			s, n, hasCount := strings.Cut(r, ",")
			start, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("bad hunk header %q", l)
			}
			if !hasCount || n != "0" {
				start-- // a non-empty range names its first line, 1-based
			}
			for ; xi < start; xi++ {
				out = append(out, x[xi])
			}
		case l == "\\ No newline at end of file\n":
			if lines[k-1][0] != '-' {
				out[len(out)-1] = strings.TrimSuffix(out[len(out)-1], "\n")
			}
		case l[0] == ' ', l[0] == '-':
			if xi >= len(x) || x[xi] != strings.TrimSuffix(l[1:], "\n") && x[xi] != l[1:] {
				t.Fatalf("hunk line %q does not match old line %d", l, xi)
			}
			if l[0] == ' ' {
				out = append(out, x[xi])
			}
			xi++
		case l[0] == '+':
			out = append(out, l[1:])
		default:
			t.Fatalf("unexpected line %q", l)
		}
	}
	return append(out, x[xi:]...)
}

// FuzzTreeDiff builds two trees and checks that Compare on them is sorted,
// empty on equal trees, and turns a's leaves into b's; that Renames keeps
// every path; and that the hunks of every changed text turn it into the new.
func FuzzTreeDiff(f *testing.F) {
	f.Add("a=1|2|3;b/c=x;l@=a", "a=1|3|4;b=x;l=a")
	f.Add("d/e/f=deep|text", "d/e/f*=deep|text;g/=")
	f.Add("", "x=only|b")
	f.Add("m=a|b|c|d|e|f|g|h|i|j", "m=a|B|c|d|e|f|g|h|I|j|k")
	f.Add("old=same|content|here;bin=\x00", "new=same|content|here;bin=\x00\x01")
	f.Fuzz(func(t *testing.T, specA, specB string) {
		ctx := context.Background()
		a, b := build(specA), build(specB)
		if same, err := Backends(ctx, a, a); err != nil || len(same) != 0 {
			t.Fatalf("a against itself: %+v, %v", same, err)
		}
		cs, err := Backends(ctx, a, b)
		if err != nil {
			t.Fatal(err)
		}
		state := leaves(t, a)
		for i, c := range cs {
			if i > 0 && cs[i-1].Path >= c.Path && !(cs[i-1].Path == c.Path && c.Kind == Added) {
				t.Fatalf("changes out of order: %q then %q", cs[i-1].Path, c.Path)
			}
			if c.Kind != Added {
				if got := state[c.Path]; got != (leafState{c.OldMode, c.OldID}) {
					t.Fatalf("%s %s: old side %+v, a has %+v", c.Kind, c.Path, leafState{c.OldMode, c.OldID}, got)
				}
				delete(state, c.Path)
			}
			if c.Kind != Deleted {
				state[c.Path] = leafState{c.NewMode, c.NewID}
			}
		}
		want := leaves(t, b)
		if len(state) != len(want) {
			t.Fatalf("changes applied to a give %d leaves, b has %d", len(state), len(want))
		}
		for p, l := range want {
			if state[p] != l {
				t.Fatalf("%s: changes give %+v, b has %+v", p, state[p], l)
			}
		}
		rs, err := Renames(ctx, a, b, cs)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := Unified(ctx, a, b, rs, &buf); err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Kind != Modified || !c.NewMode.IsRegular() {
				continue
			}
			x := SplitLines(string(readAll(t, a, c.Path)))
			y := string(readAll(t, b, c.Path))
			var h bytes.Buffer
			WriteHunks(&h, x, SplitLines(y), false)
			if got := strings.Join(applyHunks(t, x, h.String()), ""); got != y {
				t.Fatalf("%s: hunks give %q, want %q\n%s", c.Path, got, y, h.String())
			}
		}
	})
}

func readAll(t *testing.T, b vfs.Backend, p string) []byte {
	data, err := vfstest.ReadFile(context.Background(), b, vfs.MustParse(p))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
