package dir

import "strings"

// Help returns a description of Dir for a reader who has never seen it (a model
// given the capability as a tool): what it is, the path rules, every method with
// its arguments, results, errors and an example, and how attenuation works. The
// first lines state this Dir's current restrictions.
func (d *Dir) Help() string {
	var b strings.Builder
	b.WriteString("Dir is a capability for one directory tree. ")
	b.WriteString(d.status())
	b.WriteString("\n")
	b.WriteString(dirHelp)
	b.WriteString("\nThe whole-file read limit of this Dir is " + formatSize(d.s.env.maxRead) + ".\n")
	return b.String()
}

func (d *Dir) status() string {
	switch {
	case d.s.gate.isRevoked():
		return "This Dir has been revoked: every call fails with code revoked."
	case d.s.ro:
		return "This Dir is read-only: every write fails with code read_only."
	case !d.s.gate.writable():
		return "Writes through this Dir are currently locked by its owner (code read_only)."
	}
	return "This Dir is writable."
}

const dirHelp = `
You can reach everything beneath its root and nothing else: no method returns a
parent. Every method that takes a context (ctx) is checked, in this order:
revocation, the path, read-only restrictions, the owner's policy, then it runs;
every call is recorded in an audit trail.

PATHS
  - Slash-separated and relative to this Dir: "src/main.go".
  - A leading "/" means this Dir's own root, not the computer's: "/src" = "src".
  - "." is this Dir itself. "" is an error (invalid_path), except for List,
    ReadDir and Walk, where "" means ".".
  - ".." is allowed only while it stays inside: "a/../b" is "b"; "../x" fails with
    path_outside_sandbox. Paths are cleaned as text, before looking at the tree.
  - NUL bytes and backslashes are never allowed (invalid_path).
  - A trailing slash ("dir/") requires a directory.
  - Symlinks are followed only inside the tree: a link that leads outside fails
    with path_outside_sandbox when used. Symlink refuses to create absolute
    targets or targets that climb above this Dir's root.

ERRORS
  Every error is a *vfs.Error with a stable Code, the method name (Op) and your
  path as you wrote it. Codes: not_found, already_exists, not_a_directory,
  is_a_directory, not_empty, invalid_path, path_outside_sandbox, read_only,
  revoked, fs_permission_denied (refused by policy; the message says why),
  file_too_large, quota_exceeded, too_many_links, not_regular_file, cross_mount,
  not_supported, closed, canceled, io_error. errors.Is matches them against
  io/fs sentinels (fs.ErrNotExist, fs.ErrExist, fs.ErrPermission, fs.ErrInvalid).

READING
  List(ctx, path) -> ([]string, error)
      Names in directory path, sorted. Errors: not_found, not_a_directory.
      Example: List(ctx, "") -> ["README.md", "src"]
  ReadDir(ctx, path) -> ([]fs.DirEntry, error)
      Entries of directory path, sorted, with type bits (directory, symlink, file).
      Example: ReadDir(ctx, "src")
  ReadDirVisible(ctx, path) -> ([]fs.DirEntry, error)
      Like ReadDir, less the entries Walk leaves out and those whose status the
      owner's policy refuses (a secret's name): what a FUSE mount lists.
  ReadDirVisibleInfo(ctx, path) -> ([]vfs.DirInfo, error)
      ReadDirVisible with each entry's status (as Lstat gives it), read with
      the listing in one pass where the backend can.
  Stat(ctx, path) -> (fs.FileInfo, error)
      Size, mode, modification time; follows a final symlink.
      Example: Stat(ctx, "README.md").Size() -> 1234
  Lstat(ctx, path) -> (fs.FileInfo, error)
      Like Stat, but describes a symlink itself.
  StatFS(ctx, path) -> (vfs.FSStat, error)
      The capacity of the storage holding path: bytes and entries, total and
      free (not_supported where the storage knows none).
  Exists(ctx, path) -> (bool, error)
      true if an entry exists (a dangling symlink counts); missing is (false, nil).
  ReadFile(ctx, path) -> ([]byte, error)
      Whole contents of a file. Errors: not_found, is_a_directory,
      not_regular_file, file_too_large (over the read limit: use Open to stream).
      Example: ReadFile(ctx, "src/main.go")
  Readlink(ctx, path) -> (string, error)
      The target text of a symlink. Example: Readlink(ctx, "latest") -> "v2"
  Glob(ctx, pattern) -> ([]string, error)
      Paths matching pattern, sorted, relative to this Dir. "*" and "?" match
      within one name, "[a-z]" a class, "{a,b}" alternatives, "**" any number of
      directories including none ("dir/**" includes "dir" itself), "\" escapes.
      Symlinked directories are not descended into; entries the owner's policy
      refuses are left out. Bad pattern, or more than 1024 combinations of {}
      alternatives: invalid_path. ".." in a pattern: path_outside_sandbox.
      Example: Glob(ctx, "**/*.go") -> ["main.go", "lib/util.go"]
  Walk(ctx, root, fn) -> error
      Calls fn(path, entry, err) for root and everything beneath it, in lexical
      order, like fs.WalkDir; fn may return fs.SkipDir or fs.SkipAll. Symlinks
      are reported, not followed; entries the owner's policy refuses are left
      out. Paths start with root cleaned ("." for "").
      Example: Walk(ctx, "src", func(p string, e fs.DirEntry, err error) error {...})

WRITING (fails with read_only on a read-only Dir)
  WriteFile(ctx, path, data, perm) -> error
      Replaces (or creates) a file atomically: readers see the old or the new
      contents, never a mix. A new file gets perm (e.g. 0o644); an existing one
      keeps its permissions; through a symlink, the target is replaced.
      Example: WriteFile(ctx, "notes.txt", []byte("hi\n"), 0o644)
  Append(ctx, path, data) -> error
      Adds data at the end of a file, creating it (mode 0644) if missing.
  CreateFile(ctx, path) -> (*File, error)
      Creates an empty file; already_exists if anything is there.
  CreateDir(ctx, path) -> (*Dir, error)
      Creates one directory (its parent must exist) and returns it as a Dir.
  MkdirAll(ctx, path) -> error
      Creates a directory and any missing parents; fine if it already exists.
      Example: MkdirAll(ctx, "build/out")
  Remove(ctx, path) -> error
      Removes a file, a symlink (never its target) or an empty directory.
      Errors: not_found, not_empty. The root cannot be removed.
  RemoveAll(ctx, path) -> error
      Removes path and everything beneath it, never following symlinks; a missing
      path is not an error. The root cannot be removed.
  Move(ctx, from, to [, AllowCopy()]) -> error
      Renames; replaces a file at to. Between different storage mounts it fails
      with cross_mount unless you pass AllowCopy(), which copies then deletes.
      Example: Move(ctx, "draft.md", "docs/final.md")
  Copy(ctx, from, to) -> error
      Copies a file (atomically, replacing a file at to), a symlink (as a link),
      or a directory recursively (to must not exist).
      Example: Copy(ctx, "template", "project2")
  Symlink(ctx, target, link) -> error
      Creates link pointing to target. target must be relative and stay inside
      this Dir from the link's directory: Symlink(ctx, "../lib", "app/lib") is
      fine; Symlink(ctx, "/etc/passwd", "x") fails with path_outside_sandbox.
  Link(ctx, oldname, newname) -> error
      Creates a hard link, where the storage supports it (not_supported otherwise).
  Chmod(ctx, path, mode) -> error
      Sets permission bits, e.g. 0o755, and sticky (0o1000). setuid/setgid are
      refused (fs_permission_denied).
  Chtimes(ctx, path, atime, mtime) -> error / Lchtimes(ctx, path, atime, mtime) -> error
      Sets access and modification times; a zero time leaves one unchanged.
      Lchtimes sets a symlink's own times (not_supported where the storage cannot).
  Chown(ctx, path, uid, gid) -> error / Lchown(ctx, path, uid, gid) -> error
      Sets the numeric owner and group (-1 keeps one); Lchown changes a symlink
      itself. Only where the storage keeps owners (not_supported otherwise), and
      only as far as the host allows (fs_permission_denied).

STREAMING
  Open(ctx, path, flag, perm) -> (*Handle, error)
      Opens with os flags: os.O_RDONLY, O_WRONLY, O_RDWR, O_CREATE, O_EXCL,
      O_TRUNC, O_APPEND (any write flag on a read-only Dir: read_only). A file
      O_CREATE makes gets perm's permission and sticky bits; setuid and setgid
      are silently dropped. A Handle has Read, ReadAt, Write, WriteAt, Seek,
      Truncate, Stat, OpenStat (the status at the open, where the backend
      recorded it: no second stat), Sync, ReadDir (for directories), Name,
      Chmod and Chtimes (of the open file, even once its name is gone: writes)
      and Close. Each call re-checks revocation and read-only.
      Example: h, _ := Open(ctx, "big.log", os.O_RDONLY, 0); defer h.Close()

NARROWING (attenuation: one-way, chainable; the result keeps every restriction)
  OpenDir(ctx, name) -> (*Dir, error)
      The child directory name (one name, no "/") as a Dir.
      Example: OpenDir(ctx, "src")
  Sub(ctx, path) -> (*Dir, error)
      A Dir re-rooted at directory path: its holder cannot reach above it. It
      stays attached to that directory even if it is renamed later.
      Example: Sub(ctx, "src/lib")
  ReadOnly() -> *Dir
      The same tree, read-only, permanently (so are Dirs, Files and Handles
      derived from it). Example: ReadOnly().Sub(ctx, "src") is a read-only Dir
      of src; so is Sub(ctx, "src") followed by ReadOnly().
  Check(ctx, op, path, dest, size) -> error
      Would a call doing op ("read", "write", "mkdir", "remove", "rename", ...)
      on path be allowed? Runs the checks (revoked, path, read-only, policy)
      without doing anything; dest is the second path of rename/copy/link or a
      symlink's target, size the bytes a write would leave (-1: unknown).
      Example: Check(ctx, "write", "src/a.go", "", 120)
  IsReadOnly() -> bool
      true when no write through this Dir can ever succeed (it was made
      read-only, or its storage is). Example: if d.IsReadOnly() { ... }
  OpenFile(ctx, path) -> (*File, error)
      A File capability for one existing regular file (File has its own Help).

ARCHIVES, JSON, WATCHING (archives and JSON are functions of their own packages, taking the Dir d)
  archive.ExtractDirFile(ctx, d, archivePath, dest, archive.Options{}) -> (*archive.Result, error)
      Extracts a zip, tar, tar.gz or tar.zst file of this Dir into the existing
      directory dest, safely: every entry is decided first ("..", absolute names,
      links, devices, case or Unicode collisions, limits, the owner's policy),
      then only accepted entries are written. Result lists what was extracted
      and what was filtered and why; a refused archive changes nothing.
      Example: archive.ExtractDirFile(ctx, d, "dl/src.tar.gz", "src", archive.Options{})
  archive.ExtractToDir(ctx, d, readerAt, size, dest, opts) -> (*archive.Result, error)
      The same for an archive the host hands over.
  archive.CreateFromDir(ctx, d, src, w, archive.CreateOptions{}) -> (*archive.CreateResult, error)
      Writes the tree below src to w as tar.zst (or tar, tar.gz, zip),
      reproducibly; entries you may not read are skipped and listed.
  jsonfile.Read(ctx, d, path, &v, jsonfile.ReadOptions{Strict: true}) -> error
      Decodes a JSON file (8 MiB at most by default); data after the value is
      refused, and with Strict unknown fields too (io_error).
  jsonfile.Write(ctx, d, path, v, jsonfile.WriteOptions{}) -> error
      Writes v as indented JSON, atomically (never a torn file).
  Watch(ctx, WatchOptions{Patterns: []string{"**/*.go"}}) -> (*Watcher, error)
      Reports create, write, remove, rename and chmod events on Events() until
      Close, revocation or ctx's end; paths you may not see never appear; a
      "rescan" event means some were lost. not_supported when the storage has
      no change stream.
  HostChanges() -> (<-chan struct{}, stop func())
      Receives (coalesced) after each revocation or write lock of this Dir's
      tree by its owner; the owner never waits for you. Revoked() -> bool says
      whether this Dir is revoked (every call then fails with revoked).

OTHER
  FS() -> fs.FS
      The same Dir as a Go io/fs file system (same checks).
  Backend() -> vfs.Backend
      The same Dir as a storage backend, for mounting it elsewhere (same checks).
  aferodir.New(d) -> *aferodir.FS, billyfs.New(d) -> *billyfs.FS
      The same Dir as an afero or go-billy file system (same checks; "/a" means
      this Dir's a; errors are *fs.PathError values that os.IsNotExist knows).
  Help() -> string
      This text.
`

// Help returns a description of File for a reader who has never seen it.
func (f *File) Help() string {
	status := "This File is writable."
	switch {
	case f.s.gate.isRevoked():
		status = "This File has been revoked: every call fails with code revoked."
	case f.s.ro:
		status = "This File is read-only: every write fails with code read_only."
	case !f.s.gate.writable():
		status = "Writes through this File are currently locked by its owner (code read_only)."
	}
	return "File is a capability for one file, " + quote(f.name) + ". " + status + "\n" + fileHelp +
		"\nThe whole-file read limit is " + formatSize(f.s.env.maxRead) + ".\n"
}

func quote(s string) string { return "\"" + s + "\"" }

const fileHelp = `
It names the file's entry in its directory: if the file is replaced (for example
by WriteText), the File sees the new contents; if it is removed, calls fail with
not_found until it is created again; renaming its directory does not move it.
Every method that takes a context (ctx) is checked (revocation, read-only, the
owner's policy) and recorded in an audit trail. Errors are *vfs.Error values with a
stable Code (see Dir's Help for the list).

  Name() -> string
      The file's path relative to the Dir it came from. Example: "src/main.go"
  ReadText(ctx) -> (string, error)
      The contents as a string (bytes as stored; UTF-8 is not checked).
      Errors: not_found, file_too_large (over the read limit: use Open).
      Example: ReadText(ctx) -> "# README\n..."
  ReadBytes(ctx) -> ([]byte, error)
      The contents as bytes.
  WriteText(ctx, s) -> error
      Replaces the contents with s, atomically (readers never see a mix).
      Example: WriteText(ctx, "new content\n")
  WriteBytes(ctx, b) -> error
      Replaces the contents with b, atomically.
  Append(ctx, b) -> error
      Adds b at the end. Example: Append(ctx, []byte("one more line\n"))
  Stat(ctx) -> (fs.FileInfo, error)
      Size, mode and modification time.
  Open(ctx, flag) -> (*Handle, error)
      A stream over the file with os flags (os.O_RDONLY, O_WRONLY, O_RDWR,
      O_APPEND, O_TRUNC, O_CREATE): Read, ReadAt, Write, WriteAt, Seek, Truncate,
      Stat, Sync, Close. Writes re-check revocation and read-only on every call.
  ReadOnly() -> *File
      A read-only File for the same file, permanently. Writes fail with read_only.
  Revocable() -> (*File, revoke func())
      A File that works like this one until revoke() is called; then it, Files
      derived from it and Handles opened through it fail with revoked. This File
      is not affected. Use it to lend the file to someone for a while.
  Help() -> string
      This text.
`

// Help returns a description of Control for the host.
func (c *Control) Help() string {
	return controlHelp
}

const controlHelp = `Control is the owner's (host's) facet of a Dir. The Dir's holder cannot reach it:
no Dir, File or Handle method leads here. Control calls are owner actions; they are
neither policed nor audited, except Child, which hands out a Dir (a Sub).

  Dir() -> *Dir
      The Dir this Control governs: give it (or something narrowed from it) away.
  SetWritable(writable bool)
      false locks writes through the Dir and everything derived from it (Subs,
      Files, Handles already open, Child controls' Dirs): they fail with
      read_only until SetWritable(true). Unlocking does not undo a lock set on a
      parent Control, nor a ReadOnly() narrowing.
  Writable() -> bool
      Whether this Control and all its ancestors currently allow writes.
  Revoke()
      Permanently invalidates the Dir and everything derived from it, including
      Child controls' Dirs and open Handles: every new call fails with revoked
      (calls already running may finish; Close still works). Cannot be undone.
  Revoked() -> bool
      Whether this Control or an ancestor has been revoked.
  Child(ctx, path) -> (*Control, error)
      A Control for the subtree at path (relative to this Control's Dir), with its
      own Dir (a Sub) and its own switches, chained under this one: revoking or
      locking this Control also revokes or locks the child, never the reverse.
      path is resolved to the directory it reaches (through symlinks), decided
      and audited there as a Sub, and pinned: decisions and audit events under
      the child name paths from that place.
      Errors: revoked, invalid_path, path_outside_sandbox, fs_permission_denied,
      not_found, not_a_directory. Example: tmp, _ := ctl.Child(ctx, "tmp"); give
      tmp.Dir() to a guest; later tmp.Revoke().
  Location(ctx) -> (string, error)
      Where this Control's Dir is, from the tree's root ("." for it): the
      canonical place of its directory now. Errors: not_found if it left the tree.
  Help() -> string
      This text.
`
