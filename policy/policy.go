// Package policy decides whether a guest's call on a capability may proceed.
//
// Every call on a dir.Dir or dir.File becomes one Request. The Dir asks its Policy for a
// Decision: Allow, Deny, or Ask, in which case the host's Asker settles it. A Policy
// must be safe for concurrent use and should be fast: it runs on every call.
//
// This package holds the interfaces the Dir layer enforces, the simplest policies
// (AllowAll, Func), and Engine, a rule engine built from a Config or a file. It does
// not interpret paths for the host: a Request's Path is the path from the capability
// tree's root, as the Dir knows it, not a host path.
//
// # The engine
//
// An Engine decides each request from its op and paths, in this order:
//
//  1. an unknown op, a nil request, or a Path or Dest that is not a clean relative
//     path (io/fs.ValidPath's rules less the UTF-8 one: no empty, "." or ".." element, no
//     leading or trailing "/"; "." is the root) -> Deny (fail closed; the Dir only
//     sends clean paths);
//  2. Request.Size above Config.MaxFileSize -> Deny, rule "max-file-size" (Size is
//     known for whole-file writes; streamed writes and appends are -1 and left to
//     the backend's own size limit);
//  3. each end of the request is decided on its own, as described next: the Path,
//     and the Dest of a rename, copy, link or symlink (a symlink's Dest is its
//     target, as a path from the tree's root). The Dest end has the request's op;
//     so has the Path end, except for a copy, whose source is decided as a read
//     (OpRead);
//  4. the request gets the stronger of its ends' decisions, Deny over Ask over
//     Allow: a rename, copy, link or symlink is denied if either end is.
//
// One end, a path with an op, is decided by the first of these that applies:
//
//   - a secret pattern matches -> Deny, rule "secret:<pattern>", whatever the op
//     (except listing: see below);
//   - the op writes (Op.Writes) and a persistence pattern matches -> Deny, rule
//     "persistence:<pattern>";
//   - a rule whose Ops include the op and whose Paths match denies -> Deny;
//   - the first such rule that asks -> Ask; else the first that allows -> Allow;
//   - Config.Default, rule "default".
//
// Deny overrides, so the order of the rules changes only which matching Ask or
// Allow rule is named in the decision.
//
// No rule can allow what the secret or persistence patterns deny: to let a guest
// read a file they cover, the host changes the lists (Config.SecretPatterns,
// Config.PersistencePatterns), which replace the defaults.
//
// Patterns are doublestar globs (github.com/bmatcuk/doublestar/v4) matched against
// the whole path: "*" and "?" within one element, "[a-z]" classes, "{a,b}"
// alternatives, "**" for any number of elements (zero included), "\" escapes. A
// pattern ending in "/**" matches the directory itself as well as everything
// beneath it ("**/.ssh/**" matches "home/.ssh" and "home/.ssh/id_rsa"); "**/x"
// matches x at any depth, the top included. The root "." is matched only by "."
// and "**". With Config.CaseInsensitive, patterns and paths are case-folded before
// matching.
//
// # Names that are not UTF-8
//
// A path is decided on its bytes, so a name a backend holds that is not UTF-8
// (Latin-1 "caf\xe9", say) is decided like any other. Pattern text must be
// UTF-8 without U+FFFD (New refuses other patterns), so a literal never equals
// a byte that is not UTF-8: "**/.env" does not match ".env\xff", and "**/*.pem"
// does match "\xff.pem". Against such a byte "*" matches it as part of any run,
// "?" matches that one byte, and a class sees it as U+FFFD would be seen: "[!a]"
// matches it, "[a-z]" does not. Case folding leaves such bytes as they are,
// folding the text between them.
//
// # Default patterns
//
// DefaultSecretPatterns: **/.ssh/**, **/.aws/**, **/.gnupg/**, **/.env, **/.env.*,
// **/*.pem, **/*.key, **/credentials.json, **/.netrc, **/.npmrc. ".env.local" is a
// secret, ".envrc" (a direnv script) and "a.pem.txt" are not; add patterns for such
// files when they hold secrets in your trees.
//
// DefaultPersistencePatterns, writes only, at any depth: everything git, shells,
// direnv and other environment managers, editors, agent tools, language runtimes
// and a desktop session execute or load without being asked. Among them:
//
//   - git: every .git, directory or gitdir file, and everything beneath it
//     (GitDirPattern, "**/.git/**": git is read-only to guests), with hooks,
//     config, config.worktree and commondir of submodule and worktree git dirs
//     named on their own; .gitconfig, .config/git/**, .gitmodules, .husky/**,
//     .githooks/**, .pre-commit-config.yaml, lefthook and overcommit files;
//   - shells: .profile, .bash_profile, .bash_login, .bashrc, .bash_logout,
//     .bash_aliases, .inputrc, .zshenv, .zprofile, .zshrc, .zlogin, .zlogout,
//     *.zwc, .cshrc, .tcshrc, .login, .kshrc, .config/fish/**, .tmux.conf, ...;
//   - .envrc, .direnv/**, mise files;
//   - editors: .vscode/**, *.code-workspace, .devcontainer/**, .idea/**, .exrc,
//     .nvimrc, .nvim.lua, .vimrc, .vim/**, .emacs.d/**, .zed/**, .helix/**;
//   - agent tools: .mcp.json, .claude/**, .claude.json, .cursor/**, .gemini/**,
//     .codex/**, .continue/**, .aider*, .windsurf/**, .roo/**, .amazonq/**, ...;
//   - runtimes: *.pth, sitecustomize.py and usercustomize.py in site-packages,
//     .cargo/**, .config/go/env, .pythonrc*, .irbrc.
//
// docs/policy-defaults.md lists every pattern with what executes or loads it, and
// the files deliberately left off (.gitattributes, .editorconfig, CLAUDE.md and
// other agent instructions, .github/workflows, build files) with the reason. Any
// depth, because a capability tree often holds a home directory's dotfiles below
// its root, or nested repositories.
//
// Config.AllowGitWrites (allow_git_writes) lets guests write inside .git: it removes
// GitDirPattern and keeps the patterns for hooks and git configuration. Two git
// indirections are not names: ForProject turns the project's git configuration
// (core.hooksPath, a core.fsmonitor hook, commands and included files) into deny
// rules for the paths it names, and dir.GitGuard refuses writes that make or
// change a directory laid out as a git dir under another name.
//
// # What a guest sees of secrets
//
// Every op on a path a secret pattern matches is denied: read, open (for reading or
// writing), stat, readlink, sub, copy from or to it, rename from or to it, link,
// symlink to it, write, create, remove, chmod, chtimes, chown. So content and metadata are
// out of reach through every Dir method. Listing (OpList) is the one exception: a
// Dir's Walk and Glob decide every entry as an OpList of the entry's own path and
// leave out the refused ones. For a file pattern (one not ending in "/**", such as
// "**/.env" or "**/*.pem") that OpList is allowed, so Walk and Glob show the name,
// unless Config.HideSecrets is set. A directory pattern's directory ("home/.ssh")
// and everything beneath it are refused OpList always: listing such a directory
// would show its contents. A Dir's List and ReadDir of the parent ("home") show
// every name the backend returns, secrets included: the engine decides the
// directory listed, not its entries.
//
// # Configuration files
//
// Parse and Load read TOML or JSON with these keys; unknown keys are errors, and a
// pattern list that is present replaces the default list (an empty list means none):
//
//	default = "allow"                # effect when no rule matches: allow, deny or ask
//	max_file_size = 10485760         # bytes; 0 or absent: no limit
//	case_insensitive = false
//	hide_secrets = false
//	allow_git_writes = false         # true: guests may write inside .git (hooks and config stay denied)
//	secret_patterns = ["**/.ssh/**", "**/.env", "**/*.pem"]    # absent: the defaults
//	persistence_patterns = ["**/.git/hooks/**"]                # absent: the defaults
//
//	[[rules]]
//	name = "no-vendor-edits"         # optional; default derived ("deny[@write]:vendor/**")
//	effect = "deny"                  # required
//	ops = ["@write"]                 # optional; ops, or the groups @read and @write
//	paths = ["vendor/**"]            # optional; absent: every path
//	reason = "vendor/ is generated"  # optional; shown to the guest
//
// The JSON form has the same keys: {"default": "allow", "rules": [{"effect":
// "deny", "paths": ["vendor/**"]}]}. testdata/example.toml is a complete example.
//
// # What the engine cannot see
//
// It decides each request from its paths alone. A dir.Dir asks it about the path a
// call really reaches, symlinks followed (the final one exactly as the operation
// will), ".." taken physically and mounts mapped, and about the guest's path too,
// and denies if either is denied; it refuses a rename, symlink, link or copy that
// would give something protected a new name, and moves that would carry one. So a
// symlink ("g" -> ".git", "up" -> "..") or a move cannot alias a protected path
// for a guest: the patterns hold under every name a guest can make.
//
// What it cannot see are aliases made outside capfs. A hard link the host made
// ("notes" hard-linked to "home/.ssh/id_rsa") is the same file under an unprotected
// name: nothing in its path says what it is. And the Dir's decisions are atomic
// only with respect to other calls on its Namespace: a hard link, bind mount,
// symlink or rename another process makes in the tree while a Dir is live is not
// coordinated with them (a Dir that acts without following again makes such a
// swap fail the call, but a new name made outside stays unprotected until a
// pattern matches it). A case-folding backend needs CaseInsensitive, and even
// then other aliases (Unicode normalization, Windows short names, trailing dots)
// are not folded. The deny patterns are a safety net; the boundary is what the host
// mounts: keep secrets out of the tree.
package policy

import (
	"context"
	"fmt"
)

// Op names a guest operation. The set is closed: every Dir and File method maps to one.
type Op string

// The operations.
const (
	OpStat     Op = "stat"     // Stat, Lstat, Exists
	OpList     Op = "list"     // List, ReadDir, Walk and Glob listings
	OpRead     Op = "read"     // reading file contents (ReadFile, Open for reading, Copy's source)
	OpWrite    Op = "write"    // writing file contents (WriteFile, Append, Open for writing)
	OpCreate   Op = "create"   // creating a file
	OpMkdir    Op = "mkdir"    // creating a directory
	OpRemove   Op = "remove"   // Remove, RemoveAll
	OpRename   Op = "rename"   // Move within a mount
	OpCopy     Op = "copy"     // Copy's destination
	OpSymlink  Op = "symlink"  // creating a symlink
	OpReadlink Op = "readlink" // reading a symlink's target
	OpLink     Op = "link"     // creating a hard link
	OpChmod    Op = "chmod"    // changing permission bits
	OpChtimes  Op = "chtimes"  // changing times
	OpChown    Op = "chown"    // changing the owner or group (Chown, Lchown)
	OpSub      Op = "sub"      // narrowing to a subtree or one file (Sub, OpenDir, OpenFile)
)

// Writes reports whether op can change the tree.
func (op Op) Writes() bool {
	switch op {
	case OpWrite, OpCreate, OpMkdir, OpRemove, OpRename, OpCopy, OpSymlink, OpLink, OpChmod, OpChtimes, OpChown:
		return true
	}
	return false
}

// Request describes one guest call, as the policy, the hooks and the audit trail see it.
type Request struct {
	ID      string // unique per call
	Subject string // who is calling (the grant's subject), "" if unnamed
	Op      Op
	// Path is the target, slash-separated, from the root of the capability tree the
	// Dir was made from (so "home/.ssh/id_rsa" even when the guest holds a Sub of
	// "home" and wrote ".ssh/id_rsa"). "." is that root.
	Path string
	// Dest is the second path of a rename, copy or link, in the same form; "" otherwise.
	Dest string
	// GuestPath is the path as the guest wrote it, relative to the Dir it called.
	GuestPath string
	// Size is the number of bytes a write will leave in the file, when known; -1 otherwise.
	Size int64
}

// Effect is a policy's verdict.
type Effect int

// The effects.
const (
	Allow Effect = iota
	Deny
	Ask
)

func (e Effect) String() string {
	switch e {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Ask:
		return "ask"
	}
	return fmt.Sprintf("Effect(%d)", int(e))
}

// Decision is a Policy's answer.
type Decision struct {
	Effect Effect
	// Rule names the rule that decided, for the audit trail ("default", "deny:**/.ssh/**").
	Rule string
	// Reason is a human-readable explanation shown to the guest on denial.
	Reason string
}

// Policy decides requests. Implementations must be safe for concurrent use.
type Policy interface {
	Decide(ctx context.Context, r *Request) Decision
}

// Func adapts a function to a Policy.
type Func func(ctx context.Context, r *Request) Decision

// Decide calls f.
func (f Func) Decide(ctx context.Context, r *Request) Decision { return f(ctx, r) }

// AllowAll allows every request. It is the default when a Dir is given no policy.
var AllowAll Policy = Func(func(context.Context, *Request) Decision {
	return Decision{Effect: Allow, Rule: "allow-all"}
})

// Asker settles Ask decisions on the host's behalf (a prompt, a UI, a rule server).
// It returns true to allow. An error denies. Implementations must be safe for
// concurrent use and should honour ctx.
type Asker interface {
	Ask(ctx context.Context, r *Request, d Decision) (bool, error)
}

// AskFunc adapts a function to an Asker.
type AskFunc func(ctx context.Context, r *Request, d Decision) (bool, error)

// Ask calls f.
func (f AskFunc) Ask(ctx context.Context, r *Request, d Decision) (bool, error) { return f(ctx, r, d) }
