package policy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

func mustNew(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func decide(e *Engine, op Op, path, dest string) Decision {
	return e.Decide(context.Background(), &Request{Op: op, Path: path, Dest: dest, Size: -1})
}

// nonListOps are every op but OpList: all of them are denied on a secret path.
var nonListOps = []Op{OpStat, OpRead, OpWrite, OpCreate, OpMkdir, OpRemove, OpRename, OpCopy,
	OpSymlink, OpReadlink, OpLink, OpChmod, OpChtimes, OpSub, OpChown}

func TestDefaultSecretPatterns(t *testing.T) {
	e := Defaults()
	secrets := []struct {
		path, rule string
		tree       bool // matched by a "/**" pattern: listing refused too
	}{
		{".ssh", "secret:**/.ssh/**", true},
		{".ssh/id_rsa", "secret:**/.ssh/**", true},
		{"home/.ssh", "secret:**/.ssh/**", true},
		{"sub/.ssh/id_rsa", "secret:**/.ssh/**", true},
		{"a/b/.ssh/keys/deep", "secret:**/.ssh/**", true},
		{".aws", "secret:**/.aws/**", true},
		{"home/.aws/credentials", "secret:**/.aws/**", true},
		{".gnupg/private-keys-v1.d/x.key", "secret:**/.gnupg/**", true},
		{".env", "secret:**/.env", false},
		{"app/.env", "secret:**/.env", false},
		{".env.local", "secret:**/.env.*", false},
		{"app/.env.production", "secret:**/.env.*", false},
		{"server.pem", "secret:**/*.pem", false},
		{"certs/ca.pem", "secret:**/*.pem", false},
		{".pem", "secret:**/*.pem", false},
		{"tls/server.key", "secret:**/*.key", false},
		{"credentials.json", "secret:**/credentials.json", false},
		{"gcp/credentials.json", "secret:**/credentials.json", false},
		{".netrc", "secret:**/.netrc", false},
		{"home/.npmrc", "secret:**/.npmrc", false},
	}
	for _, s := range secrets {
		for _, op := range nonListOps {
			d := decide(e, op, s.path, "")
			if d.Effect != Deny || d.Rule != s.rule || d.Reason == "" {
				t.Errorf("%s %q: %+v, want deny by %s", op, s.path, d, s.rule)
			}
		}
		want := Allow
		if s.tree {
			want = Deny
		}
		if d := decide(e, OpList, s.path, ""); d.Effect != want {
			t.Errorf("list %q: %+v, want %v", s.path, d, want)
		}
	}
	// .envrc is no secret (reading it is allowed); writing it is persistence.
	for _, op := range append(slices.Clone(nonListOps), OpList) {
		if d := decide(e, op, ".envrc", ""); (op.Writes() && op != OpCopy) != (d.Effect == Deny) {
			t.Errorf("%s .envrc: %+v", op, d)
		}
	}
	nearMisses := []string{
		"a.pem.txt", "pem", "a.pemx", ".env-example", "env", "my.env", ".environment",
		"ssh/id_rsa", ".sshx/id_rsa", "x.ssh/id_rsa", "ssh", "keys/a.txt", "a.key.bak",
		"credentials.json.bak", "mycredentials.json", ".netrc.bak", "npmrc", ".aws2/x", "aws/x",
		".", "README.md", "src/main.go",
	}
	for _, p := range nearMisses {
		for _, op := range append(nonListOps, OpList) {
			if d := decide(e, op, p, ""); d.Effect != Allow || d.Rule != RuleDefault {
				t.Errorf("%s %q: %+v, want allow by default", op, p, d)
			}
		}
	}
}

// persistenceSamples has, for every default persistence pattern, paths it must
// deny writes to. TestDefaultPersistencePatterns fails for a pattern without one.
var persistenceSamples = map[string][]string{
	"**/.git/hooks/**":           {".git/hooks", ".git/hooks/pre-commit", "vendor/lib/.git/hooks/post-checkout"},
	"**/.git/config":             {".git/config", "sub/.git/config"},
	"**/.git/**/hooks/**":        {".git/modules/lib/hooks/pre-commit", "a/.git/modules/x/y/hooks", ".git/modules/a/modules/b/hooks/post-merge"},
	"**/.git/**/config":          {".git/modules/lib/config", ".git/modules/a/modules/b/config"},
	"**/.git/**/config.worktree": {".git/config.worktree", ".git/worktrees/w/config.worktree"},
	"**/.git/**/commondir":       {".git/commondir", ".git/worktrees/w/commondir"},
	"**/.git/**/rebase-merge/**": {".git/rebase-merge/git-rebase-todo", ".git/modules/m/rebase-merge"},
	GitDirPattern:                {".git", "sub/.git", ".git/HEAD", ".git/objects/ab/cd", ".git/refs/heads/main", ".git/index", ".git/config.bak", ".git/hooksx/y", ".git/info/exclude", ".git/worktrees/w/HEAD", ".git/modules/m/HEAD"},
	"**/.gitconfig":              {".gitconfig", "home/u/.gitconfig"},
	"**/.config/git/**":          {".config/git/config", "home/u/.config/git/attributes"},
	"**/.gitmodules":             {".gitmodules", "lib/.gitmodules"},
	"**/.husky/**":               {".husky/pre-commit", ".husky/_/h", "web/.husky"},
	"**/.githooks/**":            {".githooks/pre-commit"},
	"**/.pre-commit-config.yaml": {".pre-commit-config.yaml"},
	"**/lefthook{,-local}.{yml,yaml,toml,json,jsonc}": {"lefthook.yml", "a/lefthook-local.yaml", "lefthook.toml", "lefthook.jsonc"},
	"**/.lefthook*/**":              {".lefthook.yml", ".lefthook-local.yml", ".lefthook/pre-commit/fmt.sh"},
	"**/.lefthook*":                 {".lefthook", "a/.lefthook"},
	"**/.overcommit.yml":            {".overcommit.yml"},
	"**/.profile":                   {".profile", "home/u/.profile"},
	"**/.bash_profile":              {".bash_profile"},
	"**/.bash_login":                {".bash_login"},
	"**/.bashrc":                    {".bashrc", "home/user/.bashrc"},
	"**/.bash_logout":               {".bash_logout"},
	"**/.bash_aliases":              {".bash_aliases"},
	"**/.bash_completion":           {".bash_completion"},
	"**/.inputrc":                   {".inputrc"},
	"**/.zshenv":                    {".zshenv"},
	"**/.zprofile":                  {".zprofile"},
	"**/.zshrc":                     {".zshrc"},
	"**/.zlogin":                    {".zlogin"},
	"**/.zlogout":                   {".zlogout"},
	"**/.zcompdump*":                {".zcompdump", ".zcompdump-host-5.9"},
	"**/*.zwc":                      {".zshrc.zwc", ".zfunc/f.zwc"},
	"**/.cshrc":                     {".cshrc"},
	"**/.tcshrc":                    {".tcshrc"},
	"**/.login":                     {".login"},
	"**/.logout":                    {".logout"},
	"**/.kshrc":                     {".kshrc"},
	"**/.mkshrc":                    {".mkshrc"},
	"**/.config/fish/**":            {".config/fish/config.fish", ".config/fish/conf.d/x.fish"},
	"**/.tmux.conf":                 {".tmux.conf"},
	"**/.config/tmux/**":            {".config/tmux/tmux.conf"},
	"**/.screenrc":                  {".screenrc"},
	"**/.lessfilter":                {".lessfilter"},
	"**/.envrc":                     {".envrc", "app/.envrc"},
	"**/.direnv/**":                 {".direnv/python-3.12/bin/git"},
	"**/.config/direnv/**":          {".config/direnv/direnvrc"},
	"**/mise*.toml":                 {"mise.toml", "mise.local.toml"},
	"**/.mise*.toml":                {".mise.toml"},
	"**/.mise/**":                   {".mise/config.toml"},
	"**/.config/mise/**":            {".config/mise/config.toml"},
	"**/.vscode/**":                 {".vscode", ".vscode/tasks.json", ".vscode/mcp.json"},
	"**/*.code-workspace":           {"proj.code-workspace"},
	"**/.devcontainer/**":           {".devcontainer/devcontainer.json"},
	"**/.devcontainer.json":         {".devcontainer.json"},
	"**/.idea/**":                   {".idea/workspace.xml"},
	"**/.exrc":                      {".exrc"},
	"**/.nvimrc":                    {".nvimrc"},
	"**/.nvim.lua":                  {".nvim.lua"},
	"**/.vimrc":                     {".vimrc"},
	"**/.gvimrc":                    {".gvimrc"},
	"**/.vim/**":                    {".vim/plugin/x.vim"},
	"**/.config/nvim/**":            {".config/nvim/init.lua"},
	"**/.emacs":                     {".emacs"},
	"**/.emacs.el":                  {".emacs.el"},
	"**/.emacs.d/**":                {".emacs.d/init.el"},
	"**/.config/emacs/**":           {".config/emacs/init.el"},
	"**/.zed/**":                    {".zed/settings.json"},
	"**/.helix/**":                  {".helix/languages.toml"},
	"**/.mcp.json":                  {".mcp.json", "proj/.mcp.json"},
	"**/.claude/**":                 {".claude/settings.json", ".claude/settings.local.json", ".claude/commands/x.md"},
	"**/.claude.json":               {".claude.json"},
	"**/.cursor/**":                 {".cursor/mcp.json", ".cursor/rules/x.mdc"},
	"**/.gemini/**":                 {".gemini/settings.json"},
	"**/.codex/**":                  {".codex/config.toml"},
	"**/.continue/**":               {".continue/config.yaml"},
	"**/.aider*/**":                 {".aider.conf.yml", ".aider.tags.cache.v3/cache.db"},
	"**/.aider*":                    {".aider", "sub/.aider"},
	"**/.windsurf/**":               {".windsurf/rules/x.md"},
	"**/.codeium/**":                {".codeium/windsurf/mcp_config.json"},
	"**/.roo/**":                    {".roo/mcp.json"},
	"**/.amazonq/**":                {".amazonq/mcp.json"},
	"**/.opencode/**":               {".opencode/plugin/x.ts"},
	"**/opencode.json{,c}":          {"opencode.json", "opencode.jsonc"},
	"**/.config/opencode/**":        {".config/opencode/agent/x.md"},
	"**/.config/goose/**":           {".config/goose/config.yaml"},
	"**/.junie/**":                  {".junie/mcp/mcp.json"},
	"**/{site,dist}-packages/*.pth": {".venv/lib/python3.12/site-packages/evil.pth", "usr/lib/python3/dist-packages/x.pth"},
	"**/{site,dist}-packages/{site,user}customize.py": {".venv/lib/python3.12/site-packages/sitecustomize.py", ".local/lib/python3.12/site-packages/usercustomize.py"},
	"**/.pythonrc*":               {".pythonrc", ".pythonrc.py"},
	"**/.irbrc":                   {".irbrc"},
	"**/.pryrc":                   {".pryrc"},
	"**/.cargo/**":                {".cargo/config.toml", ".cargo/config", ".cargo/bin/cargo"},
	"**/.config/go/env":           {".config/go/env"},
	"**/.config/autostart/**":     {".config/autostart/x.desktop"},
	"**/.config/systemd/**":       {".config/systemd/user/x.service"},
	"**/.config/environment.d/**": {".config/environment.d/10-x.conf"},
	"**/.xprofile":                {".xprofile"},
	"**/.xinitrc":                 {".xinitrc"},
	"**/.xsession":                {".xsession"},
	"**/.xsessionrc":              {".xsessionrc"},
}

// persistenceNearMisses are paths no default persistence pattern may match: files
// the package doc decides to leave writable, and names close to listed ones.
var persistenceNearMisses = []string{
	"bashrc", ".bashrc.bak", "profile", "src/.profilex", ".gitx/config", "a.git/config", "git/hooks/x",
	".gitattributes", ".gitignore", ".github/workflows/ci.yml", ".github/copilot-instructions.md",
	"CLAUDE.md", "AGENTS.md", "GEMINI.md", ".cursorrules", ".editorconfig", ".dir-locals.el",
	".vscodex/a", "mcp.json", "a.mcp.json", ".claudeignore", "Makefile", "package.json", "go.mod",
	"flake.nix", "build.rs", "src/main.go", "site-packages/pkg/mod.pth", "x.pth", "README.md", ".",
}

func TestDefaultPersistencePatterns(t *testing.T) {
	e := Defaults()
	var writes, reads []Op
	for _, op := range allOps {
		if op.Writes() {
			writes = append(writes, op)
		} else {
			reads = append(reads, op)
		}
	}
	seen := map[string]bool{}
	for _, pat := range DefaultPersistencePatterns() {
		if seen[pat] {
			t.Errorf("%q listed twice", pat)
		}
		seen[pat] = true
		paths := persistenceSamples[pat]
		if len(paths) == 0 {
			t.Errorf("no sample path for %q", pat)
		}
		for _, p := range paths {
			rule := "persistence:" + pat
			for _, op := range writes {
				if op == OpCopy {
					continue // a copy's source is read: below
				}
				if d := decide(e, op, p, ""); d.Effect != Deny || d.Rule != rule || d.Reason == "" {
					t.Errorf("%s %q: %+v, want deny by %s", op, p, d, rule)
				}
			}
			for _, op := range reads {
				if d := decide(e, op, p, ""); d.Effect != Allow {
					t.Errorf("%s %q: %+v, want allow (reads are not persistence)", op, p, d)
				}
			}
			if d := decide(e, OpCopy, p, "copy"); d.Effect != Allow {
				t.Errorf("copy from %q: %+v, want allow", p, d)
			}
			if d := decide(e, OpCopy, "x", p); d.Effect != Deny || d.Rule != rule {
				t.Errorf("copy to %q: %+v, want deny by %s", p, d, rule)
			}
			if d := decide(e, OpRename, p, "elsewhere"); d.Effect != Deny || d.Rule != rule {
				t.Errorf("rename from %q: %+v, want deny by %s", p, d, rule)
			}
		}
	}
	for pat := range persistenceSamples {
		if !seen[pat] {
			t.Errorf("sample for %q, which is not a default", pat)
		}
	}
	for _, p := range persistenceNearMisses {
		for _, op := range writes {
			if d := decide(e, op, p, ""); d.Effect != Allow {
				t.Errorf("%s %q: %+v, want allow", op, p, d)
			}
		}
	}
}

// TestPersistenceIndex checks the base-name index against trying every pattern in
// order, on the samples, the near misses and their case variants.
func TestPersistenceIndex(t *testing.T) {
	var paths []string
	for _, ps := range persistenceSamples {
		paths = append(paths, ps...)
	}
	paths = append(paths, persistenceNearMisses...)
	for _, fold := range []bool{false, true} {
		e := mustNew(t, Config{CaseInsensitive: fold, PersistencePatterns: append(DefaultPersistencePatterns(), "**/.bashrc", "**/x")})
		for _, p := range paths {
			for _, q := range []string{p, strings.ToUpper(p)} {
				q, _ = e.clean(q)
				s := newSubject(q)
				want := -1
				for i := range e.persist {
					if e.persist[i].match(&s) {
						want = i
						break
					}
				}
				if got := e.firstPersist(&s); got != want {
					t.Errorf("fold %v, %q: index %d, want %d", fold, q, got, want)
				}
			}
		}
	}
}

func TestAllowGitWrites(t *testing.T) {
	e := mustNew(t, Config{AllowGitWrites: true})
	for _, p := range []string{".git", "sub/.git", ".git/HEAD", ".git/objects/ab/cd", ".git/refs/heads/main", ".git/index",
		".git/modules/m/HEAD", ".git/worktrees/w/HEAD", ".git/info/exclude"} {
		for _, op := range []Op{OpWrite, OpCreate, OpMkdir, OpRemove, OpRename, OpSymlink, OpLink, OpChmod, OpChtimes} {
			if d := decide(e, op, p, ""); d.Effect != Allow {
				t.Errorf("%s %q: %+v, want allow with AllowGitWrites", op, p, d)
			}
		}
	}
	for _, p := range []string{".git/hooks/pre-commit", ".git/config", ".git/modules/m/config", ".git/modules/a/b/hooks/post-checkout",
		".git/worktrees/w/commondir", ".git/worktrees/w/config.worktree", ".git/rebase-merge/git-rebase-todo", ".bashrc"} {
		if d := decide(e, OpWrite, p, ""); d.Effect != Deny {
			t.Errorf("write %q: %+v, want deny with AllowGitWrites", p, d)
		}
	}
	if slices.Contains(e.Config().PersistencePatterns, GitDirPattern) {
		t.Errorf("Config() still lists %s", GitDirPattern)
	}
	// A host's own list loses its .git patterns too; New(e.Config()) decides alike.
	own := mustNew(t, Config{AllowGitWrites: true, PersistencePatterns: []string{"**/.git", "/**/.git/**", "**/.git/hooks/**"}})
	for _, e := range []*Engine{own, mustNew(t, own.Config())} {
		if d := decide(e, OpWrite, ".git/HEAD", ""); d.Effect != Allow {
			t.Errorf("own list: write .git/HEAD: %+v", d)
		}
		if d := decide(e, OpWrite, ".git/hooks/x", ""); d.Effect != Deny {
			t.Errorf("own list: write .git/hooks/x: %+v", d)
		}
	}
	// The default denies, naming the git rule and the overlay.
	if d := decide(Defaults(), OpWrite, ".git/HEAD", ""); d.Effect != Deny || d.Rule != "persistence:"+GitDirPattern || !strings.Contains(d.Reason, "git overlay") {
		t.Errorf("default write .git/HEAD: %+v", d)
	}
	for _, src := range []string{"allow_git_writes = true", `{"allow_git_writes": true}`} {
		f := TOML
		if src[0] == '{' {
			f = JSON
		}
		pe, err := Parse([]byte(src), f)
		if err != nil || !pe.Config().AllowGitWrites {
			t.Fatalf("%s: %v", src, err)
		}
		if d := decide(pe, OpWrite, ".git/index", ""); d.Effect != Allow {
			t.Errorf("%s: write .git/index: %+v", src, d)
		}
	}
}

func TestOpBits(t *testing.T) {
	for i, op := range allOps {
		if got := opBit(op); got != 1<<i {
			t.Errorf("opBit(%s) = %b, want %b", op, got, 1<<i)
		}
	}
	if opBit("@read") != 0 || opBit("") != 0 {
		t.Error("opBit of a non-op")
	}
}

func TestDenyOverrides(t *testing.T) {
	allow := Rule{Effect: Allow, Paths: []string{"src/**"}, Name: "allow-src"}
	deny := Rule{Effect: Deny, Paths: []string{"src/internal/**"}, Reason: "internal", Name: "deny-internal"}
	ask := Rule{Effect: Ask, Ops: []Op{GroupWrite}, Paths: []string{"src/**"}, Name: "ask-src"}
	for _, order := range [][]Rule{{allow, deny, ask}, {deny, ask, allow}, {ask, allow, deny}} {
		e := mustNew(t, Config{Default: Deny, Rules: order})
		cases := []struct {
			op         Op
			path, rule string
			want       Effect
		}{
			{OpRead, "src/internal/x.go", "deny-internal", Deny},
			{OpWrite, "src/internal/x.go", "deny-internal", Deny},
			{OpRead, "src/a.go", "allow-src", Allow},
			{OpWrite, "src/a.go", "ask-src", Ask},
			{OpRead, "docs/a.md", RuleDefault, Deny},
		}
		for _, c := range cases {
			d := decide(e, c.op, c.path, "")
			if d.Effect != c.want || d.Rule != c.rule {
				t.Errorf("order %v: %s %q: %+v, want %v by %s", names(order), c.op, c.path, d, c.want, c.rule)
			}
		}
		if d := decide(e, OpRead, "src/internal/x.go", ""); d.Reason != "internal" {
			t.Errorf("deny reason %q", d.Reason)
		}
	}
}

func names(rs []Rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestFirstAskAndAllowNamed(t *testing.T) {
	e := mustNew(t, Config{Default: Deny, Rules: []Rule{
		{Effect: Allow, Paths: []string{"**"}, Name: "allow-1"},
		{Effect: Ask, Paths: []string{"a/**"}, Name: "ask-1", Reason: "first"},
		{Effect: Allow, Paths: []string{"a/**"}, Name: "allow-2"},
		{Effect: Ask, Paths: []string{"a/b/**"}, Name: "ask-2"},
	}})
	if d := decide(e, OpRead, "a/b/c", ""); d.Effect != Ask || d.Rule != "ask-1" || d.Reason != "first" {
		t.Errorf("got %+v, want ask by ask-1", d)
	}
	if d := decide(e, OpRead, "z", ""); d.Effect != Allow || d.Rule != "allow-1" {
		t.Errorf("got %+v, want allow by allow-1", d)
	}
}

func TestDefaultEffect(t *testing.T) {
	for _, def := range []Effect{Allow, Deny, Ask} {
		e := mustNew(t, Config{Default: def})
		d := decide(e, OpRead, "a.txt", "")
		if d.Effect != def || d.Rule != RuleDefault {
			t.Errorf("default %v: %+v", def, d)
		}
		if def != Allow && d.Reason == "" {
			t.Errorf("default %v: no reason", def)
		}
	}
}

func TestOpsAndGroups(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{
		{Effect: Deny, Ops: []Op{GroupRead}, Paths: []string{"r/**"}},
		{Effect: Deny, Ops: []Op{GroupWrite}, Paths: []string{"w/**"}},
		{Effect: Deny, Ops: []Op{OpRemove, OpChmod}, Paths: []string{"x/**"}},
	}})
	for _, op := range allOps {
		if op == OpCopy {
			continue // its source is a read: below
		}
		dr, dw, dx := decide(e, op, "r/f", ""), decide(e, op, "w/f", ""), decide(e, op, "x/f", "")
		if (dr.Effect == Deny) == op.Writes() {
			t.Errorf("@read rule on %s: %+v", op, dr)
		}
		if (dw.Effect == Deny) != op.Writes() {
			t.Errorf("@write rule on %s: %+v", op, dw)
		}
		if (dx.Effect == Deny) != (op == OpRemove || op == OpChmod) {
			t.Errorf("[remove,chmod] rule on %s: %+v", op, dx)
		}
	}
	if d := decide(e, OpCopy, "r/f", "elsewhere"); d.Effect != Deny || d.Rule != "deny[@read]:r/**" {
		t.Errorf("copy from a read-denied path: %+v", d)
	}
	if d := decide(e, OpCopy, "w/f", "elsewhere"); d.Effect != Allow {
		t.Errorf("copy from a write-denied path: %+v", d)
	}
	if d := decide(e, OpCopy, "elsewhere", "w/f"); d.Effect != Deny || d.Rule != "deny[@write]:w/**" {
		t.Errorf("copy to a write-denied path: %+v", d)
	}
	if d := decide(e, OpRead, "r/f", ""); d.Rule != "deny[@read]:r/**" {
		t.Errorf("derived name %q", d.Rule)
	}
}

func TestRuleNames(t *testing.T) {
	e := mustNew(t, Config{SecretPatterns: []string{}, Rules: []Rule{
		{Effect: Deny, Paths: []string{"**/.ssh/**"}},
		{Effect: Ask, Ops: []Op{GroupWrite, OpChmod}, Paths: []string{"src/**", "go.mod"}},
		{Effect: Allow},
		{Effect: Deny, Paths: []string{"named"}, Name: "custom"},
	}})
	want := []string{"deny:**/.ssh/**", "ask[@write,chmod]:src/**,go.mod", "allow:**", "custom"}
	var got []string
	for _, r := range e.Config().Rules {
		got = append(got, r.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
	if d := decide(e, OpRead, "a/.ssh/k", ""); d.Rule != "deny:**/.ssh/**" {
		t.Errorf("decision names %q", d.Rule)
	}
}

func TestTwoEnds(t *testing.T) {
	e := Defaults()
	cases := []struct {
		op               Op
		path, dest, rule string
	}{
		{OpRename, "a.txt", ".git/hooks/pre-commit", "persistence:**/.git/hooks/**"},
		{OpRename, ".git/hooks/pre-commit", "a.txt", "persistence:**/.git/hooks/**"},
		{OpRename, "x", ".ssh/authorized_keys", "secret:**/.ssh/**"},
		{OpRename, "home/.ssh", "home/keys", "secret:**/.ssh/**"},
		{OpCopy, ".env", "x", "secret:**/.env"},
		{OpCopy, "x", "app/.env", "secret:**/.env"},
		{OpCopy, "x", ".bashrc", "persistence:**/.bashrc"},
		{OpLink, ".env", "x", "secret:**/.env"},
		{OpLink, ".bashrc", "innocent", "persistence:**/.bashrc"},
		{OpLink, "x", ".zshrc", "persistence:**/.zshrc"},
		{OpSymlink, "link", "home/.ssh/id_rsa", "secret:**/.ssh/**"},
		{OpSymlink, "link", ".git/config", "persistence:**/.git/config"},
		{OpSymlink, ".vscode", "elsewhere", "persistence:**/.vscode/**"},
	}
	for _, c := range cases {
		if d := decide(e, c.op, c.path, c.dest); d.Effect != Deny || d.Rule != c.rule {
			t.Errorf("%s %q -> %q: %+v, want deny by %s", c.op, c.path, c.dest, d, c.rule)
		}
	}
	for _, c := range [][3]string{{"rename", "a", "b"}, {"copy", ".bashrc", "bashrc.copy"}, {"link", "a", "b"}, {"symlink", "l", "README.md"}} {
		if d := decide(e, Op(c[0]), c[1], c[2]); d.Effect != Allow {
			t.Errorf("%s %q -> %q: %+v, want allow", c[0], c[1], c[2], d)
		}
	}

	// The rules decide each end too.
	r := mustNew(t, Config{Default: Deny, Rules: []Rule{
		{Effect: Allow, Paths: []string{"src/**", "out/**"}, Name: "allow-work"},
		{Effect: Ask, Ops: []Op{GroupWrite}, Paths: []string{"out/**"}, Name: "ask-out"},
		{Effect: Allow, Ops: []Op{OpRead}, Paths: []string{"ro/**"}, Name: "read-ro"},
	}})
	rc := []struct {
		op               Op
		path, dest, rule string
		want             Effect
	}{
		{OpRename, "src/a", "src/b", "allow-work", Allow},
		{OpRename, "src/a", "etc/b", RuleDefault, Deny},
		{OpRename, "etc/a", "src/b", RuleDefault, Deny},
		{OpRename, "src/a", "out/b", "ask-out", Ask},
		{OpRename, "out/a", "src/b", "ask-out", Ask},
		{OpCopy, "ro/a", "src/a", "read-ro", Allow}, // the source of a copy is a read
		{OpCopy, "src/a", "ro/a", RuleDefault, Deny},
	}
	for _, c := range rc {
		if d := decide(r, c.op, c.path, c.dest); d.Effect != c.want || d.Rule != c.rule {
			t.Errorf("%s %q -> %q: %+v, want %v by %s", c.op, c.path, c.dest, d, c.want, c.rule)
		}
	}
	// Between two allowing ends, the rule is named rather than the default.
	a := mustNew(t, Config{Rules: []Rule{{Effect: Allow, Paths: []string{"b"}, Name: "allow-b"}}})
	if d := decide(a, OpRename, "a", "b"); d.Effect != Allow || d.Rule != "allow-b" {
		t.Errorf("rename a -> b: %+v, want allow by allow-b", d)
	}
}

func TestMaxFileSize(t *testing.T) {
	e := mustNew(t, Config{MaxFileSize: 100})
	ctx := context.Background()
	for _, c := range []struct {
		size int64
		want Effect
	}{{-1, Allow}, {0, Allow}, {100, Allow}, {101, Deny}, {1 << 40, Deny}} {
		d := e.Decide(ctx, &Request{Op: OpWrite, Path: "a.bin", Size: c.size})
		if d.Effect != c.want || (c.want == Deny && (d.Rule != RuleMaxFileSize || !strings.Contains(d.Reason, "100"))) {
			t.Errorf("size %d: %+v, want %v", c.size, d, c.want)
		}
	}
	if d := Defaults().Decide(ctx, &Request{Op: OpWrite, Path: "a", Size: 1 << 50}); d.Effect != Allow {
		t.Errorf("no limit: %+v", d)
	}
}

func TestCaseInsensitive(t *testing.T) {
	fold := mustNew(t, Config{CaseInsensitive: true, Rules: []Rule{
		{Effect: Deny, Ops: []Op{GroupWrite}, Paths: []string{"Docs/**"}, Name: "docs"},
	}})
	exact := mustNew(t, Config{Rules: []Rule{
		{Effect: Deny, Ops: []Op{GroupWrite}, Paths: []string{"Docs/**"}, Name: "docs"},
	}})
	for _, c := range []struct {
		op   Op
		path string
		rule string
	}{
		{OpRead, ".SSH/id_rsa", "secret:**/.ssh/**"},
		{OpRead, "Home/.Ssh", "secret:**/.ssh/**"},
		{OpRead, "app/.ENV", "secret:**/.env"},
		{OpRead, "certs/CA.PEM", "secret:**/*.pem"},
		{OpRead, "tls/server.\u212aey", "secret:**/*.key"}, // KELVIN SIGN folds to k
		{OpRead, ".\u017fsh/id_rsa", "secret:**/.ssh/**"},  // LATIN SMALL LETTER LONG S folds to s
		{OpWrite, ".Git/Hooks/pre-commit", "persistence:**/.git/hooks/**"},
		{OpWrite, "docs/a.md", "docs"},
		{OpWrite, "DOCS/a.md", "docs"},
	} {
		if d := decide(fold, c.op, c.path, ""); d.Effect != Deny || d.Rule != c.rule {
			t.Errorf("folding: %s %q: %+v, want deny by %s", c.op, c.path, d, c.rule)
		}
		if c.rule == "docs" {
			continue
		}
		if d := decide(exact, c.op, c.path, ""); d.Effect != Allow {
			t.Errorf("exact: %s %q: %+v, want allow", c.op, c.path, d)
		}
	}
	if d := decide(exact, OpWrite, "Docs/a", ""); d.Effect != Deny {
		t.Errorf("exact rule on its own case: %+v", d)
	}
	if d := decide(exact, OpWrite, "docs/a", ""); d.Effect != Allow {
		t.Errorf("exact rule on another case: %+v", d)
	}
}

func TestHideSecrets(t *testing.T) {
	show, hide := Defaults(), mustNew(t, Config{HideSecrets: true})
	for _, c := range []struct {
		path       string
		shown      bool // listed when HideSecrets is off
		hiddenRule string
	}{
		{".env", true, "secret:**/.env"},
		{"a/server.pem", true, "secret:**/*.pem"},
		{"home/.ssh", false, "secret:**/.ssh/**"},
		{"home/.ssh/id_rsa", false, "secret:**/.ssh/**"},
		{".aws/config", false, "secret:**/.aws/**"},
	} {
		if d := decide(show, OpList, c.path, ""); (d.Effect == Allow) != c.shown {
			t.Errorf("list %q without HideSecrets: %+v", c.path, d)
		}
		if d := decide(hide, OpList, c.path, ""); d.Effect != Deny || d.Rule != c.hiddenRule {
			t.Errorf("list %q with HideSecrets: %+v", c.path, d)
		}
		// Whatever the setting, the name's metadata stays out of reach.
		for _, e := range []*Engine{show, hide} {
			if d := decide(e, OpStat, c.path, ""); d.Effect != Deny {
				t.Errorf("stat %q: %+v", c.path, d)
			}
		}
	}
	// A rule can still refuse listing a file the secret patterns let through.
	e := mustNew(t, Config{Rules: []Rule{{Effect: Deny, Ops: []Op{OpList}, Paths: []string{"**/.env"}}}})
	if d := decide(e, OpList, ".env", ""); d.Effect != Deny || d.Rule != "deny[list]:**/.env" {
		t.Errorf("list .env with a rule: %+v", d)
	}
}

func TestRootAndPatternForms(t *testing.T) {
	e := mustNew(t, Config{Rules: []Rule{
		{Effect: Deny, Ops: []Op{OpChmod}, Paths: []string{"*"}, Name: "star"},
		{Effect: Deny, Ops: []Op{OpChtimes}, Paths: []string{"**"}, Name: "all"},
		{Effect: Deny, Ops: []Op{OpMkdir}, Paths: []string{"/src/**"}, Name: "leading-slash"},
		{Effect: Deny, Ops: []Op{OpRemove}, Paths: []string{"."}, Name: "root"},
		{Effect: Deny, Ops: []Op{OpLink}, Paths: []string{"{a,b}/[xy]?.txt"}, Name: "classes"},
	}})
	cases := []struct {
		op   Op
		path string
		want bool
	}{
		{OpChmod, ".", false}, {OpChmod, "a", true}, {OpChmod, "a/b", false},
		{OpChtimes, ".", true}, {OpChtimes, "a/b/c", true},
		{OpMkdir, "src", true}, {OpMkdir, "src/x", true}, {OpMkdir, "srcx", false},
		{OpRemove, ".", true}, {OpRemove, "a", false},
		{OpLink, "a/x1.txt", true}, {OpLink, "b/yz.txt", true}, {OpLink, "c/x1.txt", false}, {OpLink, "a/z1.txt", false},
	}
	for _, c := range cases {
		if d := decide(e, c.op, c.path, ""); (d.Effect == Deny) != c.want {
			t.Errorf("%s %q: %+v, want denied=%v", c.op, c.path, d, c.want)
		}
	}
}

func TestFailClosed(t *testing.T) {
	e := Defaults()
	ctx := context.Background()
	if d := e.Decide(ctx, nil); d.Effect != Deny || d.Rule != RuleInvalidRequest {
		t.Errorf("nil request: %+v", d)
	}
	if d := decide(e, Op("frobnicate"), "a", ""); d.Effect != Deny || d.Rule != RuleUnknownOp {
		t.Errorf("unknown op: %+v", d)
	}
	for _, p := range []string{"", "/a", "a/", "a//b", "../.ssh", "a/./b", ".ssh/..", "./a"} {
		if d := decide(e, OpRead, p, ""); d.Effect != Deny || d.Rule != RuleInvalidPath {
			t.Errorf("path %q: %+v", p, d)
		}
		if d := decide(e, OpRename, "a", p); p != "" && (d.Effect != Deny || d.Rule != RuleInvalidPath) {
			t.Errorf("dest %q: %+v", p, d)
		}
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // in the message
	}{
		{"malformed rule pattern", Config{Rules: []Rule{{Effect: Deny, Paths: []string{"a/[b"}}}}, `"a/[b"`},
		{"unclosed brace", Config{Rules: []Rule{{Effect: Deny, Paths: []string{"{a,b"}}}}, `"{a,b"`},
		{"empty pattern", Config{Rules: []Rule{{Effect: Deny, Paths: []string{""}}}}, "empty pattern"},
		{"dotdot", Config{Rules: []Rule{{Effect: Deny, Paths: []string{"../x"}}}}, `".."`},
		{"dot element", Config{Rules: []Rule{{Effect: Deny, Paths: []string{"a/./b"}}}}, `"."`},
		{"empty element", Config{Rules: []Rule{{Effect: Deny, Paths: []string{"a//b"}}}}, "empty path element"},
		{"trailing slash", Config{Rules: []Rule{{Effect: Deny, Paths: []string{"a/"}}}}, "trailing"},
		{"unknown op", Config{Rules: []Rule{{Effect: Deny, Ops: []Op{"delete"}}}}, `"delete"`},
		{"bad effect", Config{Rules: []Rule{{Effect: Effect(7), Name: "r7"}}}, "r7"},
		{"bad default", Config{Default: Effect(-1)}, "default"},
		{"negative size", Config{MaxFileSize: -1}, "negative"},
		{"bad secret", Config{SecretPatterns: []string{"**/[x"}}, `secret pattern "**/[x"`},
		{"bad persistence", Config{PersistencePatterns: []string{"x/"}}, `persistence pattern "x/"`},
	}
	for _, c := range cases {
		e, err := New(c.cfg)
		if err == nil || e != nil {
			t.Errorf("%s: New returned %v, %v", c.name, e, err)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want ErrInvalidConfig mentioning %s", c.name, err, c.want)
		}
	}
}

func TestConfigCopies(t *testing.T) {
	secrets := []string{"**/secret"}
	rules := []Rule{{Effect: Deny, Paths: []string{"a"}, Ops: []Op{OpRead}}}
	e := mustNew(t, Config{SecretPatterns: secrets, Rules: rules})
	secrets[0], rules[0].Paths[0], rules[0].Ops[0] = "changed", "changed", OpWrite
	c := e.Config()
	if c.SecretPatterns[0] != "**/secret" || c.Rules[0].Paths[0] != "a" || c.Rules[0].Ops[0] != OpRead {
		t.Fatalf("Config reflects the caller's later edits: %+v", c)
	}
	if !slices.Equal(c.PersistencePatterns, DefaultPersistencePatterns()) {
		t.Errorf("persistence defaults not filled in: %q", c.PersistencePatterns)
	}
	c.SecretPatterns[0], c.Rules[0].Paths[0] = "x", "x"
	if c2 := e.Config(); c2.SecretPatterns[0] != "**/secret" || c2.Rules[0].Paths[0] != "a" {
		t.Errorf("Config returned shared slices")
	}
	if d := decide(e, OpRead, "a", ""); d.Effect != Deny {
		t.Errorf("engine changed by caller edits: %+v", d)
	}
	if d := decide(e, OpRead, "x/secret", ""); d.Effect != Deny {
		t.Errorf("custom secret: %+v", d)
	}
	if d := decide(e, OpRead, ".ssh/id_rsa", ""); d.Effect != Allow {
		t.Errorf("secret list not replaced: %+v", d)
	}
	none := mustNew(t, Config{SecretPatterns: []string{}, PersistencePatterns: []string{}})
	again := mustNew(t, none.Config()) // an empty list stays empty, not the defaults
	for _, e := range []*Engine{none, again} {
		if d := decide(e, OpWrite, ".ssh/.bashrc", ""); d.Effect != Allow {
			t.Errorf("empty lists: %+v", d)
		}
	}
}

// TestPrefilterAgrees checks the compiled matcher against doublestar on its own.
func TestPrefilterAgrees(t *testing.T) {
	pats := []string{"**/.ssh/**", "**/.env", "**/.env.*", "**/*.pem", "a/**/b", "**/x/y/**", "*.{go,mod}",
		"src/*_test.go", "{a,b/c}/d", "[abc]x/**", "**/[.]env", "a?c/**/z*", "**/credentials.json",
		"x/{a,[bc]}*y", "{**/,}k", "a/{b,c/**}/d", "lit/eral.txt", "**/*.[pk]e[my]", "**/.git/hooks/**",
		"**/.git/config", "src/**", "a/b/**", "**/x*", "**/*y", "**/a/b", "**/a"}
	paths := []string{".ssh", "a/.ssh/x", ".env", "x/.env", ".env.local", "a.pem", "a/b", "a/x/b", "x/y",
		"q/x/y/z", "main.go", "go.mod", "src/a_test.go", "a/d", "b/c/d", "c/d", "ax", "bx/q", ".env",
		"abc/z", "abc/q/zz", "credentials.json", "x/ay", "x/bzy", "k", "a/k", "a/b/d", "a/c/e/d",
		"lit/eral.txt", "lit/eral.txtx", "a.key", "b.pey", "x.pex", ".git/hooks", "a/.git/hooks/x", ".git/hooksx",
		"x.git/hooks", ".git/config", "a/.git/config", "a.git/config", ".git/config/x", "src", "srcx", "src/a",
		"xsrc/a", "a/b", "a/b/c", "a/bc", "ab/b", "x", "xa", "q/x", "qx/y", "y", "ay/b", "a/a/b", "za/b", "a/a"}
	for _, src := range pats {
		for _, fold := range []bool{false, true} {
			c, err := compilePattern(src, fold)
			if err != nil {
				t.Fatalf("%q: %v", src, err)
			}
			for _, p := range paths {
				want, _ := doublestar.Match(c.pat, p)
				s := newSubject(p)
				if want && !c.mayMatch(&s) {
					t.Errorf("%q (lead %q) on %q: mayMatch false, doublestar matches", src, c.lead, p)
				}
				if got := c.match(&s); got != want {
					t.Errorf("%q (shape %d %q, suffix %q, lit %q) on %q: %v, doublestar says %v", src, c.shape, c.k, c.suffix, c.lit, p, got, want)
				}
			}
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	e := Defaults()
	rules := mustNew(b, Config{Rules: []Rule{
		{Effect: Deny, Ops: []Op{GroupWrite}, Paths: []string{"vendor/**", "**/*.pb.go"}},
		{Effect: Ask, Ops: []Op{OpRemove}},
		{Effect: Ask, Ops: []Op{GroupWrite}, Paths: []string{"go.mod", "go.sum", "Makefile"}},
	}})
	fold := mustNew(b, Config{CaseInsensitive: true})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		e    *Engine
		r    Request
	}{
		{"defaults/read", e, Request{Op: OpRead, Path: "src/internal/server/handler.go", Size: -1}},
		{"defaults/write", e, Request{Op: OpWrite, Path: "src/internal/server/handler.go", Size: 4096}},
		{"defaults/rename", e, Request{Op: OpRename, Path: "src/a/old.go", Dest: "src/b/new.go", Size: -1}},
		{"defaults/secret", e, Request{Op: OpRead, Path: "home/.ssh/id_rsa", Size: -1}},
		{"rules/write", rules, Request{Op: OpWrite, Path: "src/internal/server/handler.go", Size: 4096}},
		{"fold/read", fold, Request{Op: OpRead, Path: "src/internal/server/handler.go", Size: -1}},
		{"defaults/deep-stat", e, Request{Op: OpStat, Path: "d00/d01/d02/d03/d04/d05/d06/d07/d08/d09/d10/d11/d12/d13/d14/d15/leaf", Size: -1}},
		{"defaults/deep-create", e, Request{Op: OpCreate, Path: "d00/d01/d02/d03/d04/d05/d06/d07/d08/d09/d10/d11/d12/d13/d14/d15/leaf", Size: -1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := c.r
			b.ReportAllocs()
			for b.Loop() {
				_ = c.e.Decide(ctx, &r)
			}
		})
		// The reference engine (pattern by pattern), for comparison.
		b.Run(c.name+"/reference", func(b *testing.B) {
			r := c.r
			for b.Loop() {
				_ = refDecide(c.e, &r)
			}
		})
	}
}
