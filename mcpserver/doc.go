// Package mcpserver serves a capfs Dir to AI agents as a Model Context Protocol
// server (github.com/modelcontextprotocol/go-sdk), over any MCP transport: stdio,
// streamable HTTP, or in memory.
//
// New registers tools with the argument names agents already know: read (numbered
// lines, offset/limit; images and audio as media), read_many, tail, read_media,
// write (atomic, create_only), append, edit (old_string/new_string, replace_all,
// dry_run), multi_edit (several edits, all or none), apply_patch (the "*** Begin
// Patch" format or a unified diff as git diff writes it, all files or none), list
// (sort_by, sizes), tree, glob (exclude), grep (internal/search: rg's defaults),
// stat, mkdir, move, copy, remove, mounts and help. See README.md for what each
// does and for the compatibility table with the reference server, Claude Code
// and Codex. StdioTransport and NewHTTPHandler are the transports capfs mcp uses:
// the SDK's, with the protocol robustness it lacks (README.md, Protocol).
//
// # Guarantees
//
//   - Every file access is a call on the Dir given to New, so it is confined,
//     checked against the Dir's policy and audited exactly as any other guest
//     call: the server holds no other handle on storage and never parses a path
//     into a host path. Paths in tool arguments (including apply_patch headers,
//     "Move to" lines and move/copy destinations) are guest paths of that Dir.
//   - A Dir that can never write (dir.Dir.IsReadOnly) gets no mutating tool at
//     all: they are not registered, so they are not even listed.
//   - Once the Dir is revoked, every tool fails with the revoked code.
//   - A tool error is a result with IsError set whose text starts with
//     "error <code>:" and whose _meta holds the stable code (MetaCode), the
//     guest path (MetaPath) and a hint (MetaHint); it never holds a host path.
//   - Arguments are decoded by the server: a missing, unknown or mistyped
//     argument, or one out of range, is CodeInvalidArgument with a message
//     naming the argument, the type it takes and what was given (a JSON-RPC
//     -32602 error instead for sessions before protocol 2025-11-25); it is
//     never a path error.
//   - Every tool declares a title and an output schema, and every successful
//     result carries structuredContent of that schema beside its text.
//   - Text is returned only as valid UTF-8: a file whose lines are not is
//     refused (not_supported), never returned with replaced bytes.
//   - A name that is not UTF-8 (Latin-1 "caf\xe9") is shown in
//     internal/termsafe's escaped form in text, in structuredContent and in an
//     error's _meta path, and that form names it in a path argument (path,
//     paths, source, destination, dest): no name holds a backslash, so none is
//     lost by it. Two names that differ in such a byte never show the same.
//   - Every tool call's context carries a request tag (audit.WithRequestTag):
//     "mcp:<session>:<tool>#<n>". Every audit event of the Dir calls the tool
//     makes has it in Event.Tag, and the result's _meta has it under
//     MetaRequestTag. grep's successful read, list and stat calls are
//     summarised in one event (op "grep", Count set) when the Dir's sink is
//     wrapped by audit.Batching; its refusals and failures are one event each.
//   - apply_patch parses and checks every file, computes every new content,
//     refuses existing Add/Move targets and asks the Dir (dir.Dir.Check) whether
//     every write and removal would be allowed, all before writing anything;
//     if a write then fails (a read-only mount, a hook, the backend), the
//     changes already made are reverted, newest first.
//   - apply_patch places a hunk where its old lines match exactly, else ignoring
//     line ends, else also ignoring trailing whitespace (leading whitespace always
//     counts). A hunk that matches in several places at the first level that
//     matches at all, and that no unified-diff line number decides, is refused
//     with conflict naming the candidate lines, never applied at the first. Lines
//     added at a normalized match get the file's line ends, so a CRLF file patched
//     with LF lines stays CRLF; a file keeps its final-newline state unless the
//     patch has a "\ No newline at end of file" line. Applied to the file it was
//     made from, a git diff gives git apply's bytes and executable bits (a corpus
//     test compares the two on hundreds of real patches).
//   - Tool annotations are truthful: reading tools are ReadOnlyHint, write/copy/
//     mkdir/remove are idempotent, append and mkdir are not destructive, and no
//     tool reaches an open world.
//
// # Not guaranteed
//
//   - apply_patch is not git apply on a file that changed since the diff was
//     made: where git apply takes the match nearest the hunk's line number,
//     apply_patch refuses when several places match; it accepts matches that
//     differ in line ends or trailing whitespace, which git apply refuses; it
//     keeps the directories a deletion empties. A hunk without any context
//     (git diff -U0) goes by its line numbers, as git apply --unidiff-zero
//     places it (plain git apply moves it to the end of the file). Binary patches, copies, symlinks
//     and submodules are refused (not_supported), and so is a patch naming one
//     path twice (git apply accepts, for example, a rename followed by a new
//     file at the old name).
//   - apply_patch and the other multi-step tools are atomic with respect to
//     failures of their own writes, not to concurrent writers: another client can
//     change a file between the check and the write, and a rollback restores the
//     contents the patch read. Readers may briefly see some files patched and
//     others not.
//   - write with create_only creates the empty file first (already_exists is
//     decided by the backend, so two writers cannot both create it) and then
//     replaces it atomically: a reader can see it empty in between.
//   - move across mounts copies and then deletes (dir.AllowCopy). The
//     already_exists check of move and copy without overwrite is made just
//     before the call, so a destination created in between is replaced.
//   - The tool list is decided once, by New: a namespace that later gains a
//     writable mount keeps offering only the reading tools, and one that becomes
//     read-only keeps offering writing tools that then fail with read_only.
//   - Annotations are hints for clients; what a tool can do is decided by the
//     Dir, not by them.
//   - Limits bound what one call returns (Options), not what it reads: grep reads
//     every file it searches, up to the Dir's own read limit.
package mcpserver
