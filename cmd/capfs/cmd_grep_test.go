package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// grepTree is a tree without binary files or secrets, where GNU grep and
// capfs grep must print the same thing.
func grepTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"f.txt":        "foo bar\nbaz foo_x\nqux\nfoo\n\nFOO again\na.b and axb\nlast foo foo\n",
		"g.md":         "# foo\nno match here\nbar\n",
		"sub/h.txt":    "one foo\ntwo\nthree\nfour\nfive foo\nsix\n",
		"sub/deep/i.c": "int foo(void);\n/* bar */\n",
		"noeol.txt":    "foo at the end",
	})
	return root
}

// TestGrepLikeGNU runs GNU grep and capfs grep with the same flags on the same
// files and wants the same output and exit status.
func TestGrepLikeGNU(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("GNU grep is not installed")
	}
	if out, _ := exec.Command("grep", "--version").Output(); !strings.Contains(string(out), "GNU") {
		t.Skip("grep is not GNU grep")
	}
	root := grepTree(t)
	m := "p=physical:" + root
	// One file: the output is compared byte for byte.
	for _, args := range [][]string{
		{"-n", "foo"}, {"-w", "foo"}, {"-x", "foo"}, {"-v", "foo"}, {"-c", "foo"}, {"-o", "fo+"},
		{"-i", "FOO"}, {"-n", "-C1", "qux"}, {"-A1", "foo"}, {"-B2", "bar"}, {"-m1", "foo"},
		{"-nv", "-m2", "foo"}, {"-F", "a.b"}, {"-e", "foo", "-e", "bar"}, {"-ow", "foo"},
		{"-cv", "foo"}, {"-n", "-C1", "-m2", "foo"}, {"-H", "foo"}, {"-l", "foo"}, {"-L", "zzz"},
		{"-nA1", "-B1", "baz|six"}, {"-c", "zzz"}, {"-niw", "FOO"}, {"-o", "-i", "f"},
		{"-nx", "-e", "qux", "-e", "foo"}, {"-C", "0", "foo"}, {"-on", "o+"}, {"-n", ""},
		{"-wc", "o"}, {"-h", "foo"},
	} {
		for _, file := range []string{"f.txt", "sub/h.txt", "noeol.txt"} {
			gnu := gnuGrep(t, root, append(args, file)...)
			r := runCapfs(t, root, append(append([]string{"-m", m, "grep"}, args...), "p/"+file)...)
			want := strings.ReplaceAll(gnu.stdout, file, "p/"+file)
			if r.stdout != want || r.code != gnu.code {
				t.Errorf("grep %q %s:\ncapfs (exit %d):\n%s\nGNU grep (exit %d):\n%s\nstderr: %s", args, file, r.code, r.stdout, gnu.code, want, r.stderr)
			}
		}
	}
	// A tree: GNU grep walks in directory order, capfs in name order, so the
	// lines are compared as sets.
	for _, args := range [][]string{
		{"-rn", "foo"}, {"-rl", "foo"}, {"-rL", "foo"}, {"-rc", "foo"}, {"-rw", "foo", "--include", "*.txt"},
		{"-r", "foo", "--exclude", "*.md"}, {"-rh", "foo"}, {"-r", "--exclude-dir", "deep", "foo"},
		{"-ro", "ba."}, {"-rlv", "foo"}, {"-r", "nothing-here"},
	} {
		gnu := gnuGrep(t, root, append(args, ".")...)
		r := runCapfs(t, root, append(append([]string{"-m", m, "grep"}, args...), "p")...)
		want := strings.Split(strings.ReplaceAll(gnu.stdout, "./", "p/"), "\n")
		got := strings.Split(r.stdout, "\n")
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) || r.code != gnu.code {
			t.Errorf("grep %q:\ncapfs (exit %d):\n%s\nGNU grep (exit %d):\n%s", args, r.code, strings.Join(got, "\n"), gnu.code, strings.Join(want, "\n"))
		}
	}
}

func gnuGrep(t *testing.T, dir string, args ...string) result {
	t.Helper()
	if !slices.Contains(args, "-F") {
		args = append([]string{"-E"}, args...) // capfs grep's syntax is RE2, close to -E
	}
	cmd := exec.Command("grep", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "GREP_COLORS=", "GREP_COLOR=")
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout: string(out), code: code}
}

// TestGrepWalk checks what capfs grep searches: .gitignore honoured (also one
// above PATH), .git skipped, both changeable, symlinks not followed, every file
// once, binary files skipped, and what it reports about the rest.
func TestGrepWalk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		".gitignore":          "*.log\nbuild/\n",
		"src/a.go":            "needle in a\n",
		"src/.gitignore":      "gen_*.go\n!gen_keep.go\n",
		"src/gen_x.go":        "needle generated\n",
		"src/gen_keep.go":     "needle kept\n",
		"src/app.log":         "needle in a log\n",
		"build/out.txt":       "needle built\n",
		".git/config":         "needle in git\n",
		"bin.dat":             "needle\x00binary\n",
		"testdata/server.pem": "needle in a fixture\n",
		".env":                "needle=secret\n",
	})
	if err := os.Symlink("src", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	m := "p=physical:" + root
	r := runCapfs(t, root, "-m", m, "grep", "-l", "needle", "p").want(t, 0)
	if want := "p/src/a.go\np/src/gen_keep.go\n"; r.stdout != want {
		t.Errorf("grep -l = %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "2 paths not searched") || !strings.Contains(r.stderr, "p/.env, p/testdata/server.pem") ||
		strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--allow-test-fixtures") {
		t.Errorf("the secrets are not summarised in one line: %q", r.stderr)
	}
	// The .gitignore above PATH applies too.
	r = runCapfs(t, root, "-m", m, "grep", "-l", "needle", "p/src").want(t, 0)
	if want := "p/src/a.go\np/src/gen_keep.go\n"; r.stdout != want {
		t.Errorf("grep -l in src = %q, want %q", r.stdout, want)
	}
	// A file named explicitly is searched even when ignored.
	runCapfs(t, root, "-m", m, "grep", "-q", "needle", "p/src/app.log").want(t, 0)
	r = runCapfs(t, root, "-m", m, "grep", "-l", "--no-ignore", "needle", "p").want(t, 0)
	if want := "p/build/out.txt\np/src/a.go\np/src/app.log\np/src/gen_keep.go\np/src/gen_x.go\n"; r.stdout != want {
		t.Errorf("grep --no-ignore = %q, want %q", r.stdout, want)
	}
	r = runCapfs(t, root, "-m", m, "grep", "-lu", "-a", "--allow-test-fixtures", "needle", "p").want(t, 0)
	if want := "p/.git/config\np/bin.dat\np/build/out.txt\np/src/a.go\np/src/app.log\np/src/gen_keep.go\np/src/gen_x.go\np/testdata/server.pem\n"; r.stdout != want {
		t.Errorf("grep -u -a --allow-test-fixtures = %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "1 path not searched") {
		t.Errorf("with fixtures allowed, .env alone is refused: %q", r.stderr)
	}
	r = runCapfs(t, root, "-m", m, "--allow-secret", "p/.env", "grep", "-h", "needle", "p/.env").want(t, 0)
	if r.stdout != "needle=secret\n" || r.stderr != "" {
		t.Errorf("--allow-secret p/.env: %q / %q", r.stdout, r.stderr)
	}
	// Overlapping paths: each file once.
	r = runCapfs(t, root, "-m", m, "grep", "needle", "p/src", "p", "p/src/a.go").want(t, 0)
	if strings.Count(r.stdout, "p/src/a.go:") != 1 {
		t.Errorf("a match printed more than once:\n%s", r.stdout)
	}
	// Files over --max-filesize are named, once.
	r = runCapfs(t, root, "-m", m, "grep", "--max-filesize", "5", "needle", "p/src").want(t, 1)
	if !strings.Contains(r.stderr, "3 files larger than --max-filesize 5 not searched: p/src/.gitignore, p/src/a.go, p/src/gen_keep.go") {
		t.Errorf("too-large files are not reported: %q", r.stderr)
	}
}

// TestGrepExit checks grep's exit statuses and messages.
func TestGrepExit(t *testing.T) {
	t.Parallel()
	root := grepTree(t)
	m := "p=physical:" + root
	runCapfs(t, root, "-m", m, "grep", "foo", "p/f.txt").want(t, 0)
	runCapfs(t, root, "-m", m, "grep", "zzz", "p/f.txt").want(t, 1)
	r := runCapfs(t, root, "-m", m, "grep", "foo", "p/f.txt", "p/missing").want(t, 2)
	if !strings.Contains(r.stdout, "p/f.txt:foo bar") || r.stderr != "capfs: grep: p/missing: no such file or directory (not_found)\n" {
		t.Errorf("a match and a missing file: %q / %q", r.stdout, r.stderr)
	}
	// -q: 0 at the first match even with an error; -s hides the message.
	runCapfs(t, root, "-m", m, "grep", "-q", "foo", "p/missing", "p/f.txt").want(t, 0)
	r = runCapfs(t, root, "-m", m, "grep", "-s", "foo", "p/missing").want(t, 2)
	if r.stderr != "" {
		t.Errorf("-s printed %q", r.stderr)
	}
	for _, args := range [][]string{{"("}, {"--include", "[", "x"}, {"-A", "-2", "x"}, {"--color", "sometimes", "x"}, {}, {"--max-filesize", "lots", "x"}} {
		r := runCapfs(t, root, append([]string{"-m", m, "grep"}, args...)...).want(t, 2)
		if !strings.HasPrefix(r.stderr, "capfs: ") || strings.Contains(r.stderr, "main.") {
			t.Errorf("grep %q: stderr %q", args, r.stderr)
		}
	}
	// -m before grep is --mount, after it --max-count.
	r = runCapfs(t, root, "-m", m, "grep", "-m", "1", "foo", "p/f.txt").want(t, 0)
	if r.stdout != "foo bar\n" {
		t.Errorf("-m 1 = %q", r.stdout)
	}
	r = runCapfs(t, root, "-m", m, "grep", "-cm2", "foo", "p/f.txt").want(t, 0)
	if r.stdout != "2\n" {
		t.Errorf("-cm2 = %q", r.stdout)
	}
	// Colour: GNU grep's sequences with --color=always, none in a pipe.
	r = runCapfs(t, root, "-m", m, "grep", "--color=always", "-n", "qux", "p/f.txt").want(t, 0)
	if r.stdout != "\x1b[32m\x1b[K3\x1b[m\x1b[K\x1b[36m\x1b[K:\x1b[m\x1b[K\x1b[01;31m\x1b[Kqux\x1b[m\x1b[K\n" {
		t.Errorf("--color=always = %q", r.stdout)
	}
	r = runCapfs(t, root, "-m", m, "grep", "-n", "qux", "p/f.txt").want(t, 0)
	if r.stdout != "3:qux\n" {
		t.Errorf("colour in a pipe: %q", r.stdout)
	}
}

// TestGrepBinary checks binary files: skipped while walking (as rg), searched
// when named (as grep): "binary file matches", or counted with -c.
func TestGrepBinary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"b.bin": "needle\x00x\nneedle\n", "t.txt": "hay\n"})
	m := "p=physical:" + root
	runCapfs(t, root, "-m", m, "grep", "needle", "p").want(t, 1)
	r := runCapfs(t, root, "-m", m, "grep", "needle", "p/b.bin").want(t, 0)
	if r.stdout != "capfs: grep: p/b.bin: binary file matches (-a searches it as text)\n" {
		t.Errorf("a named binary file: %q", r.stdout)
	}
	r = runCapfs(t, root, "-m", m, "grep", "-c", "needle", "p/b.bin").want(t, 0)
	if r.stdout != "2\n" {
		t.Errorf("-c on a named binary file: %q", r.stdout)
	}
	runCapfs(t, root, "-m", m, "grep", "zzz", "p/b.bin").want(t, 1)
	r = runCapfs(t, root, "-m", m, "grep", "-a", "-n", "needle", "p").want(t, 0)
	if r.stdout != "p/b.bin:1:needle\x00x\np/b.bin:2:needle\n" {
		t.Errorf("-a: %q", r.stdout)
	}
}

// TestGrepManyFilesOrdered: the walk is parallel (the engine the MCP grep
// uses) and the output is in name order, the same at every run.
func TestGrepManyFilesOrdered(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{}
	var want []string
	for i := range 12 {
		for j := range 25 {
			p := fmt.Sprintf("d%02d/s%d/f%02d.txt", i, j%3, j)
			files[p] = fmt.Sprintf("x\nneedle %d %d\n", i, j)
			want = append(want, fmt.Sprintf("p/%s:2:needle %d %d", p, i, j))
		}
	}
	writeTree(t, root, files)
	slices.Sort(want)
	m := "p=physical:" + root
	for range 2 {
		r := runCapfs(t, root, "-m", m, "grep", "-rn", "needle", "p").want(t, 0)
		if got := strings.TrimSuffix(r.stdout, "\n"); got != strings.Join(want, "\n") {
			t.Fatalf("grep -rn over 300 files is not in name order:\n%.500s", got)
		}
	}
}

// TestGrepAuditSummary: capfs grep logs the files it read as one audit event
// per PATH (count set) and each refusal as its own event.
func TestGrepAuditSummary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a.txt": "needle\n", "b/c.txt": "needle\n", ".env": "needle\n"})
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	runCapfs(t, root, "--audit", log, "-m", "p=physical:"+root, "grep", "-r", "needle", "p").want(t, 0)
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var grep, denied, reads int
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Op      string `json:"op"`
			Path    string `json:"path"`
			Outcome string `json:"outcome"`
			Count   int    `json:"count"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		switch {
		case e.Op == "grep" && e.Path == "p" && e.Count >= 4:
			grep++
		case e.Outcome == "denied" && e.Path == "p/.env":
			denied++
		case e.Op == "read" && e.Outcome == "ok":
			reads++
		}
	}
	if grep != 1 || denied != 1 || reads != 0 {
		t.Errorf("audit log: %d grep summaries, %d refusals of .env, %d reads logged one by one; want 1, 1, 0:\n%s", grep, denied, reads, data)
	}
}
