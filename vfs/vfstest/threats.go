package vfstest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// threat is one THREATS.md line (or group of lines) checked against a fresh backend.
type threat struct {
	name  string
	needs []feature
	run   func(f *fx)
}

func testThreats(t *testing.T, cfg Config) {
	t.Run("ParseGuest", testParseThreats)
	for _, th := range threats() {
		t.Run(th.name, func(t *testing.T) { th.run(newFx(t, cfg, th.needs...)) })
	}
}

// testParseThreats checks the lexical lines (1-11) at ParseGuest, where they are
// enforced before any backend sees a path.
func testParseThreats(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
		code vfs.Code
	}{
		{in: "..", code: vfs.CodeOutside},
		{in: "../", code: vfs.CodeOutside},
		{in: "a/../../x", code: vfs.CodeOutside},
		{in: "../ROOT/x", code: vfs.CodeOutside},
		{in: "../app-secret/f", code: vfs.CodeOutside},
		{in: "a\x00b", code: vfs.CodeInvalidPath},
		{in: `a\..\..\x`, code: vfs.CodeInvalidPath},
		{in: "", code: vfs.CodeInvalidPath},
		{in: strings.Repeat("n", vfs.MaxNameLen+1), code: vfs.CodeInvalidPath},
		{in: "/etc/passwd", want: "etc/passwd"},
		{in: "//x", want: "x"},
		{in: "b///././c//.//d/./", want: "b/c/d"},
		{in: "a/../a/b/../../a/b/t", want: "a/b/t"},
		{in: strings.Repeat("a/../", 2000) + "x", code: vfs.CodeInvalidPath}, // longer than MaxPathLen
		{in: strings.Repeat("a/../", 800) + "x", want: "x"},
	} {
		got, err := vfs.ParseGuest(tt.in)
		show := tt.in
		if len(show) > 30 {
			show = show[:30] + "..."
		}
		if tt.code != "" {
			if vfs.CodeOf(err) != tt.code {
				t.Errorf("ParseGuest(%q) = %q, %v; want %s", show, got, err, tt.code)
			}
		} else if err != nil || got.String() != tt.want {
			t.Errorf("ParseGuest(%q) = %q, %v; want %q", show, got, err, tt.want)
		}
	}
	// Line 10 at the parser: the trailing slash survives as the directory mark.
	for _, s := range []string{"file/", "file/.", "file//", "d/file/./"} {
		if q := vfs.MustParse(s); !q.MustBeDir() {
			t.Errorf("ParseGuest(%q).MustBeDir() = false", s)
		}
	}
	// Documented deviation: "file/.." is cleaned lexically to the root.
	if q := vfs.MustParse("file/.."); !q.IsRoot() {
		t.Errorf("ParseGuest(\"file/..\") = %q; want the root (lexical cleaning)", q)
	}
}

// seedEscapes plants the usual attack tree: an "outside" directory holding a secret
// (so a backend that re-roots or lexically trims targets would find it), links that
// leave the root, and the victim file.
func (f *fx) seedEscapes() {
	f.t.Helper()
	f.seed("outside/", "outside/secret=S", "d/", "f=F", victim+"=V")
	f.plant("/outside", "absl")
	f.plant("../outside", "rell")
	f.plant("../../outside", "d/rell")
}

func threats() []threat {
	return []threat{
		{name: "10-trailing-slash-on-file", run: threat10TrailingSlashOnFile},
		{name: "10-trailing-slash-on-link-to-file", needs: []feature{symlinks}, run: threat10TrailingSlashOnLinkToFile},
		{name: "15-16-escaping-symlinks", needs: []feature{symlinks}, run: threat1516EscapingSymlinks},
		{name: "17-intermediate-escaping-link", needs: []feature{symlinks}, run: threat17IntermediateEscapingLink},
		{name: "18-trailing-slash-after-escaping-link", needs: []feature{symlinks}, run: threat18TrailingSlashAfterEscapingLink},
		{name: "19-five-hop-chains", needs: []feature{symlinks}, run: threat19FiveHopChains},
		{name: "20-loops", needs: []feature{symlinks}, run: threat20Loops},
		{name: "21-max-symlinks", needs: []feature{symlinks}, run: threat21MaxSymlinks},
		{name: "22-dangling-links", needs: []feature{symlinks}, run: threat22DanglingLinks},
		{name: "23-create-through-dangling-link", needs: []feature{symlinks}, run: threat23CreateThroughDanglingLink},
		{name: "24-dotdot-in-target-is-physical", needs: []feature{symlinks}, run: threat24DotdotInTargetIsPhysical},
		{name: "25-link-to-parent", needs: []feature{symlinks}, run: threat25LinkToParent},
		{name: "26-escaping-symlink-creation", needs: []feature{symlinks}, run: threat26EscapingSymlinkCreation},
		{name: "27-readlink-returns-stored-text", needs: []feature{symlinks}, run: threat27ReadlinkReturnsStoredText},
		{name: "28-chmod-on-link-acts-on-target", needs: []feature{symlinks, chmod}, run: threat28ChmodOnLinkActsOnTarget},
		{name: "28-chtimes-on-link-acts-on-target", needs: []feature{symlinks, chtimes}, run: threat28ChtimesOnLinkActsOnTarget},
		{name: "29-31-hard-links", needs: []feature{hardLinks}, run: threat2931HardLinks},
		{name: "30-hard-link-through-escaping-link", needs: []feature{hardLinks, symlinks}, run: threat30HardLinkThroughEscapingLink},
	}
}

// threat10TrailingSlashOnFile is threat "10-trailing-slash-on-file".
func threat10TrailingSlashOnFile(f *fx) {
	f.seed("f=F", "d/", victim+"=V")
	f.attack("f/", "", vfs.CodeNotDir)
	f.attack("f/.", "", vfs.CodeNotDir)
	f.attack("d/../f/", "", vfs.CodeNotDir)
	f.attack("f/x", vfs.CodeNotDir, "")
	f.attack("missing/x", vfs.CodeNotFound, "")
	if got := f.read("f"); got != "F" {
		f.t.Errorf("f = %q after the attacks", got)
	}
}

// threat10TrailingSlashOnLinkToFile is threat "10-trailing-slash-on-link-to-file".
func threat10TrailingSlashOnLinkToFile(f *fx) {
	f.seed("f=F", victim+"=V", "lf -> f")
	f.attack("lf/", "", vfs.CodeNotDir)
	f.attack("lf/x", vfs.CodeNotDir, "")
}

// threat1516EscapingSymlinks is threat "15-16-escaping-symlinks".
func threat1516EscapingSymlinks(f *fx) {
	f.seedEscapes()
	f.plant("/outside/secret", "abs-in")
	f.plant("../outside/secret", "rel-in")
	for _, s := range []string{"absl", "rell", "d/rell", "abs-in", "rel-in"} {
		_, err := f.b.Stat(f.ctx, p(s))
		f.wantCode(err, vfs.CodeOutside, "Stat(%s)", s)
		_, err = ReadFile(f.ctx, f.b, p(s))
		f.wantCode(err, vfs.CodeOutside, "ReadFile(%s)", s)
		info, err := f.b.Lstat(f.ctx, p(s))
		if f.wantOK(err, "Lstat(%s)", s) && info.Mode.Type() != os.ModeSymlink {
			f.t.Errorf("Lstat(%s).Mode = %v; want a symlink", s, info.Mode)
		}
	}
	for _, s := range []string{"absl/secret", "rell/secret", "d/rell/secret"} {
		_, err := ReadFile(f.ctx, f.b, p(s))
		f.wantCode(err, vfs.CodeOutside, "ReadFile(%s)", s)
	}
}

// threat17IntermediateEscapingLink is threat "17-intermediate-escaping-link".
func threat17IntermediateEscapingLink(f *fx) {
	f.seedEscapes()
	for _, s := range []string{"absl/secret", "rell/secret", "d/rell/secret", "absl/new", "rell/new/x", "d/rell/d"} {
		f.attack(s, vfs.CodeOutside, "")
	}
}

// threat18TrailingSlashAfterEscapingLink is threat "18-trailing-slash-after-escaping-link".
func threat18TrailingSlashAfterEscapingLink(f *fx) {
	f.seedEscapes()
	for _, s := range []string{"absl/", "rell/", "d/rell/", "absl/."} {
		f.attack(s, "", vfs.CodeOutside)
	}
}

// threat19FiveHopChains is threat "19-five-hop-chains".
func threat19FiveHopChains(f *fx) {
	f.mkdir("outside")
	f.write("outside/t", "OUT")
	for bad := 0; bad <= 5; bad++ {
		// vK/c1/h1 -> ../c2/h2 -> ... -> ../c5/h5 -> ../t; hop "bad" escapes.
		v := fmt.Sprintf("v%d", bad)
		f.mkdir(v)
		f.write(v+"/t", "IN")
		for i := 1; i <= 5; i++ {
			target := fmt.Sprintf("../c%d/h%d", i+1, i+1)
			if i == 5 {
				target = "../t"
			}
			f.mkdir(fmt.Sprintf("%s/c%d", v, i))
			if i == bad {
				f.plant("../../../outside/t", fmt.Sprintf("%s/c%d/h%d", v, i, i))
			} else {
				f.symlink(target, fmt.Sprintf("%s/c%d/h%d", v, i, i))
			}
		}
		head := v + "/c1/h1"
		data, err := ReadFile(f.ctx, f.b, p(head))
		if bad == 0 {
			if f.wantOK(err, "ReadFile(%s) through an all-inside chain", head) && string(data) != "IN" {
				f.t.Errorf("ReadFile(%s) = %q; want IN", head, data)
			}
		} else {
			f.wantCode(err, vfs.CodeOutside, "ReadFile(%s), hop %d escapes", head, bad)
			_, err = f.b.Stat(f.ctx, p(head))
			f.wantCode(err, vfs.CodeOutside, "Stat(%s), hop %d escapes", head, bad)
		}
	}
}

// threat20Loops is threat "20-loops".
func threat20Loops(f *fx) {
	f.seed(victim+"=V", "self -> self", "p1 -> p2", "p2 -> p1", "d1/", "d2/",
		"d1/l -> ../d2/l", "d2/l -> ../d1/l", "ld -> ld/x", "sl -> ./sl/")
	for _, s := range []string{"self", "p1", "d1/l", "ld", "sl"} {
		f.attack(s+"/", "", vfs.CodeTooManyLinks)
		f.attack(s+"/x", vfs.CodeTooManyLinks, "")
		_, err := f.b.Stat(f.ctx, p(s))
		f.wantCode(err, vfs.CodeTooManyLinks, "Stat(%s)", s)
		err = f.create(s, 0)
		f.wantCode(err, vfs.CodeTooManyLinks, "OpenFile(%s, O_CREATE)", s)
		_, err = f.b.Lstat(f.ctx, p(s))
		f.wantOK(err, "Lstat(%s) does not follow the loop", s)
	}
}

// threat21MaxSymlinks is threat "21-max-symlinks".
func threat21MaxSymlinks(f *fx) {
	f.write("t", "T")
	for _, n := range []int{vfs.MaxSymlinks, vfs.MaxSymlinks + 1} {
		dir := fmt.Sprintf("c%d", n)
		f.mkdir(dir)
		for i := 1; i <= n; i++ {
			target := fmt.Sprintf("l%d", i+1)
			if i == n {
				target = "../t"
			}
			f.symlink(target, fmt.Sprintf("%s/l%d", dir, i))
		}
		head := dir + "/l1"
		data, err := ReadFile(f.ctx, f.b, p(head))
		if n <= vfs.MaxSymlinks {
			if f.wantOK(err, "a chain of %d links (MaxSymlinks)", n) && string(data) != "T" {
				f.t.Errorf("chain of %d: read %q", n, data)
			}
		} else {
			f.wantCode(err, vfs.CodeTooManyLinks, "a chain of %d links (MaxSymlinks+1)", n)
		}
	}
	// Intermediate links count too.
	f.symlink(".", "s")
	ok := strings.Repeat("s/", vfs.MaxSymlinks) + "t"
	_, err := f.b.Stat(f.ctx, p(ok))
	f.wantOK(err, "Stat through %d intermediate links", vfs.MaxSymlinks)
	_, err = f.b.Stat(f.ctx, p("s/"+ok))
	f.wantCode(err, vfs.CodeTooManyLinks, "Stat through %d intermediate links", vfs.MaxSymlinks+1)
}

// threat22DanglingLinks is threat "22-dangling-links".
func threat22DanglingLinks(f *fx) {
	f.seed("d/", "dangle -> nowhere", "dd1 -> dd2", "dd2 -> dd3/missing/x", "dd3 -> d")
	for _, s := range []string{"dangle", "dd1", "dd2"} {
		_, err := ReadFile(f.ctx, f.b, p(s))
		f.wantCode(err, vfs.CodeNotFound, "ReadFile(%s)", s)
		_, err = f.b.Stat(f.ctx, p(s))
		f.wantCode(err, vfs.CodeNotFound, "Stat(%s)", s)
	}
	before := f.snapshot()
	f.wantCode(f.b.Mkdir(f.ctx, p("dangle"), 0o755), vfs.CodeExists, "Mkdir(dangle)")
	f.wantCode(f.b.Mkdir(f.ctx, p("dangle/x"), 0o755), vfs.CodeNotFound, "Mkdir(dangle/x)")
	if err := MkdirAll(f.ctx, f.b, p("dangle/x/y"), 0o755); err == nil {
		f.t.Error("MkdirAll(dangle/x/y) succeeded through a dangling link")
	}
	if err := MkdirAll(f.ctx, f.b, p("dd1/y"), 0o755); err == nil {
		f.t.Error("MkdirAll(dd1/y) succeeded through a deep dangling chain")
	}
	if after := f.snapshot(); after != before {
		f.t.Errorf("mkdir through dangling links changed the tree:\n%s\nwant:\n%s", after, before)
	}
}

// threat23CreateThroughDanglingLink is threat "23-create-through-dangling-link".
func threat23CreateThroughDanglingLink(f *fx) {
	// Pinned policy (like Go's os): O_CREATE through a dangling link that
	// stays inside creates the target; O_EXCL refuses the existing link.
	f.seed("d/", "dangle-in -> inside", "dangle-in2 -> d/inside2")
	f.wantCode(f.create("dangle-in", os.O_EXCL), vfs.CodeExists, "OpenFile(dangle-in, O_CREATE|O_EXCL)")
	if f.exists("inside") {
		f.t.Error("O_CREATE|O_EXCL through a dangling link created its target")
	}
	h, err := f.b.OpenFile(f.ctx, p("dangle-in"), os.O_WRONLY|os.O_CREATE, 0o644)
	if f.wantOK(err, "OpenFile(dangle-in, O_CREATE)") {
		h.Write([]byte("via link"))
		h.Close()
		if got := f.read("inside"); got != "via link" {
			f.t.Errorf("inside = %q; want the data written through dangle-in", got)
		}
	}
	f.wantOK(f.create("dangle-in2", 0), "OpenFile(dangle-in2, O_CREATE)")
	f.wantNames("d", "inside2")

	// Escaping dangling links: nothing is created, inside or outside a Sub.
	f.seed("outside/", "box/", "box/dangle -> ../outside/new")
	sub, err := f.b.Sub(f.ctx, p("box"))
	if !f.wantOK(err, "Sub(box)") {
		return
	}
	sf := f.on(sub)
	before := f.snapshot()
	sf.wantCode(sf.create("dangle", 0), vfs.CodeOutside, "Sub(box).OpenFile(dangle -> ../outside/new, O_CREATE)")
	if after := f.snapshot(); after != before {
		f.t.Fatalf("O_CREATE through Sub(box)/dangle changed the tree:\n%s\nwant:\n%s", after, before)
	}
	f.plant("/outside/new", "box/dangle-abs")
	f.plant("../box/../../outside/new", "box/deep")
	f.plant("../outside/new", "dangle-out")
	f.plant("/outside/new", "dangle-abs")
	before = f.snapshot()
	for _, s := range []string{"dangle", "dangle-abs", "deep"} {
		sf.wantCode(sf.create(s, 0), vfs.CodeOutside, "Sub(box).OpenFile(%s, O_CREATE)", s)
	}
	for _, s := range []string{"dangle-out", "dangle-abs"} {
		for _, flag := range []int{0, os.O_TRUNC, os.O_APPEND} {
			f.wantCode(f.create(s, flag), vfs.CodeOutside, "OpenFile(%s, %s)", s, flagString(os.O_WRONLY|os.O_CREATE|flag))
		}
		// O_EXCL never follows: the link itself exists.
		f.wantCode(f.create(s, os.O_EXCL), vfs.CodeExists, "OpenFile(%s, O_CREATE|O_EXCL)", s)
	}
	if after := f.snapshot(); after != before {
		f.t.Errorf("O_CREATE through escaping dangling links changed the tree:\n%s\nwant:\n%s", after, before)
	}
	f.wantNames("outside")
}

// threat24DotdotInTargetIsPhysical is threat "24-dotdot-in-target-is-physical".
func threat24DotdotInTargetIsPhysical(f *fx) {
	f.seed("b/", "b/c/", "b/t=B/T", "a -> b/c", "x -> a/../t", "b/c/y -> ../../a/../t")
	for _, s := range []string{"x", "b/c/y"} {
		if got := f.read(s); got != "B/T" {
			f.t.Errorf("ReadFile(%s) = %q; want b/t (\"..\" after a link is physical)", s, got)
		}
	}
	// The guest path itself is lexical: a/../t is t, which does not exist.
	q := vfs.MustParse("a/../t")
	if q.String() != "t" {
		f.t.Errorf("ParseGuest(a/../t) = %q; want t", q)
	}
	_, err := f.b.Stat(f.ctx, q)
	f.wantCode(err, vfs.CodeNotFound, "Stat(a/../t)")
	// Through a Sub, ".." in a target cannot leave the sub.
	f.symlink("c/../../t2", "b/esc")
	sub, err := f.b.Sub(f.ctx, p("b"))
	if f.wantOK(err, "Sub(b)") {
		_, err := sub.Stat(f.ctx, p("esc"))
		f.wantCode(err, vfs.CodeOutside, "Sub(b).Stat(esc -> c/../../t2)")
	}
}

// threat25LinkToParent is threat "25-link-to-parent".
func threat25LinkToParent(f *fx) {
	f.seed("d/", "d/d -> ..")
	f.wantOK(f.b.Mkdir(f.ctx, p("d/d/new"), 0o755), "Mkdir(d/d/new)")
	f.wantNames(".", "d", "new")
	f.wantNames("d", "d")
	f.write("d/d/d/d/d/f", "F")
	f.wantNames(".", "d", "new")
	f.wantNames("d", "d", "f")
	_, err := f.b.Stat(f.ctx, p("d/d/d/d/d/d/d"))
	f.wantOK(err, "Stat(d/d/d/d/d/d/d)")
}

// threat26EscapingSymlinkCreation is threat "26-escaping-symlink-creation".
func threat26EscapingSymlinkCreation(f *fx) {
	f.seed("d/", "d/e/")
	before := f.snapshot()
	for _, tt := range [][2]string{
		{"/etc/passwd", "x"}, {"/", "x"}, {"..", "x"}, {"../x", "x"}, {"d/../../x", "x"},
		{"../../x", "d/x"}, {"../../../x", "d/e/x"}, {"e/../../../x", "d/x"},
	} {
		err := f.b.Symlink(f.ctx, tt[0], p(tt[1]))
		if !f.cfg.RejectsEscapingSymlinks {
			// Stored verbatim; confinement happens when it is followed.
			if f.wantOK(err, "Symlink(%q, %s)", tt[0], tt[1]) {
				_, err := f.b.Stat(f.ctx, p(tt[1]))
				f.wantCode(err, vfs.CodeOutside, "Stat(%s -> %q)", tt[1], tt[0])
				f.wantOK(f.b.Remove(f.ctx, p(tt[1])), "Remove(%s)", tt[1])
			}
			continue
		}
		f.wantCode(err, vfs.CodeOutside, "Symlink(%q, %s) with Config.RejectsEscapingSymlinks", tt[0], tt[1])
	}
	if after := f.snapshot(); after != before {
		f.t.Errorf("the tree changed:\n%s\nwant:\n%s", after, before)
	}
	// Targets that stay inside are always accepted.
	for _, tt := range [][2]string{{"d/e", "in1"}, {"..", "d/in2"}, {"../../d", "d/e/in3"}, {"missing/../d", "in4"}} {
		f.wantOK(f.b.Symlink(f.ctx, tt[0], p(tt[1])), "Symlink(%q, %s)", tt[0], tt[1])
	}
}

// threat27ReadlinkReturnsStoredText is threat "27-readlink-returns-stored-text".
func threat27ReadlinkReturnsStoredText(f *fx) {
	for i, target := range []string{"../x/./y//z", "/outside", "a", "./a/", "..", ".", "sp ace/ünï", strings.Repeat("../", 50) + "x", "x/../y"} {
		name := fmt.Sprintf("l%d", i)
		escapes := strings.HasPrefix(target, "/") || strings.HasPrefix(target, "..")
		if escapes && f.cfg.RejectsEscapingSymlinks {
			f.wantCode(f.b.Symlink(f.ctx, target, p(name)), vfs.CodeOutside, "Symlink(%q) with Config.RejectsEscapingSymlinks", target)
			continue
		}
		f.symlink(target, name)
		got, err := f.b.Readlink(f.ctx, p(name))
		if f.wantOK(err, "Readlink(%s)", name) && got != target {
			f.t.Errorf("Readlink(%s) = %q; want the stored %q", name, got, target)
		}
		info, err := f.b.Lstat(f.ctx, p(name))
		if f.wantOK(err, "Lstat(%s)", name) && info.Size != int64(len(target)) {
			f.t.Errorf("Lstat(%s).Size = %d; want the target length %d", name, info.Size, len(target))
		}
	}
	f.mkdir("d")
	f.symlink("../rel", "d/l")
	got, err := f.b.Readlink(f.ctx, p("d/l"))
	if f.wantOK(err, "Readlink(d/l)") && got != "../rel" {
		f.t.Errorf("Readlink(d/l) = %q; want ../rel", got)
	}
	sub, err := f.b.Sub(f.ctx, p("d"))
	if f.wantOK(err, "Sub(d)") {
		got, err := sub.Readlink(f.ctx, p("l"))
		if f.wantOK(err, "Sub(d).Readlink(l)") && got != "../rel" {
			f.t.Errorf("Sub(d).Readlink(l) = %q; want ../rel", got)
		}
	}
}

// threat28ChmodOnLinkActsOnTarget is threat "28-chmod-on-link-acts-on-target".
func threat28ChmodOnLinkActsOnTarget(f *fx) {
	f.seed("f=F", "lf -> f")
	f.wantOK(f.b.Chmod(f.ctx, p("lf"), 0o600), "Chmod(lf)")
	if info, err := f.b.Stat(f.ctx, p("f")); f.wantOK(err, "Stat(f)") && info.Mode.Perm() != 0o600 {
		f.t.Errorf("Stat(f).Mode = %v after Chmod(lf, 0600)", info.Mode)
	}
	if info, err := f.b.Lstat(f.ctx, p("lf")); f.wantOK(err, "Lstat(lf)") && info.Mode.Type() != os.ModeSymlink {
		f.t.Errorf("Lstat(lf).Mode = %v; Chmod must not replace the link", info.Mode)
	}
	f.seedEscapes()
	for _, s := range []string{"absl", "rell", "d/rell"} {
		f.wantCode(f.b.Chmod(f.ctx, p(s), 0o600), vfs.CodeOutside, "Chmod(%s)", s)
	}
}

// threat28ChtimesOnLinkActsOnTarget is threat "28-chtimes-on-link-acts-on-target".
func threat28ChtimesOnLinkActsOnTarget(f *fx) {
	f.seed("f=F", "lf -> f")
	f.wantOK(f.b.Chtimes(f.ctx, p("lf"), t1, t2), "Chtimes(lf)")
	if info, err := f.b.Stat(f.ctx, p("f")); f.wantOK(err, "Stat(f)") && !info.ModTime.Equal(t2) {
		f.t.Errorf("Stat(f).ModTime = %v after Chtimes(lf, _, %v)", info.ModTime, t2)
	}
	f.seedEscapes()
	for _, s := range []string{"absl", "rell"} {
		f.wantCode(f.b.Chtimes(f.ctx, p(s), t1, t2), vfs.CodeOutside, "Chtimes(%s)", s)
	}
}

// threat2931HardLinks is threat "29-31-hard-links".
func threat2931HardLinks(f *fx) {
	f.seed("f=one", "other=x")
	f.wantOK(f.b.Link(f.ctx, p("f"), p("g")), "Link(f, g)")
	h, err := f.b.OpenFile(f.ctx, p("g"), os.O_WRONLY|os.O_APPEND, 0)
	if f.wantOK(err, "OpenFile(g)") {
		h.Write([]byte("+two"))
		h.Close()
	}
	if got := f.read("f"); got != "one+two" {
		f.t.Errorf("f = %q; a write through hard link g must show in f", got)
	}
	fi, err1 := f.b.Stat(f.ctx, p("f"))
	gi, err2 := f.b.Stat(f.ctx, p("g"))
	oi, err3 := f.b.Stat(f.ctx, p("other"))
	if err1 == nil && err2 == nil && err3 == nil {
		if fi.Nlink != 2 || gi.Nlink != 2 || oi.Nlink != 1 {
			f.t.Errorf("Nlink: f=%d g=%d other=%d; want 2 2 1", fi.Nlink, gi.Nlink, oi.Nlink)
		}
		if fi.ID != 0 && (fi.ID != gi.ID || fi.ID == oi.ID) {
			f.t.Errorf("ID: f=%d g=%d other=%d; hard links share an ID, other files do not", fi.ID, gi.ID, oi.ID)
		}
	}
}

// threat30HardLinkThroughEscapingLink is threat "30-hard-link-through-escaping-link".
func threat30HardLinkThroughEscapingLink(f *fx) {
	f.seedEscapes()
	before := f.snapshot()
	for _, tt := range [][2]string{
		{"absl/secret", "y"}, {"rell/secret", "y"}, {"d/rell/secret", "d/y"},
		{"f", "rell/y"}, {"f", "absl/y"}, {"f", "d/rell/y"},
	} {
		err := f.b.Link(f.ctx, p(tt[0]), p(tt[1]))
		f.wantCode(err, vfs.CodeOutside, "Link(%s, %s)", tt[0], tt[1])
	}
	if after := f.snapshot(); after != before {
		f.t.Errorf("escaping Link changed the tree:\n%s\nwant:\n%s", after, before)
	}
}
