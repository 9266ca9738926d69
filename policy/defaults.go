package policy

// GitDirPattern is the persistence pattern that makes git read-only to guests: it
// matches every ".git" at any depth, the directory or gitdir file itself and
// everything beneath it (submodule git dirs in .git/modules, worktree git dirs in
// .git/worktrees included). Config.AllowGitWrites removes it (and "**/.git", if a
// host lists that) from the persistence patterns; the patterns for what git
// executes or reads as configuration inside a git dir stay.
const GitDirPattern = "**/.git/**"

// persistenceEntry is one default persistence pattern with what runs or loads the
// files it matches. docs/policy-defaults.md lists every entry (a test checks it).
type persistenceEntry struct {
	pattern string
	group   string
	loader  string
}

// defaultPersistence is the default persistence list, in decision order: the first
// matching pattern names the decision, so the narrow git patterns come before
// GitDirPattern.
var defaultPersistence = []persistenceEntry{
	// git: inside a git dir. These stay when the host allows git writes.
	{"**/.git/hooks/**", "git", "git runs hooks on commit, checkout, merge, rebase, push, am"},
	{"**/.git/config", "git", "every git command: core.fsmonitor (git status), core.hooksPath, core.pager, core.editor, core.sshCommand, alias.*, filter.*, diff.*.textconv, credential.helper, include.path"},
	{"**/.git/**/hooks/**", "git", "hooks of submodule and worktree git dirs (.git/modules/<name>/hooks)"},
	{"**/.git/**/config", "git", "configuration of submodule git dirs (.git/modules/<name>/config): git submodule, git status --recurse-submodules, commands run inside the submodule"},
	{"**/.git/**/config.worktree", "git", "per-worktree configuration (extensions.worktreeConfig): the same keys as config"},
	{"**/.git/**/commondir", "git", "redirects a git dir's configuration, hooks and objects to another directory"},
	{"**/.git/**/rebase-merge/**", "git", "git rebase --continue runs the todo list's exec lines"},
	{GitDirPattern, "git", "git is read-only to guests: the gitdir file (gitdir: <path> makes git use another directory's config and hooks), refs, objects, index, HEAD, info, modules, worktrees"},
	// git: in the work tree and the home directory.
	{"**/.gitconfig", "git", "every git command reads ~/.gitconfig (and a project's .gitconfig when its config includes it)"},
	{"**/.config/git/**", "git", "every git command reads $XDG_CONFIG_HOME/git/config (and its attributes)"},
	{"**/.gitmodules", "git", "git submodule update, clone --recurse-submodules, pull with submodule.recurse: URLs fetched and paths checked out (CVE-2018-11235, CVE-2019-19604, CVE-2024-32002)"},
	{"**/.husky/**", "git", "husky points core.hooksPath at .husky/_: its scripts run as git hooks"},
	{"**/.githooks/**", "git", "the usual core.hooksPath directory: its scripts run as git hooks"},
	{"**/.pre-commit-config.yaml", "git", "the pre-commit framework's hook runs the commands it lists (repo: local, language: system) on every commit"},
	{"**/lefthook{,-local}.{yml,yaml,toml,json,jsonc}", "git", "lefthook's git hooks run the commands it lists (at the top or under .config)"},
	{"**/.lefthook*/**", "git", "lefthook's .lefthook.yml, .lefthook-local.yml and .lefthook/ scripts, run by its git hooks"},
	// "a*/**" does not match "a" itself (doublestar's rule for a wildcard
	// element): without this one, a link named .lefthook to a directory of
	// scripts was allowed, and lefthook runs what it reaches.
	{"**/.lefthook*", "git", "lefthook's .lefthook/ scripts directory, or a link in its place"},
	{"**/.overcommit.yml", "git", "overcommit's git hooks run the commands it lists"},
	// Shells.
	{"**/.profile", "shell", "sh, dash, bash (without .bash_profile), ksh login shells; display managers"},
	{"**/.bash_profile", "shell", "bash login shells"},
	{"**/.bash_login", "shell", "bash login shells without .bash_profile"},
	{"**/.bashrc", "shell", "interactive bash shells (and login shells, through .profile)"},
	{"**/.bash_logout", "shell", "bash login shells, on exit"},
	{"**/.bash_aliases", "shell", "sourced by the default .bashrc of Debian and Ubuntu"},
	{"**/.bash_completion", "shell", "sourced by bash-completion in every interactive bash"},
	{"**/.inputrc", "shell", "readline (bash, python, psql...): a macro bound to Return types and runs a command"},
	{"**/.zshenv", "shell", "every zsh, scripts included"},
	{"**/.zprofile", "shell", "zsh login shells"},
	{"**/.zshrc", "shell", "interactive zsh shells"},
	{"**/.zlogin", "shell", "zsh login shells"},
	{"**/.zlogout", "shell", "zsh login shells, on exit"},
	{"**/.zcompdump*", "shell", "sourced by compinit in interactive zsh"},
	{"**/*.zwc", "shell", "compiled zsh scripts: zsh loads .zshrc.zwc (and autoloaded functions' .zwc) in place of the source when newer"},
	{"**/.cshrc", "shell", "every csh and tcsh"},
	{"**/.tcshrc", "shell", "every tcsh"},
	{"**/.login", "shell", "csh and tcsh login shells"},
	{"**/.logout", "shell", "csh and tcsh login shells, on exit"},
	{"**/.kshrc", "shell", "interactive ksh93"},
	{"**/.mkshrc", "shell", "interactive mksh"},
	{"**/.config/fish/**", "shell", "every fish: config.fish, conf.d/*.fish, autoloaded functions/*.fish"},
	{"**/.tmux.conf", "shell", "tmux at server start (run-shell, if-shell)"},
	{"**/.config/tmux/**", "shell", "tmux at server start ($XDG_CONFIG_HOME/tmux/tmux.conf)"},
	{"**/.screenrc", "shell", "GNU screen at start (exec)"},
	{"**/.lessfilter", "shell", "lesspipe (LESSOPEN on Debian and Ubuntu) runs it for every file less opens, git's pager included"},
	// direnv and environment managers.
	{"**/.envrc", "env", "direnv on entering the directory (allowed once by path and content; what it sources is not re-checked)"},
	{"**/.direnv/**", "env", "direnv layouts: .direnv/*/bin is put first on PATH, activate scripts are sourced"},
	{"**/.config/direnv/**", "env", "direnvrc and lib/*.sh, sourced before every .envrc"},
	{"**/mise*.toml", "env", "mise on entering the directory: [env] _.source scripts, [hooks], tasks"},
	{"**/.mise*.toml", "env", "mise on entering the directory (dot-named configuration)"},
	{"**/.mise/**", "env", "mise's project configuration directory"},
	{"**/.config/mise/**", "env", "mise's user configuration"},
	// Editors and IDEs.
	{"**/.vscode/**", "editor", "VS Code and its forks: tasks.json (runOn: folderOpen), settings.json (interpreter and tool paths, terminal env), launch.json, mcp.json"},
	{"**/*.code-workspace", "editor", "VS Code workspace files hold the same settings, tasks and launch configurations"},
	{"**/.devcontainer/**", "editor", "Dev Containers: initializeCommand runs on the host when the folder is reopened in a container"},
	{"**/.devcontainer.json", "editor", "Dev Containers, single-file form"},
	{"**/.idea/**", "editor", "JetBrains IDEs: run configurations, startup tasks, external tools, file watchers"},
	{"**/.exrc", "editor", "vi and vim with 'exrc' set, at start in the directory"},
	{"**/.nvimrc", "editor", "vim and neovim with 'exrc' set"},
	{"**/.nvim.lua", "editor", "neovim with 'exrc' set"},
	{"**/.vimrc", "editor", "every vim (~/.vimrc), and with 'exrc' the directory's"},
	{"**/.gvimrc", "editor", "every gvim"},
	{"**/.vim/**", "editor", "vim's runtime directory: plugin/, autoload/, ftplugin/ load at start or by file type"},
	{"**/.config/nvim/**", "editor", "neovim's init.lua/init.vim and plugins"},
	{"**/.emacs", "editor", "Emacs at start"},
	{"**/.emacs.el", "editor", "Emacs at start"},
	{"**/.emacs.d/**", "editor", "Emacs at start: init.el, early-init.el, packages"},
	{"**/.config/emacs/**", "editor", "Emacs at start (XDG location)"},
	{"**/.zed/**", "editor", "Zed: settings.json names language server and context server commands it starts on open"},
	{"**/.helix/**", "editor", "Helix: languages.toml names language server commands it starts on open"},
	// Agent tools.
	{"**/.mcp.json", "agent", "Claude Code and other MCP clients start the servers it lists"},
	{"**/.claude/**", "agent", "Claude Code: settings.json and settings.local.json hooks run commands on session start and tool use; permissions; commands, agents, skills"},
	{"**/.claude.json", "agent", "Claude Code's user file: MCP servers it starts, per-project settings"},
	{"**/.cursor/**", "agent", "Cursor: mcp.json servers, rules, hooks"},
	{"**/.gemini/**", "agent", "Gemini CLI: settings.json mcpServers, toolDiscoveryCommand and toolCallCommand, hooks"},
	{"**/.codex/**", "agent", "Codex CLI: config.toml mcp_servers and notify program"},
	{"**/.continue/**", "agent", "Continue: config.yaml MCP servers, config.ts run at load"},
	{"**/.aider*/**", "agent", "aider: .aider.conf.yml (lint-cmd and test-cmd run after edits), model settings, the tags cache (pickled)"},
	{"**/.aider*", "agent", "aider's own directories (a link in their place reaches what they hold)"},
	{"**/.windsurf/**", "agent", "Windsurf: rules and workflows"},
	{"**/.codeium/**", "agent", "Windsurf and Codeium: mcp_config.json servers"},
	{"**/.roo/**", "agent", "Roo Code: mcp.json servers, rules"},
	{"**/.amazonq/**", "agent", "Amazon Q Developer: mcp.json servers, rules"},
	{"**/.opencode/**", "agent", "opencode: plugins (run at start), commands, agents"},
	{"**/opencode.json{,c}", "agent", "opencode: MCP servers, plugins"},
	{"**/.config/opencode/**", "agent", "opencode's user configuration"},
	{"**/.config/goose/**", "agent", "Goose: extensions (commands it starts)"},
	{"**/.junie/**", "agent", "JetBrains Junie: MCP configuration, guidelines"},
	// Language runtimes and toolchains.
	{"**/{site,dist}-packages/*.pth", "runtime", "every Python start in that environment executes a .pth file's import lines (language servers and editors start it on open)"},
	{"**/{site,dist}-packages/{site,user}customize.py", "runtime", "every Python start in that environment imports them"},
	{"**/.pythonrc*", "runtime", "the interactive Python REPL (PYTHONSTARTUP)"},
	{"**/.irbrc", "runtime", "irb and rails console at start"},
	{"**/.pryrc", "runtime", "pry at start"},
	{"**/.cargo/**", "runtime", "cargo and rust-analyzer (which runs cargo check on open): config.toml build.rustc-wrapper and target runners; ~/.cargo/bin is on PATH"},
	{"**/.config/go/env", "runtime", "every go command and gopls: GOFLAGS (-toolexec), GOTOOLCHAIN"},
	// Desktop session (a home directory in the tree).
	{"**/.config/autostart/**", "session", "the desktop session starts its .desktop entries at login"},
	{"**/.config/systemd/**", "session", "systemd --user starts enabled units at login"},
	{"**/.config/environment.d/**", "session", "environment of the user's session and services (LD_PRELOAD)"},
	{"**/.xprofile", "session", "display managers source it at graphical login"},
	{"**/.xinitrc", "session", "startx runs it"},
	{"**/.xsession", "session", "display managers run it at graphical login"},
	{"**/.xsessionrc", "session", "Debian's Xsession sources it at graphical login"},
}
