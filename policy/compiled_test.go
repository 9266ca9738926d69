package policy

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
)

// refValidPath is the reference for validPath: fs.ValidPath without its UTF-8
// rule (each run of bytes that are not UTF-8 stands in for one letter).
func refValidPath(s string) bool { return fs.ValidPath(strings.ToValidUTF8(s, "x")) }

// clean is the reference for Engine.cleanFast: refValidPath, then folding.
func (e *Engine) clean(s string) (string, bool) {
	if !refValidPath(s) {
		return "", false
	}
	if e.fold {
		s = foldCase(s)
	}
	return s, true
}

// refDecide is Engine.Decide on the reference engine: every path checked with
// refValidPath and every end decided pattern by pattern (refDecideEnd), as the
// engine decided before its patterns were compiled.
func refDecide(e *Engine, r *Request) Decision {
	if r == nil {
		return Decision{Effect: Deny, Rule: RuleInvalidRequest, Reason: "no request"}
	}
	bit := opBit(r.Op)
	if bit == 0 {
		return Decision{Effect: Deny, Rule: RuleUnknownOp, Reason: "unknown operation"}
	}
	if e.maxSize > 0 && r.Size > e.maxSize {
		return Decision{Effect: Deny, Rule: RuleMaxFileSize, Reason: e.maxWhy}
	}
	p, ok := e.clean(r.Path)
	if !ok {
		return Decision{Effect: Deny, Rule: RuleInvalidPath, Reason: "the policy decides only clean paths"}
	}
	srcOp, srcBit := r.Op, bit
	if r.Op == OpCopy {
		srcOp, srcBit = OpRead, opBit(OpRead)
	}
	d := e.refDecideEnd(srcOp, srcBit, p)
	if d.Effect == Deny || r.Dest == "" {
		return d
	}
	q, ok := e.clean(r.Dest)
	if !ok {
		return Decision{Effect: Deny, Rule: RuleInvalidPath, Reason: "the policy decides only clean paths"}
	}
	return combine(d, e.refDecideEnd(r.Op, bit, q))
}

// Elements patterns and paths are made of: dot files, the default patterns'
// names, case and Unicode variants that fold onto them (the long s, the Kelvin
// sign, a dotless i, NFD accents), "." and "..", and globs with classes and
// alternatives.
var (
	genNames = []string{
		"a", "b", "A", "src", ".ssh", ".SSH", ".\u017fsh", ".git", ".GIT", ".Git", "hooks", "config",
		"config.worktree", "modules", "x.git", ".env", ".env.local", ".envrc", "id_rsa", "k.pem", "a.pem.txt",
		"\u212a.key", "K.KEY", "caf\u00e9", "cafe\u0301", "\u0130", "i", "site-packages", "dist-packages",
		"x.pth", ".bashrc", ".claude", "credentials.json", ".npmrc", "lefthook.yml", ".lefthook-local.yml",
		"mise.toml", ".aider.conf", "..a", "a..", "...", "*", "[x]", "{a}", "\u00df", "SS", "\u03a3", "\u03c2",
	}
	genGlobs = []string{
		"**", "*", "?", "*.pem", ".env.*", "[a-c]", "[!.]*", "[^a]", "{a,b}", "{x,.git}", "{,.}lefthook{,-local}.yml",
		"*{.key,.pem}", "?s?", "[.]env", ".*", "*s*", "[a-z]*[0-9]", "{site,dist}-packages", "[[]x]", "\\*",
		"{a,{b,c}}", "[A-Z]", "*\u017f*", "**x", "{a/b,c}", "[a/]",
	}
	// genRawNames are names that are not UTF-8 (paths only: pattern text is
	// UTF-8): Latin-1, a cut rune, a lone continuation byte, next to the default
	// patterns' names, and U+FFFD itself, which an invalid byte must not equal.
	genRawNames = []string{
		"caf\xe9", "\xff", "\xc3", ".env\xff", "\xff.env", "k.pem\x80", "\x80.pem", ".ss\xe8", ".\xe9sh", "\xc3\xa9\xff",
		"\ufffd", "K\xff.KEY", ".ssh\xc3",
	}
	genBadPaths = []string{"", ".", "..", "a/..", "../a", "a/./b", "a//b", "/a", "a/", ".ssh/", "a/b/", "\xff/", "a/\xc3/.."}
)

func genPattern(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	els := make([]string, n)
	for i := range els {
		if r.IntN(2) == 0 {
			els[i] = genNames[r.IntN(len(genNames))]
		} else {
			els[i] = genGlobs[r.IntN(len(genGlobs))]
		}
	}
	p := strings.Join(els, "/")
	if r.IntN(10) == 0 {
		p = "/" + p
	}
	if r.IntN(20) == 0 {
		p = "."
	}
	return p
}

func genPath(r *rand.Rand) string {
	if r.IntN(15) == 0 {
		return genBadPaths[r.IntN(len(genBadPaths))]
	}
	if r.IntN(20) == 0 {
		return "."
	}
	n := 1 + r.IntN(6)
	els := make([]string, n)
	for i := range els {
		els[i] = genNames[r.IntN(len(genNames))]
		if r.IntN(8) == 0 {
			els[i] = genRawNames[r.IntN(len(genRawNames))]
		}
	}
	p := strings.Join(els, "/")
	switch r.IntN(30) {
	case 0:
		p += "/"
	case 1:
		p += "/.."
	case 2:
		p = "./" + p
	}
	return p
}

// genConfig makes a configuration: random secret and persistence lists (or the
// defaults), rules with op groups, folding, hiding.
func genConfig(r *rand.Rand) Config {
	c := Config{CaseInsensitive: r.IntN(2) == 0, HideSecrets: r.IntN(3) == 0, AllowGitWrites: r.IntN(4) == 0}
	c.Default = Effect(r.IntN(3))
	pats := func() []string {
		out := make([]string, r.IntN(6))
		for i := range out {
			out[i] = genPattern(r)
		}
		return out
	}
	if r.IntN(3) > 0 {
		c.SecretPatterns = pats()
	}
	if r.IntN(3) > 0 {
		c.PersistencePatterns = pats()
	}
	for range r.IntN(5) {
		rule := Rule{Effect: Effect(r.IntN(3)), Paths: pats()}
		for range r.IntN(3) {
			rule.Ops = append(rule.Ops, append(allOps[:], GroupRead, GroupWrite)[r.IntN(len(allOps)+2)])
		}
		c.Rules = append(c.Rules, rule)
	}
	return c
}

// newValid compiles c, dropping the patterns New refuses one by one.
func newValid(c Config) *Engine {
	keep := func(ps []string) []string {
		if ps == nil {
			return nil
		}
		out := []string{}
		for _, p := range ps {
			if _, err := compilePattern(p, c.CaseInsensitive); err == nil {
				out = append(out, p)
			}
		}
		return out
	}
	c.SecretPatterns, c.PersistencePatterns = keep(c.SecretPatterns), keep(c.PersistencePatterns)
	for i := range c.Rules {
		c.Rules[i].Paths = keep(c.Rules[i].Paths)
	}
	e, err := New(c)
	if err != nil {
		panic(err)
	}
	return e
}

// checkSame fails t if e decides any request on path (each op, alone and as
// either end of a two-path call beside other) differently from the reference.
func checkSame(t *testing.T, e *Engine, path, other string) {
	t.Helper()
	ctx := context.Background()
	for _, op := range allOps {
		for _, r := range []Request{
			{Op: op, Path: path, Size: -1},
			{Op: op, Path: path, Dest: other, Size: -1},
			{Op: op, Path: other, Dest: path, Size: -1},
		} {
			got, want := e.Decide(ctx, &r), refDecide(e, &r)
			if got != want {
				t.Fatalf("%s %q -> %q under %+v:\ncompiled  %+v\nreference %+v", r.Op, r.Path, r.Dest, e.Config(), got, want)
			}
			if e.Allows(ctx, &r) != (want.Effect == Allow) {
				t.Fatalf("%s %q -> %q under %+v: Allows %v, reference %+v", r.Op, r.Path, r.Dest, e.Config(), !(want.Effect == Allow), want)
			}
		}
	}
}

// TestCompiledMatchesReference decides generated requests under generated rule
// sets with the compiled matcher and with the reference engine, and requires
// the same decision (effect, rule and reason) every time.
func TestCompiledMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 1))
	configs, paths := 400, 60
	if testing.Short() {
		configs = 100
	}
	for range configs {
		e := newValid(genConfig(r))
		if e.compiled == nil {
			t.Fatal("a small rule set was not compiled")
		}
		for range paths {
			checkSame(t, e, genPath(r), genPath(r))
		}
	}
	// The default engines on the generated paths and on every default pattern
	// spelled out as a path, at the top and below.
	fold, err := New(Config{CaseInsensitive: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{Defaults(), fold} {
		for range 3000 {
			checkSame(t, e, genPath(r), genPath(r))
		}
		for _, p := range append(DefaultPersistencePatterns(), DefaultSecretPatterns()...) {
			for _, s := range []string{"x", "A", ".git"} {
				name := strings.NewReplacer("**", s, "*", s, "{", "", "}", "", ",", "", "[", "", "]", "").Replace(p)
				checkSame(t, e, name, "y")
				checkSame(t, e, "home/u/"+name, "y")
				checkSame(t, e, strings.ToUpper(name), "y")
			}
		}
	}
}

// TestCompiledForms pins the compiled form's edge cases against the reference:
// "**" beside nothing, around literals and alone, the root, classes and
// alternatives spelled out, patterns left to the reference matcher.
func TestCompiledForms(t *testing.T) {
	pats := []string{
		"**", "**/**", "a/**/**/b", "**/a/**", "a/**", "**/a", ".", "*", "*/**", "a/*/b", "**/.git/**/config",
		"{a,b}/[xy]?.txt", "**/{lefthook,.lefthook}{,-local}.{yml,yaml}", "a\\*b", "{**/,}k", "[a/]b", "a**",
		"**/.env.*", "**/*.pem", "{a/b,c}/d", "**/{site,dist}-packages/*.pth", "[!.]*/**", "**/?", "x{,y}", "{,a}/b", "a*/**",
	}
	paths := []string{
		".", "a", "b", "a/b", "a/x/b", "a/x/y/b", "x/a", "x/a/y", "k", "x/k", "a*b", "ab", "a/b/c", "b/c/d",
		"c/d", "a/x1.txt", "b/yz.txt", ".git/config", "x/.git/modules/m/config", ".lefthook-local.yml",
		"lefthook.yaml", "q/.env.local", "k.pem", "site-packages/x.pth", "dist-packages/a/x.pth", ".a/b", "z",
	}
	for i, p := range pats {
		for _, fold := range []bool{false, true} {
			e, err := New(Config{CaseInsensitive: fold, SecretPatterns: pats[:i+1], PersistencePatterns: pats[i:],
				Rules: []Rule{{Effect: Ask, Paths: []string{p}}, {Effect: Allow, Ops: []Op{GroupRead}, Paths: pats[:i]}}})
			if err != nil {
				t.Fatalf("%q: %v", p, err)
			}
			for _, path := range paths {
				checkSame(t, e, path, "o")
				checkSame(t, e, strings.ToUpper(path), "o")
			}
		}
	}
}

// TestCompiledFallbacks: a rule set larger than the compiled form takes, and a
// path that needs more positions than it follows, are decided by the reference
// matcher, alike.
func TestCompiledFallbacks(t *testing.T) {
	var many []string
	for i := range maxIDs + 1 {
		many = append(many, "**/n"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+"/**")
	}
	big, err := New(Config{SecretPatterns: many})
	if err != nil {
		t.Fatal(err)
	}
	if big.compiled != nil {
		t.Fatal("more than maxIDs patterns compiled")
	}
	checkSame(t, big, "q/nxa/z", "o")
	// Every "**/a/**/a/.../b" position alive at once on a path of a's.
	var deep []string
	for i := range maxStates + 2 {
		deep = append(deep, strings.Repeat("**/a/", i+1)+"b")
	}
	e, err := New(Config{SecretPatterns: []string{}, PersistencePatterns: deep})
	if err != nil {
		t.Fatal(err)
	}
	path := strings.Repeat("a/", 40) + "b"
	var got idSet
	if e.compiled.write.match(path, &got) {
		t.Fatal("the walk did not overflow its states")
	}
	checkSame(t, e, path, "o")
	checkSame(t, e, strings.Repeat("a/", 40)+"c", "o")
}

// TestValidPathAgrees: the one-pass path check answers as fs.ValidPath less
// its UTF-8 rule (refValidPath).
func TestValidPathAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 33))
	cases := append([]string{"", ".", "..", "/", "a", "a/", "/a", "a//b", "a/./b", "a/../b", "...", ".a", "a.", "\xff", "é/."}, genBadPaths...)
	for range 5000 {
		cases = append(cases, genPath(r))
	}
	for _, s := range cases {
		if got, want := validPath(s), refValidPath(s); got != want {
			t.Errorf("validPath(%q) = %v, refValidPath %v", s, got, want)
		}
	}
}

// FuzzCompiled decides a request under a rule set made of the fuzzed patterns
// (one a line: secrets, persistence patterns and rules in turn) with the
// compiled matcher and the reference engine, and requires the same decision.
func FuzzCompiled(f *testing.F) {
	seeds := [][2]string{
		{"**/.ssh/**\n**/.git/**/config\n{a,b}/**", "x/.git/modules/m/config"},
		{"**/*.pem\n**/.env.*\n**", ".env.local"}, {"a/**/b\n**/a/**\n.", "a/a/b"},
		{"**/{lefthook,.lefthook}{,-local}.yml\n[!.]*\n*/**", ".lefthook-local.yml"},
		{"**/.SSH/**\n\\*\n{a/b,c}/d", ".\u017fsh/k"}, {"**/\u212a.key\n?\n**/?/**", "K.KEY"},
		{"a**\n[a/]b\n**/**/x", "a/b/x"}, {"**/caf\u00e9/**\n*\u00e9\n**", "cafe\u0301/x"},
	}
	for i, s := range seeds {
		f.Add(s[0], s[1], "o/p", uint8(i), i%2 == 0, i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, pats, path, other string, opIdx uint8, fold, hide bool) {
		if len(pats) > 512 || len(path) > 256 || len(other) > 256 {
			return // bound the work of backtracking matches
		}
		c := Config{CaseInsensitive: fold, HideSecrets: hide, SecretPatterns: []string{}, PersistencePatterns: []string{}}
		for i, p := range strings.Split(pats, "\n") {
			switch i % 3 {
			case 0:
				c.SecretPatterns = append(c.SecretPatterns, p)
			case 1:
				c.PersistencePatterns = append(c.PersistencePatterns, p)
			default:
				c.Rules = append(c.Rules, Rule{Effect: Effect(int(opIdx) / 16 % 3), Ops: []Op{allOps[i%len(allOps)]}, Paths: []string{p}})
			}
		}
		e := newValid(c)
		ctx := context.Background()
		// Three rounds: the second keeps the walk of path's directory, the
		// third resumes from it (walkShared).
		for range 3 {
			fuzzRound(ctx, t, e, path, other, opIdx, pats, fold, hide)
		}
	})
}

// fuzzRound is one round of FuzzCompiled's requests.
func fuzzRound(ctx context.Context, t *testing.T, e *Engine, path, other string, opIdx uint8, pats string, fold, hide bool) {
	t.Helper()
	for _, op := range []Op{allOps[int(opIdx)%len(allOps)], OpList, OpWrite, OpRead} {
		for _, r := range []Request{{Op: op, Path: path, Size: -1}, {Op: op, Path: other, Dest: path, Size: -1}} {
			if got, want := e.Decide(ctx, &r), refDecide(e, &r); got != want {
				t.Fatalf("%s %q -> %q under %q (fold %v, hide %v):\ncompiled  %+v\nreference %+v",
					r.Op, r.Path, r.Dest, pats, fold, hide, got, want)
			}
			if e.Allows(ctx, &r) != refAllows(e, &r) {
				t.Fatalf("%s %q -> %q under %q: Allows disagrees with the reference", r.Op, r.Path, r.Dest, pats)
			}
		}
	}
}

// refAllows reports whether the reference engine allows r.
func refAllows(e *Engine, r *Request) bool { return refDecide(e, r).Effect == Allow }

// TestOpCopyBit: the constant Decide tells a copy by is OpCopy's bit.
func TestOpCopyBit(t *testing.T) {
	if opBit(OpCopy) != opCopyBit {
		t.Fatalf("opBit(OpCopy) = %b, opCopyBit %b", opBit(OpCopy), opCopyBit)
	}
}

// TestWalkShared: a walk resumed from a directory's kept walk (walkShared,
// walkDir) answers exactly as the whole walk, for every split of generated
// paths under generated rule sets; and Decide, deciding a directory's
// children in a row (so that the directory's walk is kept and shared),
// decides each as the reference engine does.
func TestWalkShared(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 2))
	configs := 300
	if testing.Short() {
		configs = 80
	}
	ctx := context.Background()
	for range configs {
		e := newValid(genConfig(r))
		for range 20 {
			path := genPath(r)
			for _, m := range []*matcher{e.compiled.read, e.compiled.write} {
				var want idSet
				wst := m.walk(path, &want)
				for i := 1; i < len(path); i++ {
					if path[i] != '/' {
						continue
					}
					w := m.walkDir(path[:i])
					if w == nil {
						continue // an unclean directory: walk answers alone
					}
					got := w.out
					cur, next := w.cur, stateSet{}
					st, end := m.walkOn(path, i+1, 1, &cur, &next, &got)
					if st = m.walkEnd(st, end, &got); st != wst || (st == walkOK && got != want) {
						t.Fatalf("walk of %q resumed after %q under %+v: %v %v, walk %v %v", path, path[:i], e.Config(), st, got, wst, want)
					}
				}
				m.last.Store(nil)
				for round := range 3 { // a miss, the kept walk made, then used
					var got idSet
					if st := m.walkShared(path, &got); st != wst || (st == walkOK && got != want) {
						t.Fatalf("round %d: walkShared(%q) under %+v: %v %v, walk %v %v", round, path, e.Config(), st, got, wst, want)
					}
				}
			}
			for i := 1; i < len(path); i++ {
				if path[i] == '/' {
					checkUnder(ctx, t, e, path[:i], path[i+1:])
				}
			}
			checkUnder(ctx, t, e, ".", path)
			checkUnder(ctx, t, e, path, ".")
			dir := path
			if i := strings.LastIndexByte(path, '/'); i > 0 {
				dir = path[:i]
			}
			for range 4 {
				child := dir + "/" + genNames[r.IntN(len(genNames))]
				for _, op := range allOps {
					req := Request{Op: op, Path: child, Size: -1}
					if got, want := e.Decide(ctx, &req), refDecide(e, &req); got != want {
						t.Fatalf("%s %q under %+v:\ncompiled  %+v\nreference %+v", op, child, e.Config(), got, want)
					}
				}
			}
		}
	}
}

// TestAllowsSize: Allows and AllowsPath answer as Decide on either side of
// the size limit, with the size unknown, and for a nil request.
func TestAllowsSize(t *testing.T) {
	e, err := New(Config{MaxFileSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, size := range []int64{-1, 0, 10, 11} {
		for _, op := range allOps {
			r := Request{Op: op, Path: "a/b", Size: size}
			want := e.Decide(ctx, &r).Effect == Allow
			if e.Allows(ctx, &r) != want || e.AllowsPath(op, "a/b", "", size) != want {
				t.Errorf("%s of %d bytes: Allows %v, AllowsPath %v, Decide allows %v", op, size, e.Allows(ctx, &r), e.AllowsPath(op, "a/b", "", size), want)
			}
		}
	}
	if e.Allows(ctx, nil) != (e.Decide(ctx, nil).Effect == Allow) {
		t.Error("Allows(nil) differs from Decide(nil)")
	}
}

// checkUnder fails t if AllowsUnder(base, rel) answers otherwise than the
// reference engine on their join, for each op, with the walk of the joined
// path's directory kept or not.
func checkUnder(ctx context.Context, t *testing.T, e *Engine, base, rel string) {
	t.Helper()
	path := base + "/" + rel
	switch {
	case base == ".":
		path = rel
	case rel == ".":
		path = base
	}
	for _, op := range allOps {
		r := Request{Op: op, Path: path, Size: -1}
		want := refAllows(e, &r)
		for round := range 3 { // AllowsPath's walks keep the directory's by the third
			if got := e.AllowsUnder(op, base, rel, -1); got != want {
				t.Fatalf("round %d: AllowsUnder(%s, %q, %q) = %v, reference %v under %+v", round, op, base, rel, got, want, e.Config())
			}
			_ = e.AllowsPath(op, path, "", -1)
		}
	}
}

// TestAllowsUnder: AllowsUnder answers as the reference engine on the joined
// path whatever walk is kept: the walk of the path's own directory, of
// another directory (of the same length too), none; and an anchored pattern
// is not started at the last component of a path under a Sub.
func TestAllowsUnder(t *testing.T) {
	ctx := context.Background()
	anchored, err := New(Config{SecretPatterns: []string{"top", "a/b*/top"}, PersistencePatterns: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{Defaults(), anchored} {
		for _, c := range []struct{ kept, base, rel string }{
			{"x/.git/a", "x", ".git/config"}, {"x/.gix/a", "x", ".git/config"}, {"a/x", "a", "top"},
			{"a/b/x", "a", "b/top"}, {"a/bb/x", "a", "bb/top"}, {"a/x", "a/b", "top"}, {"q", "a", "top"},
		} {
			for range 2 {
				_ = e.AllowsPath(OpRead, c.kept, "", -1)
				_ = e.AllowsPath(OpWrite, c.kept, "", -1)
			}
			checkUnder(ctx, t, e, c.base, c.rel)
		}
	}
	r := rand.New(rand.NewPCG(33, 3))
	for range 200 {
		cfg := genConfig(r)
		cfg.Rules, cfg.CaseInsensitive = nil, false // AllowsUnder's own walk serves only these
		e := newValid(cfg)
		for range 20 {
			path, other := genPath(r), genPath(r)
			for i := 1; i < len(path); i++ {
				if path[i] != '/' {
					continue
				}
				for range 2 { // keep the walk of other's directory
					_ = e.AllowsPath(OpRead, other, "", -1)
					_ = e.AllowsPath(OpWrite, other, "", -1)
				}
				checkUnder(ctx, t, e, path[:i], path[i+1:])
			}
		}
	}
}
