//go:build linux

package syncback_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
	"github.com/capfs/capfs/policy"
)

// A small C project whose file names sort against the build order: the
// library (libx.a) and the program (app) sort before the objects they are
// made from, so a sync that stamped files in path order, or skipped
// identical rewrites, would leave make something to redo.
var makeProject = map[string]string{
	"Makefile": `OBJS = x1.o x2.o x3.o
app: main.o libx.a
	cc -o app main.o libx.a
libx.a: $(OBJS)
	ar rcs libx.a $(OBJS)
%.o: %.c x.h
	cc -c -o $@ $<
`,
	"x.h":    "int x1(void); int x2(void); int x3(void);\n",
	"x1.c":   "#include \"x.h\"\nint x1(void) { return 1; }\n",
	"x2.c":   "#include \"x.h\"\nint x2(void) { return 2; }\n",
	"x3.c":   "#include \"x.h\"\nint x3(void) { return 3; }\n",
	"main.c": "#include \"x.h\"\nint main(void) { return x1() + x2() + x3() - 6; }\n",
}

// TestSyncBackMakeConverges runs a real make in a bubblewrap sandbox on a
// checkout, twice, syncing back after each: after each sync the host holds
// exactly what the sandbox left, modification times included; the second run
// has nothing to do (make -q exits 0 in the sandbox and on the host) and its
// sync changes no file's time. Then a source touched in the sandbox (same bytes, new time) is
// rebuilt once and, synced back, not again.
func TestSyncBackMakeConverges(t *testing.T) {
	for _, tool := range []string{"bwrap", "make", "cc", "ar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: this test runs make in a bubblewrap sandbox (make sysdeps installs them)", tool)
		}
	}
	host := t.TempDir()
	for name, text := range makeProject {
		must(t, os.WriteFile(filepath.Join(host, name), []byte(text), 0o644))
	}
	pb, err := physical.New(host)
	must(t, err)
	defer pb.Close()
	d, _ := dir.New(pb, dir.WithPolicy(policy.Defaults()))
	jd := journalDir(t)

	// run checks the project out, runs the shell command in the sandbox, and
	// syncs back; it returns the command's exit code, its output and the report.
	run := func(script string) (int, string, *syncback.Report) {
		t.Helper()
		tr := checkout(t, d, materialize.Options{})
		var out bytes.Buffer
		r := sandbox.Default()
		res, err := r.Run(ctx, &sandbox.Launch{
			Path:   "/bin/sh",
			Args:   []string{"-c", script},
			Mounts: []sandbox.Mount{{Source: tr.Path(), Target: "/work", Writable: true}},
			Dir:    "/work",
			Stdout: &out,
			Stderr: &out,
		})
		if errors.Is(err, sandbox.ErrUnavailable) {
			t.Skipf("no working bubblewrap sandbox here: %v", err)
		}
		must(t, err)
		rep, err := syncback.Run(ctx, tr, syncback.Options{JournalDir: jd})
		if err != nil {
			t.Fatalf("SyncBack: %v\n%s", err, out.String())
		}
		// The host now has what the sandbox left, times included (the
		// kernel's coarse clock could hide wrong times from make itself).
		sameMap(t, snapOS(t, host), snapOS(t, tr.Path()))
		must(t, tr.Close())
		return res.ExitCode, out.String(), rep
	}
	hostUpToDate := func() {
		t.Helper()
		cmd := exec.Command("make", "-q")
		cmd.Dir = host
		if err := cmd.Run(); err != nil {
			t.Fatalf("make -q on the host after sync-back: %v (something would be rebuilt)", err)
		}
	}

	code, out, rep := run("make")
	if code != 0 || len(rep.Applied) != 6 {
		t.Fatalf("first make: exit %d, applied %v\n%s", code, paths(rep.Applied), out)
	}
	hostUpToDate()
	before := snapOS(t, host)

	code, out, rep = run("make -q && make")
	if code != 0 || !strings.Contains(out, "is up to date") || len(rep.Applied) != 0 || len(rep.NotApplied) != 0 {
		t.Fatalf("second make: exit %d, applied %v\n%s", code, paths(rep.Applied), out)
	}
	sameMap(t, snapOS(t, host), before)

	// A source touched in the sandbox: rebuilt once, and its new time synced.
	code, out, rep = run("touch x2.c && make")
	if code != 0 || !strings.Contains(out, "x2.c") {
		t.Fatalf("make after touch: exit %d\n%s", code, out)
	}
	k := map[string]materialize.ChangeKind{}
	for _, c := range rep.Applied {
		k[c.Path] = c.Kind
	}
	if k["x2.c"] != materialize.Touched || k["x2.o"] == "" || k["libx.a"] == "" || k["app"] == "" {
		t.Fatalf("applied %v", k)
	}
	hostUpToDate()
	before = snapOS(t, host)
	code, out, rep = run("make -q")
	if code != 0 || len(rep.Applied) != 0 {
		t.Fatalf("make -q after the rebuild: exit %d, applied %v\n%s", code, paths(rep.Applied), out)
	}
	sameMap(t, snapOS(t, host), before)
}

func paths(cs []materialize.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Kind)+" "+c.Path)
	}
	return out
}
