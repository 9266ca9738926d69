package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"

	"github.com/capfs/capfs/internal/hostfile"
)

// gitHookNames are the hooks git runs, for a core.hooksPath that names the work
// tree's top itself.
var gitHookNames = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
	"pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
	"reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
	"fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit",
	"post-index-change",
}

// ForProject returns write-deny rules for the paths inside the host directory
// hostDir that the git configuration in effect there names as code to run or
// configuration to load, so that a guest cannot plant what the host's next git
// command runs. treePrefix is where hostDir appears in the capability tree ("" for
// its root, "project" for a mount at project); the rules' paths are under it.
//
// It asks git for the configuration a git command run in hostDir would use
// (git config --list --show-origin: system, global, the repository's and every
// file they include), and denies writes (every op for which Op.Writes reports true)
// on these, where they lie inside hostDir:
//
//   - the directory core.hooksPath names (relative to the work tree's top), and
//     everything in it; for a hooksPath naming the top itself, the hook names;
//   - every configuration file that holds an entry, and every file an include.path
//     or includeIf.*.path names, existing or not;
//   - init.templateDir (hooks copied into new repositories);
//   - every path-like word (one holding "/") of a command git runs from its
//     configuration: core.fsmonitor (when not a boolean), core.sshCommand,
//     core.pager, core.editor, core.askPass, core.gitProxy, sequence.editor,
//     diff.external, "!" aliases, filter.*.clean, smudge and process,
//     diff.*.textconv and command, merge.*.driver, credential helpers, gpg
//     programs, pager.*, difftool and mergetool commands, remote.*.uploadpack and
//     receivepack, and the like.
//
// The submodules checked out inside hostDir (the paths .gitmodules names, holding a
// .git) are read the same way, to a depth of 8: their core.hooksPath and commands
// count too. Other nested repositories (a directory holding its own .git that is
// no submodule) are not looked for: their .git is protected by the default
// patterns, but paths their configuration names outside it are not.
//
// Paths are taken both as written and with host symlinks resolved. Words of a
// command are found by splitting on blanks and shell punctuation: a command that
// builds a path at run time is not seen. Without a git binary (or when git refuses
// the directory), only hostDir's own .git/config is read, without includes.
//
// The rules hold what the configuration says when ForProject runs: the guest cannot
// change it (.git/config and the files listed above are denied), but the host can;
// call it again for a new session. The rules are named "project-git:<key>".
func ForProject(ctx context.Context, hostDir, treePrefix string) ([]Rule, error) {
	root, err := filepath.Abs(hostDir)
	if err != nil {
		return nil, fmt.Errorf("policy: project %s: %w", hostDir, err)
	}
	if st, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("policy: project: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("policy: project %s: not a directory", hostDir)
	}
	treePrefix = strings.Trim(treePrefix, "/")
	if treePrefix == "." {
		treePrefix = ""
	}
	if treePrefix != "" && !validTreePath(treePrefix) {
		return nil, fmt.Errorf("policy: project tree prefix %q: not a clean relative path", treePrefix)
	}
	p := projectPaths{root: root, prefix: treePrefix, rules: map[string]*Rule{}}
	p.realRoot, _ = filepath.EvalSymlinks(root)
	p.home, _ = os.UserHomeDir()
	p.scan(ctx, root, 0)
	return p.list(), nil
}

// maxSubmoduleDepth bounds the submodules of submodules ForProject reads.
const maxSubmoduleDepth = 8

// scan adds the rules for the git configuration in effect in dir, then for the
// submodules checked out inside the project.
func (p *projectPaths) scan(ctx context.Context, dir string, depth int) {
	entries, top := gitConfigEntries(ctx, dir)
	for _, e := range entries {
		p.entry(e, dir, top)
	}
	if depth >= maxSubmoduleDepth {
		return
	}
	for _, sub := range submodulePaths(ctx, top) {
		abs := filepath.Join(top, filepath.FromSlash(sub))
		if _, ok := inside(p.root, abs); !ok || abs == filepath.Clean(dir) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil {
			p.scan(ctx, abs, depth+1)
		}
	}
}

// entry adds the rules for one git configuration entry e in effect in dir,
// whose work tree's top is top.
func (p *projectPaths) entry(e configEntry, dir, top string) {
	home := p.home
	originDir := dir
	if e.origin != "" {
		of := e.origin
		if !filepath.IsAbs(of) {
			of = filepath.Join(dir, of)
		}
		originDir = filepath.Dir(of)
		p.add("config-file", "the project's git configuration is read from this file", of, false)
	}
	key, val := e.key, e.value
	switch {
	case key == "core.hookspath":
		p.addHooksPath(expandHome(val, home), top)
	case key == "include.path" || strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path"):
		p.add(key, "the project's git configuration includes this file", absUnder(expandHome(val, home), originDir), false)
	case key == "init.templatedir":
		p.add(key, "git copies hooks from this template directory", absUnder(expandHome(val, home), top), true)
	case key == "core.fsmonitor" && isGitBool(val):
	case commandKey(key, val):
		for _, w := range commandWords(val) {
			p.add(key, "the project's git configuration runs this ("+key+")", absUnder(expandHome(w, home), top), false)
		}
	}
}

// absUnder is v, made absolute from dir where it is relative.
func absUnder(v, dir string) string {
	if filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(dir, v)
}

// submodulePaths lists the paths .gitmodules in top names, as git reads them.
func submodulePaths(ctx context.Context, top string) []string {
	if _, err := os.Lstat(filepath.Join(top, ".gitmodules")); err != nil {
		return nil
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, gitConfigTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gitBin, "-C", top, "config", "--file", ".gitmodules", "-z", "--get-regexp", `^submodule\..*\.path$`)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var paths []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if _, v, ok := strings.Cut(string(f), "\n"); ok && v != "" {
			paths = append(paths, v)
		}
	}
	return paths
}

// validTreePath reports whether s is a clean relative slash path.
func validTreePath(s string) bool {
	return s != "" && s != "." && path.Clean(s) == s && !strings.HasPrefix(s, "/") && s != ".." && !strings.HasPrefix(s, "../")
}

// configEntry is one line of git's configuration, with the file it came from
// ("" when unknown).
type configEntry struct {
	origin, key, value string
}

// gitConfigEntries asks git for the configuration in effect in root, and the work
// tree's top (root when unknown). Without git, it reads root/.git/config.
func gitConfigEntries(ctx context.Context, root string) ([]configEntry, string) {
	top := root
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return localConfig(root), top
	}
	run := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, gitConfigTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, gitBin, append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
		return cmd.Output()
	}
	if out, err := run("rev-parse", "--show-toplevel"); err == nil {
		if t := strings.TrimSpace(string(out)); t != "" {
			top = t
		}
	}
	out, err := run("config", "--list", "--show-origin", "-z")
	if err != nil {
		return localConfig(root), top
	}
	var entries []configEntry
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		origin := string(fields[i])
		kv := string(fields[i+1])
		key, value, _ := strings.Cut(kv, "\n")
		e := configEntry{key: lowerKey(key), value: value}
		if f, ok := strings.CutPrefix(origin, "file:"); ok {
			e.origin = f
		}
		entries = append(entries, e)
	}
	return entries, top
}

// localConfig reads root's own git configuration file (.git/config, following a
// gitdir file), without includes. Errors leave it empty.
func localConfig(root string) []configEntry {
	gitDir := filepath.Join(root, ".git")
	if st, err := os.Stat(gitDir); err == nil && !st.IsDir() {
		data, _, err := hostfile.ReadRegular(gitDir, maxGitdirFile)
		if err != nil {
			return nil
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
		if !ok {
			return nil
		}
		gitDir = strings.TrimSpace(rest)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(root, gitDir)
		}
	}
	name := filepath.Join(gitDir, "config")
	data, _, err := hostfile.ReadRegular(name, maxGitConfig)
	if err != nil {
		return nil
	}
	cfg := gitconfig.New()
	if err := gitconfig.NewDecoder(bytes.NewReader(data)).Decode(cfg); err != nil {
		return nil
	}
	var out []configEntry
	for _, s := range cfg.Sections {
		for _, o := range s.Options {
			out = append(out, configEntry{origin: name, key: lowerKey(s.Name + "." + o.Key), value: o.Value})
		}
		for _, ss := range s.Subsections {
			for _, o := range ss.Options {
				out = append(out, configEntry{origin: name, key: lowerKey(s.Name + "." + ss.Name + "." + o.Key), value: o.Value})
			}
		}
	}
	return out
}

// lowerKey lower-cases a key's section and name, keeping a subsection's case, as
// git config --list prints keys.
func lowerKey(key string) string {
	i, j := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if i < 0 {
		return strings.ToLower(key)
	}
	return strings.ToLower(key[:i]) + key[i:j] + strings.ToLower(key[j:])
}

// isGitBool reports whether v is one of git's boolean spellings.
func isGitBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		return true
	}
	return false
}

// commandKey reports whether git runs the value of key as a command (or a program
// path).
func commandKey(key, value string) bool {
	if commandKeys[key] {
		return true
	}
	section, rest, _ := strings.Cut(key, ".")
	name := rest[strings.LastIndexByte(rest, '.')+1:]
	switch section {
	case "alias":
		return strings.HasPrefix(strings.TrimSpace(value), "!")
	case "pager":
		return true
	}
	return slices.Contains(commandNames[section], name)
}

// commandKeys are the keys whose value git runs as a command.
var commandKeys = map[string]bool{
	"core.fsmonitor": true, "core.sshcommand": true, "core.pager": true, "core.editor": true,
	"core.askpass": true, "core.gitproxy": true, "sequence.editor": true, "diff.external": true,
	"gpg.program": true, "interactive.difffilter": true, "web.browser": true,
	"uploadpack.packobjectshook": true, "sendemail.smtpserver": true, "sendemail.sendmailcmd": true,
	"sendemail.tocmd": true, "sendemail.cccmd": true, "sendemail.headercmd": true,
}

// commandNames are, by section, the last names of keys (section.*.name)
// whose value git runs as a command.
var commandNames = map[string][]string{
	"filter":     {"clean", "smudge", "process"},
	"diff":       {"textconv", "command"},
	"merge":      {"driver"},
	"credential": {"helper"},
	"gpg":        {"program", "defaultkeycommand"},
	"difftool":   {"cmd", "path"},
	"mergetool":  {"cmd", "path"},
	"man":        {"cmd", "path"},
	"browser":    {"cmd", "path"},
	"remote":     {"uploadpack", "receivepack", "vcs"},
	"trailer":    {"command", "cmd"},
}

// commandWords returns the path-like words of a shell command: those holding a
// "/", with quotes, a leading "!" and option names ("--file=") removed.
func commandWords(cmd string) []string {
	cmd = strings.TrimPrefix(strings.TrimSpace(cmd), "!")
	split := func(r rune) bool {
		switch r {
		case ' ', '\t', '\n', ';', '&', '|', '(', ')', '<', '>', '`', '"', '\'', '$', '{', '}':
			return true
		}
		return false
	}
	var out []string
	for _, w := range strings.FieldsFunc(cmd, split) {
		if i := strings.IndexByte(w, '='); i >= 0 {
			w = w[i+1:]
		}
		if strings.Contains(w, "/") && !strings.Contains(w, "://") {
			out = append(out, w)
		}
	}
	return out
}

func expandHome(p, home string) string {
	if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
		return filepath.Join(home, p[1:])
	}
	return p
}

// projectPaths collects the rules.
type projectPaths struct {
	root, realRoot, prefix string
	home                   string
	rules                  map[string]*Rule // by key
	order                  []string
}

// addHooksPath adds the hooks directory v (relative to the work tree's top).
func (p *projectPaths) addHooksPath(v, top string) {
	if !filepath.IsAbs(v) {
		v = filepath.Join(top, v)
	}
	for _, rel := range p.rels(v) {
		if rel == "." {
			for _, h := range gitHookNames {
				p.addRel("core.hookspath", "git runs the hooks in core.hooksPath", h, false)
			}
			continue
		}
		p.addRel("core.hookspath", "git runs the hooks in core.hooksPath", rel, true)
	}
}

// add adds host path v (absolute), and with tree set, everything beneath it.
func (p *projectPaths) add(key, reason, v string, tree bool) {
	for _, rel := range p.rels(v) {
		if rel == "." {
			continue // the whole project: nothing narrower to say
		}
		p.addRel(key, reason, rel, tree)
	}
}

// rels returns v relative to the project root, as written and with symlinks
// resolved, where it lies inside the project.
func (p *projectPaths) rels(v string) []string {
	var out []string
	if r, ok := inside(p.root, filepath.Clean(v)); ok {
		out = append(out, r)
	}
	if p.realRoot != "" {
		if real, err := evalExisting(v); err == nil {
			if r, ok := inside(p.realRoot, real); ok && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// evalExisting resolves the symlinks of the longest existing prefix of v and
// appends the rest.
func evalExisting(v string) (string, error) {
	v = filepath.Clean(v)
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(v)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(v)
		if parent == v {
			return "", err
		}
		rest = append([]string{filepath.Base(v)}, rest...)
		v = parent
	}
}

func inside(root, v string) (string, bool) {
	r, err := filepath.Rel(root, v)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

func (p *projectPaths) addRel(key, reason, rel string, tree bool) {
	pat := escapeGlob(rel)
	if p.prefix != "" {
		pat = escapeGlob(p.prefix) + "/" + pat
	}
	r := p.rules[key]
	if r == nil {
		r = &Rule{Effect: Deny, Ops: []Op{GroupWrite}, Name: "project-git:" + key, Reason: reason}
		p.rules[key] = r
		p.order = append(p.order, key)
	}
	pats := []string{pat}
	if tree {
		pats = append(pats, pat+"/**")
	}
	for _, q := range pats {
		if !slices.Contains(r.Paths, q) {
			r.Paths = append(r.Paths, q)
		}
	}
}

func (p *projectPaths) list() []Rule {
	out := make([]Rule, 0, len(p.order))
	for _, k := range p.order {
		out = append(out, *p.rules[k])
	}
	return out
}

// escapeGlob quotes the characters doublestar treats specially.
func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]{}\,!^`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\,!^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// With returns an Engine that decides as e does with rules appended to its rules
// (for instance those ForProject returns).
func (e *Engine) With(rules ...Rule) (*Engine, error) {
	cfg := e.Config()
	cfg.Rules = append(cfg.Rules, rules...)
	return New(cfg)
}

// Bounds on the project's own git files read by localConfig: they come from the
// project, an outside input (a cloned or unpacked tree may make them a FIFO, a
// device or a gigabyte of text).
const (
	// gitConfigTimeout bounds each git command that reads them for us (a
	// .gitmodules linked to /dev/zero would keep git reading).
	gitConfigTimeout = 10 * time.Second
	maxGitdirFile    = 4 << 10
	maxGitConfig     = 1 << 20
)
