package vfstest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/vfs"
)

const (
	rdonly = os.O_RDONLY
	wronly = os.O_WRONLY
	rdwr   = os.O_RDWR
	creat  = os.O_CREATE
	excl   = os.O_EXCL
	trunc  = os.O_TRUNC
	appnd  = os.O_APPEND
)

// testDifferential runs every script on a fresh backend and on a fresh host
// directory, comparing each step and the final trees.
func testDifferential(t *testing.T, cfg Config) {
	for _, sc := range scripts() {
		t.Run(sc.name, func(t *testing.T) {
			f := newFx(t, cfg, sc.needs...)
			runScript(t, f, sc)
		})
	}
}

func runScript(t *testing.T, f *fx, sc script) {
	host := &side{ctx: f.ctx, b: &hostRef{dir: t.TempDir()}, feat: f.feat, h: map[string]vfs.File{}}
	back := &side{ctx: f.ctx, b: f.b, feat: f.feat, h: map[string]vfs.File{}}
	defer func() {
		for _, s := range []*side{host, back} {
			for _, h := range s.h {
				h.Close()
			}
		}
	}()
	for i, st := range sc.steps {
		hobs, herr := st.run(host)
		bobs, berr := st.run(back)
		ho, bo := outcome(herr), outcome(berr)
		same := ho == bo
		if st.loose {
			same = (herr == nil) == (berr == nil)
		}
		if same && herr == nil && hobs != bobs {
			same = false
		}
		// A failed read still reports what it got: compare it too.
		if same && (herr == io.EOF) && hobs != bobs {
			same = false
		}
		if !same {
			t.Errorf("step %d %s:\n\thost (os): %s %s\n\tbackend:   %s %s\n\tbackend error: %v",
				i+1, st.desc, ho, hobs, bo, bobs, berr)
			return // later steps would only cascade
		}
	}
	hd, herr := dumpTree(f.ctx, host.b, f.feat)
	bd, berr := dumpTree(f.ctx, back.b, f.feat)
	if herr != nil || berr != nil {
		t.Fatalf("final tree: host %v, backend %v", herr, berr)
	}
	if hd != bd {
		t.Errorf("final trees differ after %d steps:\nhost (os):\n%s\nbackend:\n%s", len(sc.steps), hd, bd)
	}
}

// Fixed times for Chtimes: whole seconds, so no backend's precision matters.
var (
	t1 = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	t2 = time.Date(2011, 12, 13, 14, 15, 16, 0, time.UTC)
	t3 = time.Date(1999, 9, 9, 9, 9, 9, 0, time.UTC)
)

func scripts() []script {
	return []script{
		{name: "mkdir", steps: []step{
			mkdir("a"),
			mkdir("a"),
			mkdir("a/b"),
			mkdir("x/y"),
			writeFile("f", "F"),
			mkdir("f/x"),
			mkdir("f"),
			mkdir("."),
			mkdirPerm("c", 0o700),
			stat("c"),
			mkdir("a/b/"),
			mkdir("n/"),
			stat("n"),
			stat("n/"),
			stat("f/"),
			readDir("."),
			readDir("a"),
		}},
		{name: "open-flags", steps: []step{
			open("h", "f", rdonly, 0),
			open("h", "f", wronly|creat, 0o644),
			write("h", "hello"),
			closeH("h"),
			stat("f"),
			openClose("f", wronly|creat|excl),
			readFile("f"),
			open("h", "f", wronly|trunc, 0),
			fstat("h"),
			closeH("h"),
			readFile("f"),
			writeFile("f", "abc"),
			open("h", "f", wronly|appnd, 0),
			write("h", "def"),
			seek("h", 0, io.SeekStart),
			write("h", "ghi"),
			closeH("h"),
			readFile("f"),
			open("h", "f", rdwr|appnd, 0),
			read("h", 3),
			write("h", "X"),
			read("h", 3),
			readAt("h", 20, 0),
			closeH("h"),
			open("h", "f", rdonly, 0),
			loose(write("h", "x")),
			loose(truncate("h", 0)),
			closeH("h"),
			open("h", "f", wronly, 0),
			loose(read("h", 1)),
			closeH("h"),
			readFile("f"),
			openClose("f/", rdonly),
			openClose("missing/x", wronly|creat),
			openClose("f/x", wronly|creat),
			mkdir("d"),
			open("hd", "d", rdonly, 0),
			fstat("hd"),
			read("hd", 1),
			closeH("hd"),
			openClose("d/", rdonly),
			openClose("d", wronly),
			openClose("d", rdwr),
			openClose("d", rdonly|creat),
			openClose("d", wronly|creat|excl),
			loose(openClose("new/", wronly|creat)),
			open("g", "g", rdwr|creat|excl, 0o600),
			write("g", "x"),
			seek("g", 0, io.SeekStart),
			read("g", 5),
			read("g", 5),
			closeH("g"),
			stat("g"),
			openClose(".", rdonly),
			openClose(".", wronly),
			open("h", "g", rdwr, 0),
			syncH("h"),
			closeH("h"),
			closeH("h"),
			read("h", 1),
			write("h", "x"),
			seek("h", 0, io.SeekStart),
			fstat("h"),
			loose(readAt("h", 1, 0)),
			loose(writeAt("h", "x", 0)),
			loose(truncate("h", 0)),
		}},
		{name: "readat-writeat-truncate", steps: []step{
			open("h", "f", rdwr|creat, 0o644),
			write("h", "abc"),
			writeAt("h", "xy", 10),
			fstat("h"),
			readAt("h", 20, 0),
			readAt("h", 4, 10),
			readAt("h", 4, 12),
			readAt("h", 4, 100),
			readAt("h", 2, 1),
			read("h", 2),
			seek("h", 0, io.SeekCurrent),
			loose(readAt("h", 1, -1)),
			loose(writeAt("h", "x", -1)),
			writeAt("h", "z", 0),
			readFile("f"),
			truncate("h", 20),
			fstat("h"),
			readFile("f"),
			truncate("h", 2),
			readFile("f"),
			seek("h", 0, io.SeekCurrent),
			read("h", 10),
			write("h", "Q"),
			readFile("f"),
			loose(truncate("h", -1)),
			truncate("h", 0),
			fstat("h"),
			readAt("h", 1, 0),
			closeH("h"),
			readFile("f"),
		}},
		{name: "seek", steps: []step{
			writeFile("f", "0123456789"),
			open("h", "f", rdwr, 0),
			seek("h", 3, io.SeekStart),
			read("h", 2),
			seek("h", 2, io.SeekCurrent),
			read("h", 10),
			seek("h", -3, io.SeekEnd),
			read("h", 1),
			seek("h", 0, io.SeekEnd),
			read("h", 1),
			seek("h", 5, io.SeekEnd),
			write("h", "x"),
			readFile("f"),
			loose(seek("h", -1, io.SeekStart)),
			loose(seek("h", -100, io.SeekCurrent)),
			loose(seek("h", 0, 7)),
			seek("h", 0, io.SeekCurrent),
			seek("h", 1<<40, io.SeekStart),
			read("h", 1),
			closeH("h"),
			stat("f"),
		}},
		{name: "independent-offsets", steps: []step{
			writeFile("f", "hello world"),
			open("a", "f", rdwr, 0),
			open("b", "f", rdwr, 0),
			read("a", 5),
			read("b", 3),
			write("b", "P"),
			read("a", 3),
			readAt("a", 11, 0),
			seek("a", 0, io.SeekCurrent),
			closeH("a"),
			read("b", 3),
			open("c", "f", wronly|trunc, 0),
			read("b", 3),
			write("c", "xyz"),
			readAt("b", 10, 0),
			fstat("b"),
			closeH("b"),
			closeH("c"),
			readFile("f"),
		}},
		{name: "rename", steps: []step{
			writeFile("a", "A"),
			writeFile("b", "B"),
			mkdir("d"),
			mkdir("e"),
			writeFile("d/x", "X"),
			mkdir("d/sub"),
			rename("a", "c"),
			stat("a"),
			readFile("c"),
			rename("c", "b"),
			readFile("b"),
			rename("b", "b"),
			readFile("b"),
			rename("missing", "z"),
			rename("b", "nodir/z"),
			rename("b", "d/x/z"),
			rename("d", "d/sub/in"),
			rename("d", "d/in"),
			rename("d", "d"),
			rename("d", "e"),
			stat("d"),
			readDir("e"),
			mkdir("d2"),
			writeFile("d2/y", "Y"),
			rename("e", "d2"),
			rename("b", "d2"),
			rename("d2", "b"),
			rename("e/x", "e/sub/x2"),
			rename("e/sub", "f2"),
			open("h", "f2/x2", rdonly, 0),
			rename("f2/x2", "moved"),
			readAt("h", 10, 0),
			fstat("h"),
			closeH("h"),
			rename("b/", "z"),
			rename("f2", "f3/"),
			rename("d2/", "d3"),
			loose(rename("b", "q/")),
			readDir("."),
		}},
		{name: "remove", steps: []step{
			writeFile("f", "F"),
			mkdir("d"),
			mkdir("e"),
			writeFile("e/x", "X"),
			remove("f"),
			remove("f"),
			remove("d"),
			remove("e"),
			remove("e/x"),
			remove("e/"),
			remove("missing/x"),
			writeFile("g", "G"),
			remove("g/"),
			remove("g/x"),
			writeFile("h", "data"),
			open("fh", "h", rdwr, 0),
			remove("h"),
			stat("h"),
			seek("fh", 0, io.SeekEnd),
			write("fh", "+"),
			readAt("fh", 10, 0),
			writeFile("h", "new"),
			readAt("fh", 10, 0),
			truncate("fh", 2),
			readAt("fh", 10, 0),
			closeH("fh"),
			readFile("h"),
			readDir("."),
		}},
		{name: "readdir", steps: readDirSteps()},
		{name: "symlinks", needs: []feature{symlinks}, steps: []step{
			writeFile("f", "F"),
			mkdir("d"),
			writeFile("d/g", "G"),
			mkdir("e"),
			symlink("f", "lf"),
			symlink("d", "ld"),
			symlink("e", "le"),
			symlink("nowhere", "dangle"),
			symlink("x/./y//z/", "weird"),
			lstat("lf"),
			stat("lf"),
			readlink("lf"),
			readlink("weird"),
			lstat("weird"),
			readlink("f"),
			readlink("d"),
			readlink("missing"),
			readlink("ld/g"),
			stat("dangle"),
			lstat("dangle"),
			readFile("lf"),
			readFile("ld/g"),
			readDir("ld"),
			stat("ld/"),
			lstat("ld/"),
			lstat("lf/"),
			stat("lf/"),
			readDir("lf"),
			openClose("dangle", wronly|creat|excl),
			stat("nowhere"),
			openClose("dangle", wronly|creat),
			readFile("nowhere"),
			stat("dangle"),
			symlink("f", "lf"),
			symlink("x", "missingdir/l"),
			symlink("x", "f/l"),
			open("h", "lf", wronly|trunc, 0),
			write("h", "FF"),
			closeH("h"),
			readFile("f"),
			mkdir("lf"),
			mkdir("ld"),
			symlink("nowhere2", "dangle2"),
			loose(mkdir("dangle2/")),
			stat("nowhere2"),
			remove("lf"),
			readFile("f"),
			symlink("f", "lf2"),
			rename("lf2", "lf3"),
			readlink("lf3"),
			readFile("lf3"),
			loose(remove("le/")),
			stat("e"),
			loose(rename("le/", "x")),
			lstat("le"),
			mkdir("ld/new"),
			writeFile("ld/new/h", "H"),
			readDir("d"),
			symlink("lf3", "l2"),
			readFile("l2"),
			symlink("d/", "lds"),
			stat("lds"),
			symlink("f/", "lfs"),
			stat("lfs"),
			symlink(".", "dot"),
			readFile("dot/f"),
			stat("dot"),
			symlink("d/..", "upin"),
			readFile("upin/f"),
			symlink("d/../d/./g", "dotty"),
			readFile("dotty"),
			rename("f", "lf3"),
			lstat("lf3"),
			rename("d", "ld"),
			readDir("ld"),
			lstat("d"),
			readDir("."),
		}},
		{name: "hardlinks", needs: []feature{hardLinks}, steps: []step{
			writeFile("f", "one"),
			link("f", "g"),
			stat("f"),
			stat("g"),
			open("h", "g", wronly|appnd, 0),
			write("h", "+two"),
			closeH("h"),
			readFile("f"),
			link("f", "g"),
			link("missing", "x"),
			mkdir("d"),
			loose(link("d", "dl")),
			link("f", "nodir/x"),
			link("f", "d/f"),
			stat("f"),
			remove("f"),
			stat("g"),
			rename("g", "d/f"),
			readDir("."),
			readDir("d"),
			stat("g"),
			open("h", "d/f", wronly|trunc, 0),
			closeH("h"),
			readFile("g"),
			writeFile("g", "replaced"),
			readFile("d/f"),
			open("h", "g", rdonly, 0),
			remove("g"),
			fstat("h"),
			readAt("h", 20, 0),
			closeH("h"),
			stat("d/f"),
		}},
		{name: "hardlinks-symlinks", needs: []feature{hardLinks, symlinks}, steps: []step{
			writeFile("f", "F"),
			symlink("f", "lf"),
			link("lf", "lf2"),
			lstat("lf2"),
			readlink("lf2"),
			stat("f"),
			mkdir("d"),
			symlink("d", "ld"),
			link("f", "ld/f"),
			link("ld/f", "f3"),
			stat("f"),
			symlink("nowhere", "dangle"),
			link("f", "dangle"),
			link("dangle", "dangle-l"),
			lstat("dangle-l"),
		}},
		{name: "chmod", needs: []feature{chmod}, steps: []step{
			writeFile("f", "F"),
			chmodTo("f", 0o600),
			stat("f"),
			chmodTo("f", 0o755),
			stat("f"),
			chmodTo("f", 0),
			stat("f"),
			chmodTo("f", 0o644),
			mkdir("d"),
			chmodTo("d", 0o700),
			stat("d"),
			chmodTo("missing", 0o600),
			chmodTo("f/", 0o600),
			open("h", "f", rdonly, 0),
			chmodTo("f", 0o640),
			fstat("h"),
			closeH("h"),
			open("h", "new", wronly|creat, 0o604),
			fstat("h"),
			closeH("h"),
			mkdirPerm("d2", 0o711),
			stat("d2"),
		}},
		{name: "chmod-symlinks", needs: []feature{chmod, symlinks}, steps: []step{
			writeFile("f", "F"),
			symlink("f", "lf"),
			chmodTo("lf", 0o640),
			stat("f"),
			stat("lf"),
			symlink("nowhere", "dangle"),
			chmodTo("dangle", 0o600),
			mkdir("d"),
			symlink("d", "ld"),
			chmodTo("ld/", 0o750),
			stat("d"),
		}},
		{name: "chtimes", needs: []feature{chtimes}, steps: []step{
			writeFile("f", "F"),
			chtimesTo("f", t1, t2),
			statTime("f"),
			chtimesTo("f", t3, time.Time{}),
			statTime("f"),
			chtimesTo("f", time.Time{}, t3),
			statTime("f"),
			mkdir("d"),
			chtimesTo("d", t2, t1),
			statTime("d"),
			chtimesTo("missing", t1, t1),
			open("h", "f", rdonly, 0),
			chtimesTo("f", t1, t2),
			fstatTime("h"),
			closeH("h"),
		}},
		{name: "chtimes-symlinks", needs: []feature{chtimes, symlinks}, steps: []step{
			writeFile("f", "F"),
			symlink("f", "lf"),
			chtimesTo("lf", t1, t2),
			statTime("f"),
			symlink("nowhere", "dangle"),
			chtimesTo("dangle", t1, t2),
		}},
	}
}

func fstatTime(h string) step {
	return step{desc: h + ".Stat().ModTime", run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		i, err := f.Stat()
		return i.ModTime.UTC().Format(time.RFC3339Nano), err
	}}
}

// readDirSteps creates entries in a shuffled order and lists them, before and after
// removing some.
func readDirSteps() []step {
	names := []string{"b", "a", "C", "ä", "a.txt", "a-b", "_x", "10", "9", ".hidden", "zz", "Z", "é", "ab", "a b"}
	for i := range 40 {
		names = append(names, fmt.Sprintf("n%02d", i))
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var steps []step
	for i, n := range names {
		if i%5 == 0 {
			steps = append(steps, mkdir(n))
		} else {
			steps = append(steps, writeFile(n, strings.Repeat("x", i)))
		}
	}
	steps = append(steps, readDir("."), readDir(names[0]), readDir(names[1]), readDir("missing"), readDir("missing/x"), readDir("./"))
	for _, n := range names[:10] {
		steps = append(steps, remove(n))
	}
	steps = append(steps, mkdir(names[0]), writeFile(names[0]+"/in", "in"), readDir("."), readDir(names[0]+"/"))
	return steps
}
