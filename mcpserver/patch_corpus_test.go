package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// TestStressPatchCorpus compares apply_patch with git apply on patches git diff
// makes from real history: this repository's own commits, and random edits
// (line inserts, deletes and changes, CRLF and mixed line ends, missing final
// newlines, blank lines, duplicated blocks, adjacent hunks, renames, mode
// changes, adds, deletes, quoted names) committed over a copy of part of Go's
// source tree. Each patch is applied to its preimage by git apply in one
// directory and by the tool's engine in a capfs Dir (memory backend, some on the
// physical one), once as the unified diff and once converted to the Begin Patch
// format: the results must be the same bytes and executable bits, or both must
// refuse (and a refusal must leave the Dir as it was). A Begin Patch found
// ambiguous is made again from git diff with more context, as a model would be
// told to do. A few hundred patches normally; thousands with CAPFS_STRESS=1.
func TestStressPatchCorpus(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	historyN, editsN := 40, 160
	if os.Getenv("CAPFS_STRESS") != "" {
		historyN, editsN = 1<<30, 3000
	}
	if testing.Short() {
		historyN, editsN = 10, 40
	}
	h := newCorpus(t, gitPath)
	start := time.Now()
	h.history(historyN)
	t.Logf("history: %d patches in %v", h.compared, time.Since(start).Round(time.Millisecond))
	start, before := time.Now(), h.compared
	h.randomEdits(editsN)
	t.Logf("random edits: %d patches in %v", h.compared-before, time.Since(start).Round(time.Millisecond))
	if h.compared < 10 {
		t.Fatalf("only %d patches compared", h.compared)
	}
	t.Logf("patch corpus: %d patches compared with git apply, %d disagreements "+
		"(%d as unified diffs: %d same result, %d both refused; %d converted to Begin Patch: %d same result, %d both refused, %d made again with more context; %d not expressible)",
		h.compared+h.beginCompared, h.disagreements, h.compared, h.same, h.bothRefused,
		h.beginCompared, h.beginSame, h.beginBothRefused, h.beginMoreContext, h.beginSkipped)
	t.Logf("shifted preimages (lines added at the top of each updated file): %d patches; apply_patch (unified): %v; "+
		"apply_patch (Begin Patch): %v; git apply: %v", h.shifted, h.shiftOurs, h.shiftBegin, h.shiftGit)
	if h.shiftOurs.wrong+h.shiftBegin.wrong > 0 {
		t.Errorf("apply_patch applied %d shifted patches at a wrong place", h.shiftOurs.wrong+h.shiftBegin.wrong)
	}
}

// shiftTally counts how one applier did on shifted preimages.
type shiftTally struct{ right, refused, wrong int }

func (s *shiftTally) count(out tree, err error, want tree) bool {
	switch {
	case err != nil:
		s.refused++
	case sameTree(out, want, true):
		s.right++
	default:
		s.wrong++
		return false
	}
	return true
}

func (s shiftTally) String() string {
	return fmt.Sprintf("%d right, %d refused, %d wrong", s.right, s.refused, s.wrong)
}

// corpusFile is one regular file of a tree.
type corpusFile struct {
	data string
	exec bool
}

type tree map[string]corpusFile

type corpus struct {
	t    *testing.T
	git  string
	base string   // scratch directory
	env  []string // git's environment: no user or system configuration
	seq  int
	// unidiffZero has git apply read -U0 patches with --unidiff-zero: plain git
	// apply moves a hunk without context to the end of the file.
	unidiffZero bool
	lastPre     tree // the preimage being compared, for CAPFS_PATCH_CORPUS_DUMP

	compared, same, bothRefused, disagreements                                 int
	shifted                                                                    int
	shiftOurs, shiftBegin, shiftGit                                            shiftTally
	beginCompared, beginSame, beginBothRefused, beginMoreContext, beginSkipped int
}

func newCorpus(t *testing.T, gitPath string) *corpus {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C", "TZ=UTC",
		"GIT_CEILING_DIRECTORIES=" + base, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_AUTHOR_DATE=2020-01-01T00:00:00Z",
		"GIT_COMMITTER_DATE=2020-01-01T00:00:00Z", "PATH=" + os.Getenv("PATH")}
	return &corpus{t: t, git: gitPath, base: base, env: env}
}

// gitIn runs git in dir (with fixed settings) and returns its standard output.
func (h *corpus) gitIn(dir string, stdin []byte, args ...string) ([]byte, error) {
	args = append([]string{"-c", "core.autocrlf=false", "-c", "core.quotepath=true", "-c", "diff.renames=true",
		"-c", "diff.noprefix=false", "-c", "diff.mnemonicprefix=false", "-c", "core.filemode=true"}, args...)
	cmd := exec.Command(h.git, args...)
	cmd.Dir, cmd.Env = dir, h.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %v: %s", strings.Join(args[12:], " "), err, clip(stderr.String(), 2000))
	}
	return out, nil
}

func (h *corpus) mustGit(dir string, args ...string) []byte {
	h.t.Helper()
	out, err := h.gitIn(dir, nil, args...)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// rawEntry is one line of git diff --raw -z --no-abbrev.
type rawEntry struct {
	oldMode, newMode uint32
	oldSHA, newSHA   string
	status           byte
	oldPath, newPath string
}

func parseRaw(b []byte) ([]rawEntry, error) {
	if len(b) == 0 {
		return nil, nil
	}
	fields := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	var out []rawEntry
	for i := 0; i < len(fields); {
		head := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(head) != 5 || i+1 >= len(fields) {
			return nil, fmt.Errorf("bad raw entry %q", fields[i])
		}
		om, _ := strconv.ParseUint(head[0], 8, 32)
		nm, _ := strconv.ParseUint(head[1], 8, 32)
		e := rawEntry{oldMode: uint32(om), newMode: uint32(nm), oldSHA: head[2], newSHA: head[3], status: head[4][0],
			oldPath: fields[i+1], newPath: fields[i+1]}
		i += 2
		if e.status == 'R' || e.status == 'C' {
			if i >= len(fields) {
				return nil, errors.New("truncated raw rename")
			}
			e.newPath = fields[i]
			i++
		}
		out = append(out, e)
	}
	return out, nil
}

// catFile reads blobs through one git cat-file --batch process.
type catFile struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func (h *corpus) catFile(repo string) *catFile {
	cmd := exec.Command(h.git, "cat-file", "--batch")
	cmd.Dir, cmd.Env = repo, h.env
	in, err := cmd.StdinPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	c := &catFile{cmd: cmd, in: in, out: bufio.NewReader(out)}
	h.t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return c
}

func (c *catFile) blob(sha string) (string, error) {
	if _, err := io.WriteString(c.in, sha+"\n"); err != nil {
		return "", err
	}
	head, err := c.out.ReadString('\n')
	if err != nil {
		return "", err
	}
	f := strings.Fields(head)
	if len(f) != 3 || f[1] != "blob" {
		return "", fmt.Errorf("cat-file: %q", head)
	}
	n, _ := strconv.Atoi(f[2])
	buf := make([]byte, n+1)
	if _, err := io.ReadFull(c.out, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// trees returns the preimage and postimage of a raw diff.
func (h *corpus) trees(cf *catFile, entries []rawEntry) (pre, post tree, err error) {
	pre, post = tree{}, tree{}
	for _, e := range entries {
		if e.status != 'A' {
			if e.oldMode&0o170000 != 0o100000 {
				return nil, nil, fmt.Errorf("%s: mode %o", e.oldPath, e.oldMode)
			}
			data, err := cf.blob(e.oldSHA)
			if err != nil {
				return nil, nil, err
			}
			pre[e.oldPath] = corpusFile{data, e.oldMode&0o111 != 0}
		}
		if e.status != 'D' {
			if e.newMode&0o170000 != 0o100000 {
				return nil, nil, fmt.Errorf("%s: mode %o", e.newPath, e.newMode)
			}
			data, err := cf.blob(e.newSHA)
			if err != nil {
				return nil, nil, err
			}
			post[e.newPath] = corpusFile{data, e.newMode&0o111 != 0}
		}
	}
	return pre, post, nil
}

// history compares the patches of up to n commits of this repository's history
// (read-only: git diff and cat-file on the repository).
func (h *corpus) history(n int) {
	top, err := h.gitIn(".", nil, "rev-parse", "--show-toplevel")
	if err != nil {
		h.t.Logf("not in a git repository, history part skipped: %v", err)
		return
	}
	repo := strings.TrimSpace(string(top))
	out, err := h.gitIn(repo, nil, "log", "--format=%H %P", "--no-merges", "-n", strconv.Itoa(n))
	if err != nil {
		h.t.Logf("no history: %v", err)
		return
	}
	cf := h.catFile(repo)
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		parent := "4b825dc642cb6eb9a060e54bf8d69288fbee4904" // the empty tree
		if len(f) > 1 {
			parent = f[1]
		}
		h.compareRevs(repo, cf, parent, f[0], "history "+f[0][:12], nil)
	}
}

// compareRevs compares the patch between two revisions of repo; exclude are
// pathspecs left out of the diff.
func (h *corpus) compareRevs(repo string, cf *catFile, a, b, name string, exclude []string) {
	diffArgs := func(extra ...string) []string {
		args := append([]string{"diff", "--no-textconv", "--no-ext-diff", "--no-color", "-M"}, extra...)
		args = append(args, a, b, "--")
		if len(exclude) > 0 {
			args = append(args, ".")
		}
		return append(args, exclude...)
	}
	raw, err := h.gitIn(repo, nil, diffArgs("--raw", "-z", "--no-abbrev")...)
	if err != nil {
		h.t.Fatal(err)
	}
	entries, err := parseRaw(raw)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(entries) == 0 {
		return
	}
	pre, post, err := h.trees(cf, entries)
	if err != nil {
		h.t.Logf("%s skipped: %v", name, err) // a symlink or submodule
		return
	}
	patch, err := h.gitIn(repo, nil, diffArgs()...)
	if err != nil {
		h.t.Fatal(err)
	}
	withContext := func(n int) string {
		out, err := h.gitIn(repo, nil, diffArgs("-U"+strconv.Itoa(n))...)
		if err != nil {
			h.t.Fatal(err)
		}
		return string(out)
	}
	binary := h.compare(name, string(patch), pre, post, withContext, false)
	if len(binary) > 0 && exclude == nil {
		// Once more without the binary files, which both refuse.
		var ex []string
		for _, p := range binary {
			ex = append(ex, ":(exclude,literal)"+p)
		}
		h.compareRevs(repo, cf, a, b, name+" (text files)", ex)
	}
}

// compare applies patch to pre with git apply and with the tool (as the unified
// diff and converted to Begin Patch) and counts agreements; it returns the
// names of binary files the patch holds.
func (h *corpus) compare(name, patch string, pre, post tree, withContext func(int) string, shift bool) (binary []string) {
	t := h.t
	t.Helper()
	h.seq++
	for line := range strings.SplitSeq(patch, "\n") {
		if rest, ok := strings.CutPrefix(line, "Binary files "); ok {
			if a, b, ok := strings.Cut(strings.TrimSuffix(rest, " differ"), " and "); ok {
				for _, p := range []string{a, b} {
					if p != "/dev/null" {
						binary = append(binary, stripPrefix(p))
					}
				}
			}
		}
	}
	h.lastPre = pre
	gitOut, gitErr := h.gitApply(pre, patch)
	if gitErr == nil && !sameTree(gitOut, post, true) {
		for p := range union(gitOut, post) {
			g, gok := gitOut[p]
			w, wok := post[p]
			if g != w || gok != wok {
				t.Logf("%s: git %v %+v, want %v %+v", p, gok, clipFile(g), wok, clipFile(w))
			}
		}
		t.Fatalf("%s: git apply's result differs from the postimage (harness error)\n%s", name, clip(patch, 3000))
	}
	physicalBackend := h.seq%7 == 0
	ourOut, ourErr := h.toolApply(pre, patch, physicalBackend)
	h.compared++
	switch {
	case gitErr != nil && ourErr != nil:
		h.bothRefused++
	case gitErr == nil && ourErr == nil && sameTree(gitOut, ourOut, true):
		h.same++
	default:
		h.disagree(name, "unified", patch, gitErr, ourErr, gitOut, ourOut)
	}

	// The same patch in the Begin Patch format.
	files, err := parseUnified(patch)
	if err != nil {
		h.beginSkipped++
		return binary
	}
	begin, modesKept := toBeginPatch(files)
	if begin == "" {
		h.beginSkipped++
		return binary
	}
	out, err := h.toolApply(pre, begin, physicalBackend)
	if err != nil && gitErr == nil && strings.Contains(err.Error(), "ambiguous") {
		for _, n := range []int{10, 40, 200, 1 << 20} {
			files, perr := parseUnified(withContext(n))
			if perr != nil {
				t.Fatalf("%s: -U%d: %v", name, n, perr)
			}
			begin, _ = toBeginPatch(files)
			if out, err = h.toolApply(pre, begin, physicalBackend); err == nil || !strings.Contains(err.Error(), "ambiguous") {
				break
			}
		}
		h.beginMoreContext++
	}
	h.beginCompared++
	switch {
	case gitErr != nil && err != nil:
		h.beginBothRefused++
	case gitErr == nil && err == nil && sameTree(gitOut, out, modesKept):
		h.beginSame++
	default:
		h.disagree(name, "Begin Patch", begin, gitErr, err, gitOut, out)
	}
	if shift && gitErr == nil && modesKept {
		h.compareShifted(name, patch, begin, pre, post)
	}
	return binary
}

// compareShifted applies patch and begin to pre with a few lines added at the
// top of each file the patch updates in place, where the right result is post
// with the same lines added. git apply finds a hunk near its line number;
// apply_patch must find the right place or refuse, never apply elsewhere.
func (h *corpus) compareShifted(name, patch, begin string, pre, post tree) {
	h.t.Helper()
	spre, want := tree{}, tree{}
	maps.Copy(spre, pre)
	maps.Copy(want, post)
	n := 0
	for p, f := range pre {
		if g, ok := post[p]; ok {
			var top strings.Builder
			for k := 0; k <= h.seq%4; k++ {
				fmt.Fprintf(&top, "shifted %d\n", k)
			}
			spre[p] = corpusFile{top.String() + f.data, f.exec}
			want[p] = corpusFile{top.String() + g.data, g.exec}
			n++
		}
	}
	if n == 0 {
		return
	}
	h.shifted++
	h.lastPre = spre
	gitOut, gitErr := h.gitApply(spre, patch)
	h.shiftGit.count(gitOut, gitErr, want)
	out, err := h.toolApply(spre, patch, false)
	if !h.shiftOurs.count(out, err, want) {
		h.disagree(name+" shifted", "unified", patch, nil, err, want, out)
	}
	out, err = h.toolApply(spre, begin, false)
	if !h.shiftBegin.count(out, err, want) {
		h.disagree(name+" shifted", "Begin Patch", begin, nil, err, want, out)
	}
}

func (h *corpus) disagree(name, form, patch string, gitErr, ourErr error, gitOut, ourOut tree) {
	h.t.Helper()
	h.disagreements++
	if h.disagreements > 10 {
		return
	}
	var diffs []string
	for p := range union(gitOut, ourOut) {
		g, gok := gitOut[p]
		o, ook := ourOut[p]
		if gok != ook || g != o {
			// Show both from a little before the first byte that differs.
			at := 0
			for at < len(g.data) && at < len(o.data) && g.data[at] == o.data[at] {
				at++
			}
			from := max(0, strings.LastIndex(g.data[:at], "\n")-200)
			diffs = append(diffs, fmt.Sprintf("%s (exec %v/%v) differs at byte %d: git %v %q, ours %v %q", p, g.exec, o.exec, at,
				gok, clip(g.data[from:], 400), ook, clip(o.data[from:], 400)))
		}
	}
	if d := os.Getenv("CAPFS_PATCH_CORPUS_DUMP"); d != "" {
		// The case, to replay by hand: the patch and the preimage's files.
		dump := filepath.Join(d, fmt.Sprintf("case%d", h.disagreements))
		_ = os.MkdirAll(dump, 0o755)
		_ = os.WriteFile(filepath.Join(dump, "patch"), []byte(patch), 0o644)
		for p, f := range h.lastPre {
			full := filepath.Join(dump, "pre", filepath.FromSlash(p))
			_ = os.MkdirAll(filepath.Dir(full), 0o755)
			_ = os.WriteFile(full, []byte(f.data), 0o644)
		}
	}
	sort.Strings(diffs)
	h.t.Errorf("%s (%s): git apply: %v; apply_patch: %v\n%s\npatch:\n%s", name, form, gitErr, ourErr,
		strings.Join(diffs, "\n"), clip(patch, 3000))
}

func union(a, b tree) map[string]bool {
	u := map[string]bool{}
	for p := range a {
		u[p] = true
	}
	for p := range b {
		u[p] = true
	}
	return u
}

// sameTree compares two trees' files, and their executable bits when modes is set.
func sameTree(a, b tree, modes bool) bool {
	if len(a) != len(b) {
		return false
	}
	for p, f := range a {
		g, ok := b[p]
		if !ok || f.data != g.data || (modes && f.exec != g.exec) {
			return false
		}
	}
	return true
}

// gitApply writes pre to a fresh directory (outside any repository) and applies
// patch there with git apply; it returns the resulting files.
func (h *corpus) gitApply(pre tree, patch string) (tree, error) {
	d := filepath.Join(h.base, "git"+strconv.Itoa(h.seq))
	if err := os.Mkdir(d, 0o755); err != nil {
		h.t.Fatal(err)
	}
	defer os.RemoveAll(d)
	for p, f := range pre {
		full := filepath.Join(d, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			h.t.Fatal(err)
		}
		perm := os.FileMode(0o644)
		if f.exec {
			perm = 0o755
		}
		if err := os.WriteFile(full, []byte(f.data), perm); err != nil {
			h.t.Fatal(err)
		}
		if err := os.Chmod(full, perm); err != nil {
			h.t.Fatal(err)
		}
	}
	args := []string{"apply", "--whitespace=nowarn", "-"}
	if h.unidiffZero {
		args = append(args, "--unidiff-zero")
	}
	if _, err := h.gitIn(d, []byte(patch), args...); err != nil {
		return nil, err
	}
	out := tree{}
	err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d, p)
		out[filepath.ToSlash(rel)] = corpusFile{string(data), info.Mode()&0o100 != 0}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out, nil
}

// toolApply populates a fresh Dir with pre and applies patch with the tool's
// engine (applyPatch, as the apply_patch tool calls it). A refusal must leave
// the Dir as it was.
func (h *corpus) toolApply(pre tree, patch string, onDisk bool) (tree, error) {
	ctx := context.Background()
	var b vfs.Backend = memory.New()
	if onDisk {
		d := filepath.Join(h.base, "phys"+strconv.Itoa(h.seq))
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			h.t.Fatal(err)
		}
		defer os.RemoveAll(d)
		pb, err := physical.New(d)
		if err != nil {
			h.t.Fatal(err)
		}
		defer pb.Close()
		b = pb
	}
	d, _ := dir.New(b)
	for p, f := range pre {
		if i := strings.LastIndex(p, "/"); i > 0 {
			if err := d.MkdirAll(ctx, p[:i]); err != nil {
				h.t.Fatal(err)
			}
		}
		perm := fs.FileMode(0o644)
		if f.exec {
			perm = 0o755
		}
		if err := d.WriteFile(ctx, p, []byte(f.data), perm); err != nil {
			h.t.Fatal(err)
		}
		if err := d.Chmod(ctx, p, perm); err != nil {
			h.t.Fatal(err)
		}
	}
	s := &server{root: d}
	s.opts.defaults()
	_, err := s.applyPatch(ctx, patchIn{Patch: patch})
	out := dirTree(h.t, d)
	if err != nil && !sameTree(out, pre, true) {
		h.t.Errorf("a refused patch changed the Dir: %v\n%s", err, clip(patch, 2000))
	}
	return out, err
}

// dirTree reads every regular file of d.
func dirTree(t testing.TB, d *dir.Dir) tree {
	ctx := context.Background()
	out := tree{}
	err := d.Walk(ctx, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		data, err := d.ReadFile(ctx, p)
		if err != nil {
			return err
		}
		info, err := d.Lstat(ctx, p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, "./")] = corpusFile{string(data), info.Mode()&0o100 != 0}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// toBeginPatch converts a parsed unified diff to the Begin Patch format: a hunk
// keeps its lines and loses its line numbers, one without trailing unchanged
// lines gets "*** End of File"; a hunk without unchanged lines (git diff -U0)
// has nothing but its line numbers to say where it goes, and "" is returned.
// Modes cannot be said in that format: modesKept is false when the diff
// changes one (or adds an executable file); a file whose only change is its
// mode is left out, and "" is returned when nothing is left.
func toBeginPatch(files []patchFile) (text string, modesKept bool) {
	modesKept = true
	var out []patchFile
	for _, f := range files {
		if (f.NewMode != 0 && f.OldMode != 0 && f.NewMode != f.OldMode) || (f.Kind == patchAdd && f.NewMode&0o111 != 0) {
			modesKept = false
		}
		g := patchFile{Kind: f.Kind, Path: f.Path, MoveTo: f.MoveTo, Content: f.Content}
		if f.Kind == patchUpdate {
			for _, c := range f.Chunks {
				trailing, context := 0, 0
				for k := len(c.Lines) - 1; k >= 0 && c.Lines[k].Op == ' '; k-- {
					trailing++
				}
				for _, l := range c.Lines {
					if l.Op == ' ' {
						context++
					}
				}
				if context == 0 {
					// A -U0 hunk: its place is only in its line numbers.
					return "", modesKept
				}
				g.Chunks = append(g.Chunks, patchChunk{Lines: c.Lines, EOF: trailing == 0})
			}
			if len(g.Chunks) == 0 && g.MoveTo == "" {
				continue
			}
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return "", modesKept
	}
	return formatPatch(out), modesKept
}

// randomEdits builds a git repository from part of Go's source tree, commits n
// rounds of random edits over it (seeded: the same every run) and compares the
// patch of each round.
func (h *corpus) randomEdits(n int) {
	t := h.t
	src := filepath.Join(goroot(t), "src")
	repo := filepath.Join(h.base, "fixture")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every k-th small text file of GOROOT/src, in a stable order.
	var all []string
	_ = filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() && (e.Name() == "testdata" || e.Name() == "vendor") {
			return fs.SkipDir
		}
		switch filepath.Ext(p) {
		case ".go", ".s", ".txt", ".h", ".c":
		default:
			return nil
		}
		if e.Type().IsRegular() {
			if info, err := e.Info(); err == nil && info.Size() < 48<<10 {
				all = append(all, p)
			}
		}
		return nil
	})
	if len(all) < 100 {
		t.Skipf("GOROOT/src has only %d files", len(all))
	}
	want := 300
	if n > 1000 {
		want = 1500
	}
	step := max(1, len(all)/want)
	rng := rand.New(rand.NewSource(11))
	files := map[string]string{}
	for i := 0; i < len(all); i += step {
		data, err := os.ReadFile(all[i])
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		rel, _ := filepath.Rel(src, all[i])
		rel = filepath.ToSlash(rel)
		files[rel] = string(data)
		full := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.mustGit(repo, "init", "-q")
	h.mustGit(repo, "add", "-A")
	h.mustGit(repo, "commit", "-q", "-m", "base")
	ed := &editor{rng: rng, repo: repo, files: files, exec: map[string]bool{}, t: t}
	for round := 0; round < n; round++ {
		// The round's preimage and postimage are the files it touched, before
		// and after, as the editor knows them (not as the patch says).
		before := ed.snapshot()
		ed.round()
		after := ed.snapshot()
		pre, post := tree{}, tree{}
		for p := range union(before, after) {
			b, bok := before[p]
			a, aok := after[p]
			if b == a && bok == aok {
				continue
			}
			if bok {
				pre[p] = b
			}
			if aok {
				post[p] = a
			}
		}
		h.mustGit(repo, "add", "-A")
		diff := func(args ...string) string {
			return string(h.mustGit(repo, append([]string{"diff", "--cached", "--no-color", "-M"}, args...)...))
		}
		withContext := func(n int) string { return diff("-U" + strconv.Itoa(n)) }
		if len(pre)+len(post) > 0 {
			h.compare(fmt.Sprintf("edit round %d", round), diff(), pre, post, withContext, round%3 == 0)
			if rng.Intn(8) == 0 {
				// The same change with less context (git apply's rules for -U1 and
				// -U0 hunks: at the end of the file when no trailing context).
				u := []string{"-U0", "-U1"}[rng.Intn(2)]
				h.unidiffZero = u == "-U0"
				h.compare(fmt.Sprintf("edit round %d %s", round, u), diff(u), pre, post, withContext, false)
				h.unidiffZero = false
			}
		}
		h.mustGit(repo, "commit", "-q", "--allow-empty", "-m", strconv.Itoa(round))
	}
}

func goroot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// editor makes random edits to the fixture's working tree.
type editor struct {
	t     *testing.T
	rng   *rand.Rand
	repo  string
	files map[string]string // the working tree's files
	exec  map[string]bool   // those with the executable bit
	n     int
}

func (e *editor) names() []string {
	var ns []string
	for p := range e.files {
		ns = append(ns, p)
	}
	sort.Strings(ns)
	return ns
}

func (e *editor) snapshot() tree {
	t := tree{}
	for p, data := range e.files {
		t[p] = corpusFile{data, e.exec[p]}
	}
	return t
}

func (e *editor) setExec(p string, x bool) {
	perm := os.FileMode(0o644)
	if x {
		perm = 0o755
	}
	if err := os.Chmod(filepath.Join(e.repo, filepath.FromSlash(p)), perm); err != nil {
		e.t.Fatal(err)
	}
	e.exec[p] = x
}

func (e *editor) remove(p string) {
	if err := os.Remove(filepath.Join(e.repo, filepath.FromSlash(p))); err != nil {
		e.t.Fatal(err)
	}
	delete(e.files, p)
	delete(e.exec, p)
}

// write writes a file; a new one is not executable.
func (e *editor) write(p, data string) {
	full := filepath.Join(e.repo, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.files[p] = data
}

// round makes one commit's worth of edits: one to four actions on distinct files.
func (e *editor) round() {
	touched := map[string]bool{}
	names := e.names()
	for k := 1 + e.rng.Intn(4); k > 0; k-- {
		p := names[e.rng.Intn(len(names))]
		if touched[p] {
			continue
		}
		touched[p] = true
		switch r := e.rng.Intn(100); {
		case r < 55:
			e.write(p, e.editLines(e.files[p]))
		case r < 63:
			e.write(p, e.lineEnds(e.files[p]))
		case r < 69:
			e.write(p, toggleFinalNewline(e.files[p]))
		case r < 76:
			// A rename, with or without an edit.
			q := e.newName(p)
			if touched[q] {
				continue
			}
			touched[q] = true
			data, x := e.files[p], e.exec[p]
			if e.rng.Intn(2) == 0 {
				data = e.editLines(data)
			}
			e.remove(p)
			e.write(q, data)
			e.setExec(q, x)
		case r < 82:
			e.setExec(p, !e.exec[p])
			if e.rng.Intn(3) == 0 {
				e.write(p, e.editLines(e.files[p]))
			}
		case r < 91:
			q := e.newName(p)
			if touched[q] {
				continue
			}
			touched[q] = true
			e.write(q, e.newContent())
			e.setExec(q, e.rng.Intn(4) == 0)
		default:
			if len(e.files) < 50 {
				continue
			}
			e.remove(p)
		}
	}
}

// newName returns an unused name near p, sometimes one git must quote.
func (e *editor) newName(p string) string {
	e.n++
	d := filepath.ToSlash(filepath.Dir(p))
	var q string
	switch e.rng.Intn(6) {
	case 0:
		q = fmt.Sprintf("%s/new dir %d/file \"%d\" é.txt", d, e.n, e.n)
	case 1:
		q = fmt.Sprintf("added/%d/%s", e.n, filepath.Base(p))
	default:
		q = fmt.Sprintf("%s/renamed_%d_%s", d, e.n, filepath.Base(p))
	}
	if _, ok := e.files[q]; ok {
		return e.newName(p)
	}
	return q
}

// newContent is an added file's contents: empty, copied lines, or new lines,
// with or without a final newline, sometimes CRLF.
func (e *editor) newContent() string {
	switch e.rng.Intn(6) {
	case 0:
		return ""
	case 1:
		return "no final newline"
	}
	var b strings.Builder
	eol := "\n"
	if e.rng.Intn(4) == 0 {
		eol = "\r\n"
	}
	for k := 1 + e.rng.Intn(30); k > 0; k-- {
		b.WriteString(e.randomLine() + eol)
	}
	s := b.String()
	if e.rng.Intn(5) == 0 {
		s = strings.TrimSuffix(s, eol)
	}
	return s
}

var corpusWords = []string{"func", "return", "}", "{", "if err != nil {", "x := 1", "", "\t", "// comment", "end", "  ", "value"}

func (e *editor) randomLine() string {
	switch e.rng.Intn(4) {
	case 0:
		return corpusWords[e.rng.Intn(len(corpusWords))]
	case 1:
		return "\t" + corpusWords[e.rng.Intn(len(corpusWords))] + " " + strconv.Itoa(e.rng.Intn(100))
	case 2:
		return fmt.Sprintf("line %d", e.rng.Intn(1000))
	}
	return ""
}

// editLines changes one to five places of data: inserts, deletes, changes,
// blank lines, duplicated blocks, trailing whitespace, near each other or not.
func (e *editor) editLines(data string) string {
	lines := splitLines(data)
	eol := "\n"
	if fileStyle(lines) == "\r\n" {
		eol = "\r\n"
	}
	pos := e.rng.Intn(len(lines) + 1)
	for k := 1 + e.rng.Intn(5); k > 0; k-- {
		switch e.rng.Intn(4) {
		case 0:
			pos = e.rng.Intn(len(lines) + 1) // far away
		case 1:
			pos = min(len(lines), pos+1+e.rng.Intn(8)) // near the last: adjacent or merged hunks
		case 2:
			pos = []int{0, len(lines)}[e.rng.Intn(2)] // at the top or the end
		}
		pos = min(pos, len(lines))
		switch r := e.rng.Intn(100); {
		case r < 25: // insert new lines
			var ins []string
			for j := 1 + e.rng.Intn(3); j > 0; j-- {
				ins = append(ins, e.randomLine()+eol)
			}
			lines = insertAt(lines, pos, ins)
		case r < 45: // delete lines
			if len(lines) > 0 {
				p := min(pos, len(lines)-1)
				lines = append(lines[:p:p], lines[min(len(lines), p+1+e.rng.Intn(3)):]...)
			}
		case r < 65: // change a line
			if len(lines) > 0 {
				p := min(pos, len(lines)-1)
				lines[p] = e.randomLine() + eol
			}
		case r < 75: // insert blank lines
			lines = insertAt(lines, pos, []string{eol, eol}[:1+e.rng.Intn(2)])
		case r < 85: // duplicate a block elsewhere (the same lines in two places)
			if len(lines) > 4 {
				p := e.rng.Intn(len(lines) - 3)
				block := append([]string(nil), lines[p:p+1+e.rng.Intn(3)]...)
				for j := range block {
					if !strings.HasSuffix(block[j], "\n") {
						block[j] += eol
					}
				}
				lines = insertAt(lines, pos, block)
			}
		default: // trailing whitespace added or removed
			if len(lines) > 0 {
				p := min(pos, len(lines)-1)
				body, end := stripEOL(lines[p]), lines[p][len(stripEOL(lines[p])):]
				if strings.TrimRight(body, " \t") != body {
					lines[p] = strings.TrimRight(body, " \t") + end
				} else {
					lines[p] = body + " \t"[:1+e.rng.Intn(2)] + end
				}
			}
		}
	}
	// A line without a newline can only be last.
	for k := 0; k+1 < len(lines); k++ {
		if !strings.HasSuffix(lines[k], "\n") {
			lines[k] += eol
		}
	}
	return strings.Join(lines, "")
}

func insertAt(lines []string, p int, ins []string) []string {
	out := append([]string(nil), lines[:p]...)
	out = append(out, ins...)
	return append(out, lines[p:]...)
}

// lineEnds converts data to CRLF, back to LF, or mixes them.
func (e *editor) lineEnds(data string) string {
	switch e.rng.Intn(3) {
	case 0:
		return strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\n", "\r\n")
	case 1:
		return strings.ReplaceAll(data, "\r\n", "\n")
	}
	lines := splitLines(data)
	for k, l := range lines {
		if e.rng.Intn(3) == 0 && strings.HasSuffix(l, "\n") {
			lines[k] = stripEOL(l) + "\r\n"
		}
	}
	return strings.Join(lines, "")
}

func toggleFinalNewline(data string) string {
	if strings.HasSuffix(data, "\n") {
		return stripEOL(data)
	}
	return data + "\n"
}

func clipFile(f corpusFile) corpusFile { return corpusFile{clip(f.data, 200), f.exec} }
