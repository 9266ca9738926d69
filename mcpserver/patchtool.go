package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

type patchIn struct {
	Patch  string `json:"patch,omitempty" jsonschema:"the patch: *** Begin Patch, then *** Add File: / *** Delete File: / *** Update File: (optionally *** Move to:) sections with @@ hunks, then *** End Patch; or a unified diff as git diff writes it"`
	Input  string `json:"input,omitempty" jsonschema:"the same as patch (for clients that name it input)"`
	DryRun bool   `json:"dry_run,omitempty" jsonschema:"change nothing; return the unified diff the patch would make"`
}

// plannedFile is one file change of a patch, computed before anything is written.
type plannedFile struct {
	f      patchFile
	path   string      // canonical guest path (from the root, without leading "/")
	dest   string      // canonical Move to, or ""
	old    string      // contents before (Update, Delete of a regular file)
	new    string      // contents after (Add, Update)
	perm   fs.FileMode // the file's permission bits before (Update, Delete) or when created (Add)
	chmod  fs.FileMode // Update: the permission bits a unified diff's new mode asks for, when they differ from perm
	link   string      // Delete of a symlink: its target
	isLink bool
}

// undo is one step that reverts an applied change.
type undo struct {
	what string
	fn   func(ctx context.Context) error
}

func canonical(p string) (string, error) {
	q, err := vfs.ParseGuest(p)
	if err != nil {
		return "", err
	}
	if q.IsRoot() {
		return "", toolError(vfs.CodeInvalidPath, "apply_patch", p, "the root is not a file")
	}
	return q.String(), nil
}

// checkPath validates a patch path, letting the Dir report (and audit) a path it
// refuses, so an escaping header fails with the Dir's own error.
func (s *server) checkPath(ctx context.Context, p string) (string, error) {
	c, err := canonical(p)
	if err != nil {
		if _, derr := s.root.Lstat(ctx, p); derr != nil && vfs.CodeOf(derr) != vfs.CodeNotFound {
			return "", derr
		}
		return "", err
	}
	return c, nil
}

func (s *server) applyPatchTool(ctx context.Context, in patchIn) (changeOut, string, error) {
	text, err := s.applyPatch(ctx, in)
	if err != nil {
		return changeOut{}, "", err
	}
	out := changeOut{DryRun: in.DryRun}
	if in.DryRun {
		out.Diff = text
	} else {
		out.Summary = text
	}
	return out, text, nil
}

func (s *server) applyPatch(ctx context.Context, in patchIn) (string, error) {
	text := in.Patch
	if text == "" {
		text = in.Input
	} else if in.Input != "" && in.Input != in.Patch {
		return "", argErrorf("give the patch once, as \"patch\" or as \"input\", not two different ones")
	}
	files, err := parsePatch(text)
	if err != nil {
		if pe, ok := err.(*patchError); ok && pe.Code != "" {
			return "", toolError(pe.Code, "apply_patch", "", "%v", err)
		}
		return "", &vfs.Error{Code: CodeInvalidArgument, Op: "apply_patch", Err: fmt.Errorf("argument \"patch\" is malformed: %v", err)}
	}
	plan, err := s.planPatch(ctx, files)
	if err != nil {
		return "", err
	}
	if in.DryRun {
		var b strings.Builder
		for _, p := range plan {
			b.WriteString(p.diff())
		}
		if b.Len() == 0 {
			b.WriteString("(the patch changes nothing)\n")
		}
		return b.String(), nil
	}
	var undos []undo
	for _, p := range plan {
		u, err := s.applyOne(ctx, p)
		undos = append(undos, u...)
		if err != nil {
			return "", s.rollback(ctx, err, undos)
		}
	}
	var b strings.Builder
	for _, p := range plan {
		b.WriteString(p.summary())
	}
	return b.String(), nil
}

// summary is one line naming the change; names are escaped (termsafe), so a name
// cannot forge a line or drive a terminal.
func (p plannedFile) summary() string {
	path, dest := esc(p.path), esc(p.dest)
	switch {
	case p.f.Kind == patchAdd:
		return "A " + path + "\n"
	case p.f.Kind == patchDelete:
		return "D " + path + "\n"
	case p.dest != "":
		return "R " + path + " -> " + dest + "\n"
	case p.chmod != 0 && p.new == p.old:
		return fmt.Sprintf("M %s (mode %04o)\n", path, p.chmod)
	}
	return "M " + path + "\n"
}

// diff is the change as a unified diff whose headers carry escaped names.
func (p plannedFile) diff() string {
	path, dest, link := esc(p.path), esc(p.dest), esc(p.link)
	switch p.f.Kind {
	case patchAdd:
		d := unifiedDiff(path, "", p.new)
		if d == "" {
			return "--- /dev/null\n+++ b/" + path + " (empty file)\n"
		}
		return strings.Replace(d, "--- a/"+path, "--- /dev/null", 1)
	case patchDelete:
		if p.isLink {
			return "deleted symlink " + path + " -> " + link + "\n"
		}
		d := unifiedDiff(path, p.old, "")
		if d == "" {
			return "--- a/" + path + " (empty file)\n+++ /dev/null\n"
		}
		return strings.Replace(d, "+++ b/"+path, "+++ /dev/null", 1)
	}
	d := unifiedDiff(path, p.old, p.new)
	if p.chmod != 0 {
		d = fmt.Sprintf("mode %04o -> %04o %s\n", p.perm, p.chmod, path) + d
	}
	if p.dest != "" {
		if d == "" {
			return "rename " + path + " -> " + dest + "\n"
		}
		return strings.Replace(d, "+++ b/"+path, "+++ b/"+dest, 1)
	}
	return d
}

// planPatch checks every file of the patch and computes its new contents, reading
// but writing nothing.
func (s *server) planPatch(ctx context.Context, files []patchFile) ([]plannedFile, error) {
	seen := patchClaims{}
	plan := make([]plannedFile, 0, len(files))
	for n, f := range files {
		p := plannedFile{f: f}
		if err := s.planPaths(ctx, &p, seen); err != nil {
			return nil, err
		}
		var err error
		switch f.Kind {
		case patchAdd:
			err = s.refuseAny(ctx, f.Path)
			p.new = f.Content
			p.perm = gitPerm(0o644, f.NewMode)
		case patchDelete:
			err = s.planDelete(ctx, n, &p)
		case patchUpdate:
			err = s.planUpdate(ctx, n, &p)
		}
		if err != nil {
			return nil, err
		}
		if err := s.checkWrites(ctx, p); err != nil {
			return nil, err
		}
		plan = append(plan, p)
	}
	return plan, nil
}

// patchClaims is the set of paths the patch has named so far.
type patchClaims map[string]bool

// claim records path c (as the patch wrote it: orig), refusing a path the
// patch names twice.
func (seen patchClaims) claim(orig, c string) error {
	if seen[c] {
		return toolError(vfs.CodeInvalidPath, "apply_patch", orig, "the patch names this file more than once")
	}
	seen[c] = true
	return nil
}

// planPaths checks the file's path and Move to path and claims them; a move
// to the same path is no move.
func (s *server) planPaths(ctx context.Context, p *plannedFile, seen patchClaims) error {
	f := p.f
	var err error
	if p.path, err = s.checkPath(ctx, f.Path); err != nil {
		return err
	}
	if err := seen.claim(f.Path, p.path); err != nil {
		return err
	}
	if f.MoveTo == "" {
		return nil
	}
	if p.dest, err = s.checkPath(ctx, f.MoveTo); err != nil {
		return err
	}
	if p.dest == p.path {
		p.dest = ""
		return nil
	}
	return seen.claim(f.MoveTo, p.dest)
}

// planDelete reads what Delete File (file n of the patch) removes, to
// restore it on a rollback: a symlink's target or a file's contents. A
// unified deletion must remove every line of the file, as git apply checks.
func (s *server) planDelete(ctx context.Context, n int, p *plannedFile) error {
	f := p.f
	info, err := s.root.Lstat(ctx, f.Path)
	if err != nil {
		return err
	}
	switch {
	case info.IsDir():
		return toolError(vfs.CodeIsDir, "apply_patch", f.Path, "Delete File names a directory: use remove")
	case info.Mode()&fs.ModeSymlink != 0:
		p.isLink = true
		p.link, err = s.root.Readlink(ctx, f.Path)
		return err
	}
	data, err := s.root.ReadFile(ctx, f.Path)
	if err != nil {
		return err
	}
	p.old, p.perm = string(data), info.Mode().Perm()
	if !f.Unified {
		return nil
	}
	rest, err := applyChunks(p.old, f.Chunks)
	if err == nil && rest != "" {
		err = errors.New("the file has lines the patch does not remove")
	}
	if err != nil {
		return toolError(vfs.CodeConflict, "apply_patch", f.Path, "file %d of the patch does not apply (nothing was changed): %v", n+1, err)
	}
	return nil
}

// planUpdate reads the file Update File (file n of the patch) changes and
// computes its new contents and mode; a move's destination must be free.
func (s *server) planUpdate(ctx context.Context, n int, p *plannedFile) error {
	f := p.f
	info, err := s.root.Stat(ctx, f.Path)
	if err != nil {
		return err
	}
	if info.IsDir() {
		return toolError(vfs.CodeIsDir, "apply_patch", f.Path, "Update File names a directory")
	}
	data, err := s.root.ReadFile(ctx, f.Path)
	if err != nil {
		return err
	}
	p.old, p.perm = string(data), info.Mode().Perm()
	if p.new, err = applyChunks(p.old, f.Chunks); err != nil {
		return toolError(vfs.CodeConflict, "apply_patch", f.Path, "file %d of the patch does not apply (nothing was changed): %v", n+1, err)
	}
	if len(f.Chunks) == 0 {
		p.new = p.old
	}
	if m := gitPerm(p.perm, f.NewMode); m != p.perm {
		p.chmod = m
	}
	if p.dest != "" {
		return s.refuseAny(ctx, f.MoveTo)
	}
	return nil
}

// checkWrites asks the Dir whether the writes p needs would be allowed (revocation,
// read-only mounts and attenuation, the policy), so that a refusal stops the patch
// before anything is written rather than at the write, with a rollback.
func (s *server) checkWrites(ctx context.Context, p plannedFile) error {
	size := int64(len(p.new))
	var err error
	switch {
	case p.f.Kind == patchDelete:
		err = s.root.Check(ctx, policy.OpRemove, p.path, "", -1)
	case p.dest != "":
		if err = s.root.Check(ctx, policy.OpWrite, p.dest, "", size); err == nil {
			err = s.root.Check(ctx, policy.OpRemove, p.path, "", -1)
		}
	case p.f.Kind == patchAdd || p.new != p.old:
		err = s.root.Check(ctx, policy.OpWrite, p.path, "", size)
	}
	if err == nil && p.chmod != 0 && p.dest == "" {
		err = s.root.Check(ctx, policy.OpChmod, p.path, "", -1)
	}
	if err != nil {
		var ve *vfs.Error
		if errors.As(err, &ve) {
			msg := ve.Message()
			if msg == "" {
				msg = string(ve.Code)
			}
			return &vfs.Error{Code: ve.Code, Op: "apply_patch", Path: ve.Path, Dest: ve.Dest,
				Err: fmt.Errorf("%s (nothing was changed)", msg)}
		}
		return err
	}
	return nil
}

// refuseAny fails with already_exists when something is at p.
func (s *server) refuseAny(ctx context.Context, p string) error {
	ok, err := s.root.Exists(ctx, p)
	if err != nil {
		return err
	}
	if ok {
		return toolError(vfs.CodeExists, "apply_patch", p, "already exists (nothing was changed)")
	}
	return nil
}

// topMissing returns the highest missing ancestor directory of p ("" if every
// ancestor exists), so that a rollback can remove the directories it created.
func (s *server) topMissing(ctx context.Context, p string) (string, error) {
	q, err := vfs.ParseGuest(p)
	if err != nil {
		return "", err
	}
	elems := q.Elems()
	for i := 1; i < len(elems); i++ {
		a := strings.Join(elems[:i], "/")
		ok, err := s.root.Exists(ctx, a)
		if err != nil {
			return "", err
		}
		if !ok {
			return a, nil
		}
	}
	return "", nil
}

// createParents makes p's missing parents and returns the undo that removes them.
func (s *server) createParents(ctx context.Context, p string) ([]undo, error) {
	top, err := s.topMissing(ctx, p)
	if err != nil || top == "" {
		return nil, err
	}
	if err := s.ensureParent(ctx, p); err != nil {
		return nil, err
	}
	return []undo{{"remove directory " + top, func(ctx context.Context) error { return s.root.RemoveAll(ctx, top) }}}, nil
}

// applyOne writes one planned change and returns the steps that revert what it did.
func (s *server) applyOne(ctx context.Context, p plannedFile) ([]undo, error) {
	switch {
	case p.f.Kind == patchAdd:
		return s.applyAdd(ctx, p)
	case p.f.Kind == patchDelete:
		return s.applyDelete(ctx, p)
	case p.dest != "":
		return s.applyMove(ctx, p)
	}
	return s.applyUpdate(ctx, p)
}

// restoreFile is the undo that writes p's old contents back.
func (s *server) restoreFile(p plannedFile) undo {
	return undo{"restore " + p.path, func(ctx context.Context) error {
		return s.root.WriteFile(ctx, p.path, []byte(p.old), p.perm)
	}}
}

// applyAdd creates an added file and the directories above it.
func (s *server) applyAdd(ctx context.Context, p plannedFile) ([]undo, error) {
	undos, err := s.createParents(ctx, p.path)
	if err != nil {
		return undos, err
	}
	if err := s.root.WriteFile(ctx, p.path, []byte(p.new), p.perm); err != nil {
		return undos, err
	}
	return append(undos, undo{"remove " + p.path, func(ctx context.Context) error { return s.root.Remove(ctx, p.path) }}), nil
}

// applyDelete removes a deleted file or symlink.
func (s *server) applyDelete(ctx context.Context, p plannedFile) ([]undo, error) {
	if err := s.root.Remove(ctx, p.path); err != nil {
		return nil, err
	}
	if p.isLink {
		return []undo{{"restore symlink " + p.path, func(ctx context.Context) error { return s.root.Symlink(ctx, p.link, p.path) }}}, nil
	}
	return []undo{s.restoreFile(p)}, nil
}

// applyMove writes a moved file's new contents (and mode) at its
// destination, then removes the old path.
func (s *server) applyMove(ctx context.Context, p plannedFile) ([]undo, error) {
	undos, err := s.createParents(ctx, p.dest)
	if err != nil {
		return undos, err
	}
	perm := p.perm
	if p.chmod != 0 {
		perm = p.chmod
	}
	if err := s.root.WriteFile(ctx, p.dest, []byte(p.new), perm); err != nil {
		return undos, err
	}
	undos = append(undos, undo{"remove " + p.dest, func(ctx context.Context) error { return s.root.Remove(ctx, p.dest) }})
	if err := s.root.Remove(ctx, p.path); err != nil {
		return undos, err
	}
	return append(undos, s.restoreFile(p)), nil
}

// applyUpdate writes an updated file's new contents, if they differ, and
// its new mode, if any.
func (s *server) applyUpdate(ctx context.Context, p plannedFile) ([]undo, error) {
	var undos []undo
	if p.new != p.old {
		if err := s.root.WriteFile(ctx, p.path, []byte(p.new), p.perm); err != nil {
			return undos, err
		}
		undos = append(undos, s.restoreFile(p))
	}
	if p.chmod != 0 {
		if err := s.root.Chmod(ctx, p.path, p.chmod); err != nil {
			return undos, err
		}
		undos = append(undos, undo{"restore the mode of " + p.path, func(ctx context.Context) error {
			return s.root.Chmod(ctx, p.path, p.perm)
		}})
	}
	return undos, nil
}

// rollback reverts the applied steps, newest first, and returns the error to
// report: cause (the failure that stopped the patch), with any step that could
// not be reverted.
func (s *server) rollback(ctx context.Context, cause error, undos []undo) error {
	// Revert even if the caller's context is done: a half-applied patch is worse.
	ctx = context.WithoutCancel(ctx)
	var failed []string
	for i := len(undos) - 1; i >= 0; i-- {
		if err := undos[i].fn(ctx); err != nil {
			failed = append(failed, undos[i].what+" ("+string(vfs.CodeOf(err))+")")
		}
	}
	var ve *vfs.Error
	if !errors.As(cause, &ve) {
		ve = &vfs.Error{Code: vfs.CodeOf(cause), Op: "apply_patch", Err: cause}
	}
	msg := "the patch was rolled back: no file was changed"
	if len(failed) > 0 {
		msg = "the rollback failed for: " + strings.Join(failed, ", ")
	}
	return &vfs.Error{Code: ve.Code, Op: "apply_patch", Path: ve.Path, Dest: ve.Dest, Err: fmt.Errorf("%w; %s", cause, msg)}
}

// gitPerm returns perm changed as a git mode asks (0: unchanged): with the
// executable bit set (100755), perm gains an x bit for each r bit it has; without
// (100644), it loses its x bits. Other bits are kept, so a 0600 file made
// executable becomes 0700, never readable by others.
func gitPerm(perm fs.FileMode, gitMode uint32) fs.FileMode {
	switch {
	case gitMode == 0:
		return perm
	case gitMode&0o100 != 0:
		return perm | (perm&0o444)>>2
	}
	return perm &^ 0o111
}
