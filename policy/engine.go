package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Pseudo-ops for Rule.Ops: each stands for a group of operations.
const (
	// GroupRead is every operation that does not write: stat, list, read, readlink, sub.
	GroupRead Op = "@read"
	// GroupWrite is every operation for which Op.Writes reports true.
	GroupWrite Op = "@write"
)

// allOps lists the operations in a fixed order; an op's bit in a rule's mask is
// 1 << its index.
var allOps = [...]Op{
	OpStat, OpList, OpRead, OpWrite, OpCreate, OpMkdir, OpRemove, OpRename,
	OpCopy, OpSymlink, OpReadlink, OpLink, OpChmod, OpChtimes, OpSub, OpChown,
}

type opMask uint32

// opBit returns op's bit (1 << its index in allOps), or 0 for an unknown op.
func opBit(op Op) opMask {
	switch op {
	case OpStat:
		return 1 << 0
	case OpList:
		return 1 << 1
	case OpRead:
		return 1 << 2
	case OpWrite:
		return 1 << 3
	case OpCreate:
		return 1 << 4
	case OpMkdir:
		return 1 << 5
	case OpRemove:
		return 1 << 6
	case OpRename:
		return 1 << 7
	case OpCopy:
		return 1 << 8
	case OpSymlink:
		return 1 << 9
	case OpReadlink:
		return 1 << 10
	case OpLink:
		return 1 << 11
	case OpChmod:
		return 1 << 12
	case OpChtimes:
		return 1 << 13
	case OpSub:
		return 1 << 14
	case OpChown:
		return 1 << 15
	}
	return 0
}

var (
	maskAll   = opMask(1)<<len(allOps) - 1
	maskRead  = groupMask(false)
	maskWrite = groupMask(true)
)

func groupMask(writes bool) opMask {
	var m opMask
	for i, o := range allOps {
		if o.Writes() == writes {
			m |= 1 << i
		}
	}
	return m
}

// Rule is one entry of a Config's rule list.
type Rule struct {
	// Effect is what the rule decides when it matches: Allow, Deny or Ask.
	Effect Effect
	// Ops are the operations the rule applies to; empty means every operation.
	// GroupRead and GroupWrite stand for their groups.
	Ops []Op
	// Paths are doublestar patterns ("**" for any number of directories, "*", "?",
	// "[a-z]", "{a,b}") matched against the request's Path and, when set, its Dest,
	// both from the capability tree's root and without a leading "/" (one given is
	// dropped). A pattern ending in "/**" also matches the directory itself. Empty
	// means every path.
	Paths []string
	// Reason is shown to the guest when the rule denies (or asks).
	Reason string
	// Name identifies the rule in Decision.Rule and so in the audit trail. The
	// default is derived from the rule: "deny:**/.ssh/**", "ask[@write]:src/**".
	Name string
}

// Config configures an Engine. The zero Config is the default policy: allow
// everything except the default secret and persistence patterns.
type Config struct {
	// Default is the effect when no rule matches. The zero value is Allow.
	Default Effect
	// Rules are the host's allow, deny and ask rules; see the package doc for how
	// they combine (deny overrides).
	Rules []Rule
	// SecretPatterns name files whose contents, metadata and names must stay out of
	// reach: every operation on a matching path (either end of a two-path call) is
	// denied, except that listing is governed by HideSecrets. nil means
	// DefaultSecretPatterns(); an empty non-nil slice means none.
	SecretPatterns []string
	// PersistencePatterns name files a guest could use to plant code that runs
	// later (shell startup files, git hooks, editor tasks): every writing operation
	// on a matching path is denied (both ends of a rename or link, the destination of
	// a copy, a symlink and its target). nil means DefaultPersistencePatterns(); an
	// empty non-nil slice means none.
	PersistencePatterns []string
	// MaxFileSize, when positive, denies writes whose known final size
	// (Request.Size) exceeds it, with the rule "max-file-size". 0 means no limit.
	MaxFileSize int64
	// CaseInsensitive folds case when matching, for backends that fold case
	// (".SSH/id_rsa" is then ".ssh/id_rsa").
	CaseInsensitive bool
	// AllowGitWrites lets guests write inside git directories: GitDirPattern (and
	// "**/.git", if listed) is removed from the persistence patterns, whether they
	// are the defaults or the host's list. The patterns for what git executes or
	// reads as configuration (.git/hooks, .git/config, the config, hooks and
	// commondir of submodule and worktree git dirs, a rebase's todo list) stay. The
	// default (false) keeps git read-only to guests; a host that wants an agent to
	// commit should rather give it the git overlay backend, which builds commits
	// without touching .git.
	AllowGitWrites bool
	// HideSecrets hides the names of files matching a secret pattern from listings
	// that check entry by entry (a Dir's Walk and Glob). Without it, such names
	// are listed (their contents and metadata stay out of reach). Directories
	// matched by a secret pattern ending in "/**" are always hidden, since listing
	// one is reading its contents.
	HideSecrets bool
}

// DefaultSecretPatterns returns the default secret patterns, a new slice each call:
// SSH, AWS and GnuPG directories, dotenv files, PEM and key files, credentials.json,
// .netrc and .npmrc, at any depth.
func DefaultSecretPatterns() []string {
	return []string{
		"**/.ssh/**",
		"**/.aws/**",
		"**/.gnupg/**",
		"**/.env",
		"**/.env.*",
		"**/*.pem",
		"**/*.key",
		"**/credentials.json",
		"**/.netrc",
		"**/.npmrc",
	}
}

// DefaultPersistencePatterns returns the default persistence patterns, a new slice
// each call: everything git, shells, direnv and other environment managers,
// editors, agent tools, language runtimes and a desktop session execute or load
// without being asked (git hooks and configuration, every .git as GitDirPattern,
// shell startup files, .envrc, .vscode/**, .claude/**, .mcp.json, ...), at any depth
// (a project often holds a home directory's dotfiles, or nested repositories).
// docs/policy-defaults.md names what executes or loads each one.
func DefaultPersistencePatterns() []string {
	out := make([]string, len(defaultPersistence))
	for i, e := range defaultPersistence {
		out[i] = e.pattern
	}
	return out
}

// ErrInvalidConfig is wrapped by every error New, Parse and Load return for a bad
// configuration (a malformed pattern, an unknown op or effect, an unknown key).
var ErrInvalidConfig = errors.New("invalid policy configuration")

// Engine is a rule-based Policy, built by New, Defaults, Parse or Load. It is
// immutable and safe for concurrent use.
type Engine struct {
	cfg     Config // as configured, defaults filled in, names derived
	def     Effect
	rules   []rule
	secrets []named
	persist []named
	// persistBase maps the last element k of each "**/k" persistence pattern to
	// the index of the first such pattern; persistOther lists the indices of the
	// others, in order. Together they find the first match without trying every
	// pattern.
	persistBase  map[string]int
	persistOther []int
	maxSize      int64
	maxWhy       string
	fold         bool
	hide         bool
	// compiled holds the patterns compiled into one matcher per kind of op
	// (see compiled.go); nil when there are more than maxIDs patterns, and the
	// engine then decides with the per-pattern matcher (refDecideEnd).
	compiled *compiledSet
	// defDecision is the decision when no rule matches (defaultDecision).
	defDecision Decision
	// plainRead and plainWrite are the matchers plainOne and plainUnder walk
	// for the two kinds of op, or nil where they always say false (no
	// compiled set, case folding, rules, residual patterns); defAllow is
	// defDecision's Effect == Allow. Set once by New (pickPlain).
	plainRead, plainWrite *matcher
	defAllow              bool
}

type rule struct {
	effect       Effect
	ops          opMask
	pats         []pattern // empty: every path
	name, reason string
	index        int // in Engine.rules
}

// named is a secret or persistence pattern with its decision text.
type named struct {
	pattern
	name, reason string
}

var _ Policy = (*Engine)(nil)

// New compiles cfg into an Engine. It checks every pattern (doublestar syntax, no
// empty, "." or ".." elements, no trailing "/"), op and effect, and returns an
// error wrapping ErrInvalidConfig that names the first bad one.
func New(cfg Config) (*Engine, error) {
	e := &Engine{def: cfg.Default, maxSize: cfg.MaxFileSize, fold: cfg.CaseInsensitive, hide: cfg.HideSecrets}
	if !validEffect(cfg.Default) {
		return nil, fmt.Errorf("%w: default effect %v", ErrInvalidConfig, cfg.Default)
	}
	if cfg.MaxFileSize < 0 {
		return nil, fmt.Errorf("%w: negative max file size %d", ErrInvalidConfig, cfg.MaxFileSize)
	}
	if cfg.MaxFileSize > 0 {
		e.maxWhy = "files larger than " + strconv.FormatInt(cfg.MaxFileSize, 10) + " bytes may not be written"
	}
	if cfg.SecretPatterns == nil {
		cfg.SecretPatterns = DefaultSecretPatterns()
	}
	if cfg.PersistencePatterns == nil {
		cfg.PersistencePatterns = DefaultPersistencePatterns()
	}
	if cfg.AllowGitWrites {
		cfg.PersistencePatterns = slices.DeleteFunc(slices.Clone(cfg.PersistencePatterns), func(p string) bool {
			p = strings.TrimPrefix(p, "/")
			return p == GitDirPattern || p == "**/.git"
		})
	}
	var err error
	if e.secrets, err = compileNamed("secret", cfg.SecretPatterns, e.fold,
		"the path matches a protected secret pattern"); err != nil {
		return nil, err
	}
	if e.persist, err = compileNamed("persistence", cfg.PersistencePatterns, e.fold,
		"writing here could plant code that runs later"); err != nil {
		return nil, err
	}
	e.indexPersistence()
	rules := make([]Rule, len(cfg.Rules))
	for i, r := range cfg.Rules {
		c, err := compileRule(&r, i, e.fold)
		if err != nil {
			return nil, err
		}
		rules[i] = r
		e.rules = append(e.rules, c)
	}
	cfg.Rules = rules
	cfg.SecretPatterns = slices.Clone(cfg.SecretPatterns) // never nil: an empty list stays empty
	cfg.PersistencePatterns = slices.Clone(cfg.PersistencePatterns)
	e.cfg = cfg
	e.compiled = compileSet(e)
	e.defDecision = e.defaultDecision()
	e.defAllow = e.defDecision.Effect == Allow
	e.pickPlain()
	return e, nil
}

// pickPlain keeps the compiled read and write matchers that decide a plain
// request alone (no rules, no case folding, no residual pattern), for the
// one walk of plainOne and plainUnder.
func (e *Engine) pickPlain() {
	cs := e.compiled
	if cs == nil || e.fold || len(e.rules) != 0 {
		return
	}
	if len(cs.read.residual) == 0 {
		e.plainRead = cs.read
	}
	if len(cs.write.residual) == 0 {
		e.plainWrite = cs.write
	}
}

// ruleName derives a rule's default name: effect, ops in brackets when restricted,
// and the patterns ("**" when the rule has none).
func ruleName(r Rule) string {
	var b strings.Builder
	b.WriteString(r.Effect.String())
	if len(r.Ops) > 0 {
		b.WriteByte('[')
		for i, op := range r.Ops {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(string(op))
		}
		b.WriteByte(']')
	}
	b.WriteByte(':')
	if len(r.Paths) == 0 {
		b.WriteString("**")
	}
	b.WriteString(strings.Join(r.Paths, ","))
	return b.String()
}

func validEffect(e Effect) bool { return e == Allow || e == Deny || e == Ask }

// Defaults returns the default Engine: the default secret and persistence patterns
// denied, everything else allowed.
func Defaults() *Engine {
	e, err := New(Config{})
	if err != nil {
		panic("policy: default configuration rejected: " + err.Error()) // a bug in this package
	}
	return e
}

// Config returns the Engine's configuration, with the default pattern lists and
// rule names filled in: New(e.Config()) decides as e does. The slices are copies.
func (e *Engine) Config() Config {
	c := e.cfg
	c.SecretPatterns = slices.Clone(c.SecretPatterns)
	c.PersistencePatterns = slices.Clone(c.PersistencePatterns)
	c.Rules = make([]Rule, len(e.cfg.Rules))
	for i, r := range e.cfg.Rules {
		r.Ops = slices.Clone(r.Ops)
		r.Paths = slices.Clone(r.Paths)
		c.Rules[i] = r
	}
	return c
}

// Fixed rule names of decisions that no configured rule made.
const (
	RuleDefault        = "default"         // no rule matched: the Config's Default
	RuleMaxFileSize    = "max-file-size"   // Request.Size above Config.MaxFileSize
	RuleInvalidPath    = "invalid-path"    // a Path or Dest that is not a clean relative path
	RuleUnknownOp      = "unknown-op"      // an Op this package does not know
	RuleInvalidRequest = "invalid-request" // a nil Request
)

// Decide implements Policy. It does not allocate, except to fold the case of paths
// with upper-case letters when the Engine folds case.
func (e *Engine) Decide(_ context.Context, r *Request) Decision {
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
	if e.plainOne(bit, r.Path, r.Dest) {
		return e.defDecision // one path that no pattern can match (see plainOne)
	}
	// The source of a copy is read, not written.
	srcOp, srcBit := r.Op, bit
	if bit == opCopyBit {
		srcOp, srcBit = OpRead, opBit(OpRead)
	}
	d, ok := e.decidePath(srcOp, srcBit, r.Path)
	if !ok {
		return Decision{Effect: Deny, Rule: RuleInvalidPath, Reason: "the policy decides only clean paths"}
	}
	if d.Effect == Deny || r.Dest == "" {
		return d
	}
	dd, ok := e.decidePath(r.Op, bit, r.Dest)
	if !ok {
		return Decision{Effect: Deny, Rule: RuleInvalidPath, Reason: "the policy decides only clean paths"}
	}
	return combine(d, dd)
}

const opCopyBit = 1 << 8 // opBit(OpCopy)

// Allows reports whether e allows r: Decide(ctx, r).Effect == Allow. Where no
// pattern can match r (plainOne) it answers without building the decision.
func (e *Engine) Allows(ctx context.Context, r *Request) bool {
	if r == nil {
		return false // Decide refuses it
	}
	return e.AllowsPath(r.Op, r.Path, r.Dest, r.Size)
}

// AllowsPath is Allows on the request of op on path (and dest, for a
// two-path op) leaving size bytes (-1: unknown): the only fields of a Request
// an Engine reads.
func (e *Engine) AllowsPath(op Op, path, dest string, size int64) bool {
	return e.AllowsClass(ClassOf(op), path, dest, size)
}

// OpClass is an op as an Engine sorts it, worked out once by [ClassOf] so
// that [Engine.AllowsClass] does not compare the op's name on every call.
type OpClass struct {
	op  Op
	bit opMask
}

// ClassOf returns the class of op.
func ClassOf(op Op) OpClass { return OpClass{op: op, bit: opBit(op)} }

// Op returns the op c was made of.
func (c OpClass) Op() Op { return c.op }

// AllowsClass is AllowsPath for an op of class c: where the request is one
// clean path that no pattern can match (plainOne) it answers with the default
// decision after one walk; else it decides the request.
func (e *Engine) AllowsClass(c OpClass, path, dest string, size int64) bool {
	if c.bit != 0 && (e.maxSize <= 0 || size <= e.maxSize) && e.plainOne(c.bit, path, dest) {
		return e.defAllow
	}
	r := Request{Op: c.op, Path: path, Dest: dest, Size: size}
	return e.Decide(context.Background(), &r).Effect == Allow
}

// AllowsUnder is AllowsPath(op, base+"/"+rel, "", size) for two clean
// relative paths, neither ".": where the walk of the path's directory is kept
// (see walkShared) and no pattern can match the path, it answers without
// joining them, so a pinned Sub decides its calls without building their
// paths from the tree's root.
func (e *Engine) AllowsUnder(op Op, base, rel string, size int64) bool {
	if e.plainUnder(op, base, rel, size) {
		return e.defDecision.Effect == Allow
	}
	switch {
	case base == ".":
		return e.AllowsPath(op, rel, "", size)
	case rel == ".":
		return e.AllowsPath(op, base, "", size)
	}
	return e.AllowsPath(op, base+"/"+rel, "", size)
}

// plainUnder is plainOne for the path base/rel (see AllowsUnder), answered
// from the kept walk of its directory; false where that walk is not kept.
func (e *Engine) plainUnder(op Op, base, rel string, size int64) bool {
	bit := opBit(op)
	if bit == opCopyBit || (e.maxSize > 0 && size > e.maxSize) || base == "." || rel == "." {
		return false
	}
	m := e.plainMatcher(bit)
	if m == nil {
		return false
	}
	var got idSet
	st, ok := m.walkUnder(base, rel, &got)
	return ok && st == walkOK && got == (idSet{})
}

// plainOne reports whether a request with op bit on path and dest is one path
// (no dest, not a copy) that is clean and that no pattern of a compiled,
// non-folding Engine without rules can match: the common case, answered with
// the default decision in one walk and no further call.
func (e *Engine) plainOne(bit opMask, path, dest string) bool {
	if dest != "" || bit == opCopyBit || path == "." {
		return false
	}
	m := e.plainMatcher(bit)
	if m == nil {
		return false
	}
	var got idSet
	return m.walkShared(path, &got) == walkOK && got == (idSet{})
}

// plainMatcher is the matcher that alone decides a plain request of op bit
// (see pickPlain), or nil where there is none.
func (e *Engine) plainMatcher(bit opMask) *matcher {
	switch {
	case bit == 0:
		return nil
	case bit&maskWrite != 0:
		return e.plainWrite
	}
	return e.plainRead
}

// decidePath checks that s is a clean path (ok false if not) and decides it
// as one end of a request. An Engine that does not fold case checks and
// matches in one walk of s.
func (e *Engine) decidePath(op Op, bit opMask, s string) (d Decision, ok bool) {
	if e.compiled != nil && !e.fold {
		d, st := e.compiled.decideRaw(e, op, bit, s)
		switch st {
		case walkOK:
			return d, true
		case walkInvalid:
			return Decision{}, false
		}
	}
	p, ok := e.cleanFast(s)
	if !ok {
		return Decision{}, false
	}
	return e.decideEnd(op, bit, p), true
}

// combine merges the decisions of a request's two ends: the stronger effect wins
// (Deny over Ask over Allow); between equals, a rule's decision is reported rather
// than the default, and the source's rather than the destination's.
func combine(src, dst Decision) Decision {
	rs, rd := strength(src.Effect), strength(dst.Effect)
	if rd > rs || rd == rs && src.Rule == RuleDefault && dst.Rule != RuleDefault {
		return dst
	}
	return src
}

func strength(e Effect) int {
	switch e {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2
}

// cleanFast checks that s is a clean relative path ("." for the root; see
// validPath) and folds it.
func (e *Engine) cleanFast(s string) (string, bool) {
	if !validPath(s) {
		return "", false
	}
	if e.fold {
		s = foldCase(s)
	}
	return s, true
}

// decideEnd decides one path of a request with the compiled matcher, or the
// per-pattern one (refDecideEnd) where the compiled one cannot answer.
func (e *Engine) decideEnd(op Op, bit opMask, p string) Decision {
	if e.compiled != nil {
		if d, ok := e.compiled.decideEnd(e, op, bit, p); ok {
			return d
		}
	}
	return e.refDecideEnd(op, bit, p)
}

// refDecideEnd decides one path of a request pattern by pattern: the secret
// patterns, then for writing ops the persistence patterns, then the rules (any
// Deny wins; else the first Ask; else the first Allow; else the default). It is
// the reference the compiled matcher is tested against.
func (e *Engine) refDecideEnd(op Op, bit opMask, p string) Decision {
	s := newSubject(p)
	for i := range e.secrets {
		n := &e.secrets[i]
		if !n.match(&s) {
			continue
		}
		if op == OpList && !e.hide && !n.tree {
			continue // the name may be listed; its contents stay out of reach
		}
		return Decision{Effect: Deny, Rule: n.name, Reason: n.reason}
	}
	if op.Writes() {
		if i := e.firstPersist(&s); i >= 0 {
			n := &e.persist[i]
			return Decision{Effect: Deny, Rule: n.name, Reason: n.reason}
		}
	}
	return e.ruleDecision(bit, func(r *rule) bool { return r.matches(&s) })
}

// ruleDecision decides by the rules, matched tells which of them match the path:
// any Deny wins; else the first Ask; else the first Allow; else the default.
func (e *Engine) ruleDecision(bit opMask, matched func(*rule) bool) Decision {
	var ask, allow *rule
	for i := range e.rules {
		r := &e.rules[i]
		if r.ops&bit == 0 || !matched(r) {
			continue
		}
		switch r.effect {
		case Deny:
			return Decision{Effect: Deny, Rule: r.name, Reason: r.reason}
		case Ask:
			if ask == nil {
				ask = r
			}
		default:
			if allow == nil {
				allow = r
			}
		}
	}
	switch {
	case ask != nil:
		return Decision{Effect: Ask, Rule: ask.name, Reason: ask.reason}
	case allow != nil:
		return Decision{Effect: Allow, Rule: allow.name, Reason: allow.reason}
	}
	return e.defaultDecision()
}

// defaultDecision is the decision when no rule matches.
func (e *Engine) defaultDecision() Decision {
	d := Decision{Effect: e.def, Rule: RuleDefault}
	if e.def != Allow {
		d.Reason = "no policy rule allows this"
	}
	return d
}

// firstPersist returns the index of the first persistence pattern s matches, or -1.
func (e *Engine) firstPersist(s *subject) int {
	first := -1
	if i, ok := e.persistBase[s.base]; ok {
		first = i
	}
	for _, i := range e.persistOther {
		if first >= 0 && i > first {
			break
		}
		if n := &e.persist[i]; n.mayMatch(s) && n.match(s) {
			return i
		}
	}
	return first
}

func (r *rule) matches(s *subject) bool {
	if len(r.pats) == 0 {
		return true
	}
	for i := range r.pats {
		if r.pats[i].match(s) {
			return true
		}
	}
	return false
}
