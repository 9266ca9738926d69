package mcpserver

import "github.com/modelcontextprotocol/go-sdk/mcp"

func (s *server) addReadTools(srv *mcp.Server) {
	add(s, srv, "read", "Read a text file as numbered lines (like cat -n). offset is the 1-based first line, limit the number of lines "+
		"(default 2000). Long lines are cut. Output larger than the read limit fails with file_too_large naming a smaller limit.",
		readOnly, s.read)
	add(s, srv, "read_many", "Read several text files at once, each under a ==> path <== header, as read does. "+
		"A file that fails shows its error in place; the others are still read.", readOnly, s.readMany)
	add(s, srv, "list", "List a directory: one entry per line, [DIR], [FILE] with its size in bytes, or [LINK] with its target.",
		readOnly, s.list)
	add(s, srv, "tree", "Show a directory tree, indented, with file sizes: depth levels deep (default 3), leaving out entries "+
		"matching exclude patterns (e.g. [\".git\", \"node_modules\"]).", readOnly, s.tree)
	add(s, srv, "glob", "Find paths matching a glob pattern (** spans directories, e.g. **/*.go), newest first.", readOnly, s.glob)
	add(s, srv, "grep", "Search file contents with a regular expression (Go RE2 syntax). output_mode: files_with_matches (default), "+
		"content (path:line:text, with -A/-B/-C context) or count. -i for case-insensitive, glob to filter files, head_limit "+
		"to bound the output. Binary files and files the policy refuses are skipped (and counted).", readOnly, s.grep)
	add(s, srv, "stat", "Describe one entry as JSON: type, size, mode, modification time, and a symlink's target.", readOnly, s.stat)
	add(s, srv, "mounts", "Show what is mounted where, and whether each mount is read-only, as JSON.", readOnly, s.mounts)
	add(s, srv, "help", "Explain the path rules, error codes and restrictions of the files this server serves.", readOnly, s.help)
}

func (s *server) addWriteTools(srv *mcp.Server) {
	add(s, srv, "write", "Write a whole file, atomically (readers see the old or the new contents, never a mix); missing parent "+
		"directories are created. With create_only, fail with already_exists instead of replacing a file.", destructiveIdem, s.write)
	add(s, srv, "append", "Append text to the end of a file, creating it if missing.", additive, s.appendTool)
	add(s, srv, "edit", "Replace old_string with new_string in a file. old_string must match exactly (whitespace included) and "+
		"occur exactly once, unless replace_all is set; otherwise the error gives the number of matches and the nearest "+
		"near-miss. dry_run returns the unified diff without writing.", destructive, s.edit)
	add(s, srv, "apply_patch", "Apply a patch in the *** Begin Patch format (Add File, Delete File, Update File with optional "+
		"Move to, @@ hunks with ' ', '-' and '+' lines, *** End Patch) or a unified diff as git diff writes it (renames, "+
		"added and deleted files, mode changes; hunk headers must count their lines). All files change or none: every hunk is checked "+
		"before anything is written, and a failed write rolls back the others. Lines match exactly, else ignoring line ends "+
		"(a CRLF file stays CRLF), else ignoring trailing whitespace; a hunk matching in several places is refused with "+
		"conflict naming the lines (add context). dry_run returns the diff.", destructive, s.applyPatch)
	add(s, srv, "mkdir", "Create a directory and any missing parents; succeeds if it already exists.", additiveIdem, s.mkdir)
	add(s, srv, "move", "Move or rename a file or directory. Fails with already_exists if destination exists, unless overwrite.",
		destructive, s.move)
	add(s, srv, "copy", "Copy a file (atomically) or a directory (recursively). Fails with already_exists if destination "+
		"exists, unless overwrite.", destructiveIdem, s.copyTool)
	add(s, srv, "remove", "Remove a file, symlink or empty directory; a non-empty directory only with recursive.",
		destructiveIdem, s.remove)
}
