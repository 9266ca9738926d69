package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns the capfs command lines of the README's CLI block
// (the first ```sh block of "## The `capfs` command"), split into arguments
// as a POSIX shell would split them (quotes, trailing comments).
func readmeCommands(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "## The `capfs` command")
	if i < 0 {
		t.Fatal("README has no \"## The `capfs` command\" section")
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatal("the capfs section has no sh block")
	}
	s = s[start+len("```sh\n"):]
	s = s[:strings.Index(s, "```")]
	var cmds [][]string
	for _, line := range strings.Split(s, "\n") {
		words, err := shellSplit(line)
		if err != nil {
			t.Fatalf("README line %q: %v", line, err)
		}
		if len(words) > 0 && words[0] == "capfs" {
			cmds = append(cmds, words[1:])
		}
	}
	return cmds
}

// shellSplit splits a line into words: single and double quotes, backslash
// escapes outside single quotes, and a "#" starting a word begins a comment.
func shellSplit(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestReadmeCommands runs every capfs command of the README's CLI block, in a
// git repository with two commits, a Makefile and an uncommitted edit; each
// must exit 0. capfs run needs bubblewrap and make: without them (or without a
// working sandbox, exit 125) that line is skipped with a message.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t)
	if len(cmds) < 5 {
		t.Fatalf("found only %d capfs commands in the README: %q", len(cmds), cmds)
	}
	root := gitRepo(t, map[string]string{
		"Makefile":  "all:\n\techo built > out.txt\n",
		"main.go":   "package main\n\nfunc main() {}\n",
		"README.md": "# demo\n",
	})
	writeTree(t, root, map[string]string{"main.go": "package main\n\nfunc main() { println(1) }\n"})
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "second"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	writeTree(t, root, map[string]string{"main.go": "package main\n\nfunc main() { println(2) }\n"})
	state := t.TempDir()
	for _, args := range cmds {
		if len(args) > 0 && args[0] == "run" {
			_, errB := exec.LookPath("bwrap")
			_, errM := exec.LookPath("make")
			if errB != nil || errM != nil {
				t.Logf("skipping README line capfs %q: bubblewrap or make is not installed (make sysdeps)", args)
				continue
			}
		}
		// As written: a --mount adds to the default mounts.
		r := capfsRun(t, root, []string{"XDG_STATE_HOME=" + state}, 2*time.Minute, args)
		if args[0] == "run" && r.code == 125 {
			t.Logf("skipping README line capfs %q: no working sandbox here: %s", args, r.stderr)
			continue
		}
		if r.code != 0 {
			t.Errorf("README line capfs %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
}
