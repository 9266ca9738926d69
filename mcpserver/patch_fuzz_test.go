package mcpserver

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// fuzzFiles is the tree FuzzApplyPatch patches: LF, CRLF, no final newline,
// repeated lines, a blank line, an executable, an empty file, a subdirectory.
var fuzzFiles = map[string]corpusFile{
	"a.txt":    {"alpha\nbeta\ngamma\nbeta\ndelta\n\nepsilon\n", false},
	"crlf.txt": {"one\r\ntwo\r\n\r\nthree\r\n", false},
	"nonl.txt": {"x\ny", false},
	"dir/b.go": {"package b\n\nfunc B() {\n\treturn\n}\n", false},
	"run.sh":   {"#!/bin/sh\necho hi\n", true},
	"empty":    {"", false},
}

// fuzzSeeds are patches over fuzzFiles in both formats, as git diff and models
// write them.
func fuzzSeeds() []string {
	seeds := []string{
		"*** Begin Patch\n*** Update File: a.txt\n@@\n gamma\n-beta\n+BETA\n*** End Patch\n",
		"*** Begin Patch\n*** Update File: crlf.txt\n@@\n one\n-two\n+TWO\n \n*** Update File: nonl.txt\n@@\n-y\n+z\n*** End of File\n*** End Patch\n",
		"*** Begin Patch\n*** Add File: new/c.txt\n+c\n\\ No newline at end of file\n*** Delete File: empty\n*** Update File: dir/b.go\n*** Move to: dir/c.go\n@@ func B() {\n-\treturn\n+\treturn // done\n*** End Patch\n",
		"*** Begin Patch\n*** Update File: a.txt\n@@\n-beta\n+B\n\n@@\n+zeta\n*** End Patch\n",
		"diff --git a/run.sh b/run.sh\nold mode 100755\nnew mode 100644\n",
		"diff --git a/new.sh b/new.sh\nnew file mode 100755\nindex 0000000..1111111\n--- /dev/null\n+++ b/new.sh\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+exit 0\n",
		"diff --git a/nonl.txt b/nonl.txt\ndeleted file mode 100644\nindex 1111111..0000000\n--- a/nonl.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n\\ No newline at end of file\n",
		"diff --git a/a.txt \"b/d\\303\\251j\\303\\240 vu.txt\"\nsimilarity index 80%\nrename from a.txt\nrename to \"d\\303\\251j\\303\\240 vu.txt\"\nindex 1111111..2222222 100644\n--- a/a.txt\n+++ \"b/d\\303\\251j\\303\\240 vu.txt\"\n@@ -5,3 +5,3 @@ gamma\n delta\n \n-epsilon\n+EPSILON\n",
		"diff --git a/empty b/empty\nindex e69de29..1111111 100644\n--- a/empty\n+++ b/empty\n@@ -0,0 +1 @@\n+now full\n",
	}
	// unifiedDiff's hunks are git diff's: an edit of each file, as a plain
	// diff, as a git diff and converted to Begin Patch.
	edits := map[string]string{
		"a.txt":    "alpha\nbeta\ngamma\nbeta\nDELTA\n\nepsilon\nomega\n",
		"crlf.txt": "one\r\ntwo\r\n\r\nthree\r\nfour\r\n",
		"nonl.txt": "x\ny\n",
		"dir/b.go": "package b\n\nfunc B() {\n}\n",
	}
	for _, name := range []string{"a.txt", "crlf.txt", "nonl.txt", "dir/b.go"} {
		d := unifiedDiff(name, fuzzFiles[name].data, edits[name])
		seeds = append(seeds, d, "diff --git a/"+name+" b/"+name+"\nindex 1111111..2222222 100644\n"+d)
		if files, err := parseUnified(d); err == nil {
			if begin, _ := toBeginPatch(files); begin != "" {
				seeds = append(seeds, begin)
			}
		}
	}
	return seeds
}

// snapshot lists every entry of d: files with their bytes and executable bit,
// directories as such.
func snapshot(t *testing.T, d *dir.Dir) map[string]corpusFile {
	ctx := context.Background()
	out := map[string]corpusFile{}
	err := d.Walk(ctx, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p = strings.TrimPrefix(p, "./")
		if e.IsDir() {
			out[p+"/"] = corpusFile{}
			return nil
		}
		data, err := d.ReadFile(ctx, p)
		if err != nil {
			return err
		}
		info, err := d.Lstat(ctx, p)
		if err != nil {
			return err
		}
		out[p] = corpusFile{string(data), info.Mode()&0o100 != 0}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzApplyPatch mutates patches over a fixed tree and checks: parsing is
// deterministic; a dry run changes nothing; a refused patch changes nothing (not
// a byte, a mode or a directory) and says why with a code; an accepted one
// changes only the files it names, each exactly as the patch says (an added
// file's bytes and mode, a deletion, an update's hunks applied by the engine, a
// move, a mode).
func FuzzApplyPatch(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, patch string) {
		files, perr := parsePatch(patch)
		again, perr2 := parsePatch(patch)
		if !reflect.DeepEqual(files, again) || (perr == nil) != (perr2 == nil) || (perr != nil && perr.Error() != perr2.Error()) {
			t.Fatalf("parsing twice differs: %v / %v", perr, perr2)
		}
		ctx := context.Background()
		d, _ := dir.New(memory.New())
		for p, f := range fuzzFiles {
			if i := strings.LastIndex(p, "/"); i > 0 {
				if err := d.MkdirAll(ctx, p[:i]); err != nil {
					t.Fatal(err)
				}
			}
			perm := fs.FileMode(0o644)
			if f.exec {
				perm = 0o755
			}
			if err := d.WriteFile(ctx, p, []byte(f.data), perm); err != nil {
				t.Fatal(err)
			}
		}
		s := &server{root: d}
		s.opts.defaults()
		before := snapshot(t, d)
		if _, err := s.applyPatch(ctx, patchIn{Patch: patch, DryRun: true}); (err == nil) && perr != nil {
			t.Fatal("a patch that does not parse passed a dry run")
		}
		if got := snapshot(t, d); !reflect.DeepEqual(got, before) {
			t.Fatal("a dry run changed the tree")
		}
		_, err := s.applyPatch(ctx, patchIn{Patch: patch})
		after := snapshot(t, d)
		if err != nil {
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused patch changed the tree: %v", err)
			}
			var ve *vfs.Error
			if !errors.As(err, &ve) || ve.Code == "" || ve.Code == vfs.CodeIO || ve.Op == "" {
				t.Fatalf("refusal without a code or op: %#v", err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("a patch that does not parse was applied: %v", perr)
		}
		named := map[string]bool{}
		want := map[string]*corpusFile{} // nil: absent
		for _, pf := range files {
			p, err := canonical(pf.Path)
			if err != nil {
				t.Fatalf("applied with a bad path %q", pf.Path)
			}
			named[p] = true
			old, existed := before[p]
			switch pf.Kind {
			case patchAdd:
				if existed {
					t.Fatalf("Add File over an existing %s", p)
				}
				want[p] = &corpusFile{pf.Content, pf.NewMode&0o100 != 0}
			case patchDelete:
				want[p] = nil
			default:
				data := old.data
				if len(pf.Chunks) > 0 {
					if data, err = applyChunks(old.data, pf.Chunks); err != nil {
						t.Fatalf("%s: applied, but its hunks do not apply: %v", p, err)
					}
				}
				exec := old.exec
				if pf.NewMode != 0 {
					exec = pf.NewMode&0o100 != 0
				}
				dest := p
				if pf.MoveTo != "" {
					if dest, err = canonical(pf.MoveTo); err != nil {
						t.Fatalf("applied with a bad Move to %q", pf.MoveTo)
					}
					if dest != p {
						named[dest] = true
						want[p] = nil
					}
				}
				want[dest] = &corpusFile{data, exec}
			}
		}
		for p := range union(before, after) {
			if strings.HasSuffix(p, "/") {
				if _, ok := after[p]; !ok {
					t.Fatalf("directory %s removed", p)
				}
				continue
			}
			b, bok := before[p]
			a, aok := after[p]
			if w, ok := want[p]; ok {
				if (w == nil) == aok || (w != nil && *w != a) {
					t.Fatalf("%s: got %v %q (exec %v), want %+v", p, aok, clip(a.data, 200), a.exec, w)
				}
			} else if b != a || bok != aok {
				t.Fatalf("%s changed, but the patch does not name it (names %v)", p, named)
			}
		}
		// Any new directory holds something the patch added or moved.
		for p := range after {
			if _, ok := before[p]; !ok && strings.HasSuffix(p, "/") {
				found := false
				for q := range want {
					if strings.HasPrefix(q, p) && want[q] != nil {
						found = true
					}
				}
				if !found {
					t.Fatalf("directory %s created for nothing", p)
				}
			}
		}
	})
}
