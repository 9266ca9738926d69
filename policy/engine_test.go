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
	OpSymlink, OpReadlink, OpLink, OpChmod, OpChtimes, OpSub}

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
	nearMisses := []string{
		".envrc", "a.pem.txt", "pem", "a.pemx", ".env-example", "env", "my.env", ".environment",
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

func TestDefaultPersistencePatterns(t *testing.T) {
	e := Defaults()
	traps := []struct{ path, rule string }{
		{".bashrc", "persistence:**/.bashrc"},
		{"home/user/.bashrc", "persistence:**/.bashrc"},
		{".zshrc", "persistence:**/.zshrc"},
		{".gitconfig", "persistence:**/.gitconfig"},
		{".git/hooks", "persistence:**/.git/hooks/**"},
		{".git/hooks/pre-commit", "persistence:**/.git/hooks/**"},
		{"vendor/lib/.git/hooks/post-checkout", "persistence:**/.git/hooks/**"},
		{".git/config", "persistence:**/.git/config"},
		{"sub/.git/config", "persistence:**/.git/config"},
		{".vscode", "persistence:**/.vscode/**"},
		{".vscode/tasks.json", "persistence:**/.vscode/**"},
		{".idea/workspace.xml", "persistence:**/.idea/**"},
		{".mcp.json", "persistence:**/.mcp.json"},
		{"proj/.mcp.json", "persistence:**/.mcp.json"},
	}
	var writes, reads []Op
	for _, op := range allOps {
		if op.Writes() {
			writes = append(writes, op)
		} else {
			reads = append(reads, op)
		}
	}
	for _, tr := range traps {
		for _, op := range writes {
			if op == OpCopy {
				continue // a copy's source is read: below
			}
			if d := decide(e, op, tr.path, ""); d.Effect != Deny || d.Rule != tr.rule {
				t.Errorf("%s %q: %+v, want deny by %s", op, tr.path, d, tr.rule)
			}
		}
		for _, op := range reads {
			if d := decide(e, op, tr.path, ""); d.Effect != Allow {
				t.Errorf("%s %q: %+v, want allow (reads are not persistence)", op, tr.path, d)
			}
		}
		if d := decide(e, OpCopy, tr.path, "copy"); d.Effect != Allow {
			t.Errorf("copy from %q: %+v, want allow", tr.path, d)
		}
		if d := decide(e, OpCopy, "x", tr.path); d.Effect != Deny || d.Rule != tr.rule {
			t.Errorf("copy to %q: %+v, want deny by %s", tr.path, d, tr.rule)
		}
	}
	for _, p := range []string{".git/HEAD", ".git/objects/ab/cd", ".git/config.bak", ".bashrc.bak", "bashrc",
		".vscodex/a", "git/hooks/x", ".git/hooksx/y", "mcp.json", "a.mcp.json"} {
		if d := decide(e, OpWrite, p, ""); d.Effect != Allow {
			t.Errorf("write %q: %+v, want allow", p, d)
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
	} {
		b.Run(c.name, func(b *testing.B) {
			r := c.r
			b.ReportAllocs()
			for b.Loop() {
				_ = c.e.Decide(ctx, &r)
			}
		})
	}
}
