package mcpserver

import "github.com/modelcontextprotocol/go-sdk/mcp"

func (s *server) addReadTools(srv *mcp.Server) {
	add(s, srv, "read", "Read file", "Read a text file as numbered lines (like cat -n). offset is the 1-based first line, limit the number of lines "+
		"(default 2000). Long lines are cut. Output larger than the read limit fails with file_too_large naming a smaller limit. "+
		"Text must be UTF-8 (other encodings and binary files are refused with not_supported); CRLF line endings are reported. "+
		"An image or audio file is returned as image/audio content with its MIME type.",
		readOnly, s.read)
	add(s, srv, "read_many", "Read several files", "Read several text files at once, each under a ==> path <== header, as read does. "+
		"A file that fails shows its error in place; the others are still read.", readOnly, s.readMany)
	add(s, srv, "tail", "Read the end of a file", "Read the last lines of a text file (default 20), numbered as read numbers them.", readOnly, s.tail)
	add(s, srv, "read_media", "Read image or audio", "Return an image (PNG, JPEG, GIF, WebP, BMP, ICO) or audio file (WAV, MP3, OGG, FLAC, M4A) "+
		"as MCP image/audio content with its MIME type, up to the media size limit.", readOnly, s.readMediaTool)
	add(s, srv, "list", "List directory", "List a directory: one entry per line, [DIR], [FILE] with its size in bytes, [LINK] with its target, "+
		"or [HIDDEN] for an entry the policy refuses. sort_by name (default), size (largest first) or mtime (newest first); reverse flips it.",
		readOnly, s.list)
	add(s, srv, "tree", "Directory tree", "Show a directory tree, indented, with file sizes: depth levels deep (default 3), leaving out entries "+
		"matching exclude patterns (e.g. [\".git\", \"node_modules\"]).", readOnly, s.tree)
	add(s, srv, "glob", "Find files by name", "Find paths matching a glob pattern (** spans directories, e.g. **/*.go), newest first; "+
		"exclude leaves out paths under matching names (e.g. [\"node_modules\", \".git\"]).", readOnly, s.glob)
	add(s, srv, "grep", "Search file contents", "Search file contents with a regular expression (Go RE2 syntax), as rg does: .git and "+
		"what .gitignore excludes are skipped unless no_ignore. output_mode: files_with_matches (default), "+
		"content (path:line:text, with -A/-B/-C context) or count. -i for case-insensitive, glob to filter files, exclude to skip "+
		"paths, head_limit to bound the output (the search stops there). Binary files, files too large and files the policy refuses "+
		"are skipped and reported.", readOnly, s.grep)
	add(s, srv, "stat", "Describe entry", "Describe one entry as JSON: type, size, mode, modification time, and a symlink's target.", readOnly, s.stat)
	add(s, srv, "mounts", "List mounts", "Show what is mounted where, and whether each mount is read-only, as JSON.", readOnly, s.mounts)
	add(s, srv, "help", "How to use these files", "Explain how to work with this server: which tool to use when, the path rules, "+
		"what each error code means and what to do about it, and what is mounted.", readOnly, s.help)
}

func (s *server) addWriteTools(srv *mcp.Server) {
	add(s, srv, "write", "Write file", "Write a whole file, atomically (readers see the old or the new contents, never a mix); missing parent "+
		"directories are created. With create_only, fail with already_exists instead of replacing a file.", destructiveIdem, s.write)
	add(s, srv, "append", "Append to file", "Append text to the end of a file, creating it if missing.", additive, s.appendTool)
	add(s, srv, "edit", "Edit file", "Replace old_string with new_string in a file. old_string must match exactly (whitespace included) and "+
		"occur exactly once, unless replace_all is set; otherwise the error gives the number of matches, or the closest candidate "+
		"and how it differs. In a CRLF file, old_string may be written with \\n: CRLF line ends are kept. dry_run returns the "+
		"unified diff without writing.", destructive, s.edit)
	add(s, srv, "multi_edit", "Edit file in several places", "Apply several edits (old_string/new_string/replace_all, as edit takes them) "+
		"to one file, in order, each to the result of the previous. All succeed or nothing is written; an error names the edit "+
		"that failed. dry_run returns the diff.", destructive, s.multiEdit)
	add(s, srv, "apply_patch", "Apply patch", "Apply a patch in the *** Begin Patch format (Add File, Delete File, Update File with optional "+
		"Move to, @@ hunks with ' ', '-' and '+' lines, *** End Patch) or a unified diff as git diff writes it (renames, "+
		"added and deleted files, mode changes; hunk headers must count their lines). All files change or none: every hunk is checked "+
		"before anything is written, and a failed write rolls back the others. Lines match exactly, else ignoring line ends "+
		"(a CRLF file stays CRLF), else ignoring trailing whitespace; a hunk matching in several places is refused with "+
		"conflict naming the lines (add context). dry_run returns the diff.", destructive, s.applyPatchTool)
	add(s, srv, "mkdir", "Create directory", "Create a directory and any missing parents; succeeds if it already exists.", additiveIdem, s.mkdir)
	add(s, srv, "move", "Move or rename", "Move or rename a file or directory. Fails with already_exists if destination exists, unless overwrite.",
		destructive, s.move)
	add(s, srv, "copy", "Copy", "Copy a file (atomically) or a directory (recursively). Fails with already_exists if destination "+
		"exists, unless overwrite.", destructiveIdem, s.copyTool)
	add(s, srv, "remove", "Remove", "Remove a file, symlink or empty directory; a non-empty directory only with recursive.",
		destructiveIdem, s.remove)
	add(s, srv, "extract_archive", "Extract archive", "Extract an archive file (zip, tar, tar.gz, tar.zst) into an existing directory, "+
		"safely: every entry is decided before anything is written. Left out, and listed with the reason: names with .. or an "+
		"absolute path, symlinks and hard links (unless links, then only those staying inside dest), devices, names colliding "+
		"after case folding, entries the policy refuses, names dest already has (unless overwrite). Modes are clamped; limits "+
		"bound entries and bytes; a refused archive changes nothing.", additive, s.extract)
}
