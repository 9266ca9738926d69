package archive

import (
	"cmp"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// decidePlace decides p against the destination: what is on its way and at
// its path, the checks of the target Dir, then the caller's Filter.
func (x *extractor) decidePlace(p *planned) (Reason, string, error) {
	x.newDirs = x.newDirs[:0]
	if r, d, err := x.decideDest(p); err != nil || r != "" {
		return r, d, err
	}
	if r, d, err := x.check(p); err != nil || r != "" {
		return r, d, err
	}
	if x.opts.Filter != nil && !x.opts.Filter(p.path, p.mode) {
		return ReasonPolicy, "filter", nil
	}
	return "", "", nil
}

// linkText checks a symlink's target text on its own.
func linkText(t string) (Reason, string) {
	switch {
	case t == "":
		return ReasonLinkTarget, "empty target"
	case len(t) > MaxPathBytes:
		return ReasonLinkTarget, "target too long"
	case strings.ContainsFunc(t, isControl), strings.ContainsRune(t, '\\'):
		return ReasonLinkTarget, "target has a control character or backslash"
	case t[0] == '/', len(t) >= 2 && t[1] == ':' && isLetter(t[0]):
		return ReasonLinkTarget, "absolute target"
	}
	return "", ""
}

// decideName checks a sanitized name against the entries accepted so far.
func (x *extractor) decideName(clean string, k kind) (Reason, string) {
	for i := 0; i < len(clean); i++ {
		if clean[i] != '/' {
			continue
		}
		prefix := clean[:i]
		if n := x.names[prefix]; n != nil && n.kind != kindDir {
			return ReasonThroughLink, prefix + " is not a directory in this archive"
		}
		if other, ok := x.folds[foldKey(prefix)]; ok && other != prefix {
			return ReasonCollision, "folds to the same name as " + other
		}
	}
	if n := x.names[clean]; n != nil {
		if n.kind == kindDir && k == kindDir {
			return "", "" // a directory named twice merges
		}
		return ReasonCollision, "duplicate name"
	}
	if other, ok := x.folds[foldKey(clean)]; ok && other != clean {
		return ReasonCollision, "folds to the same name as " + other
	}
	return "", ""
}

func (x *extractor) register(clean string, k kind) {
	for i := 0; i < len(clean); i++ {
		if clean[i] == '/' {
			prefix := clean[:i]
			if x.names[prefix] == nil {
				x.names[prefix] = &node{kind: kindDir, implicit: true}
				x.folds[foldKey(prefix)] = prefix
			}
		}
	}
	if n := x.names[clean]; n != nil {
		n.implicit = false
		return
	}
	x.names[clean] = &node{kind: k}
	x.folds[foldKey(clean)] = clean
}

// state returns what the destination holds at p, asking t once per path; a
// path beneath an absent directory is absent without asking.
func (x *extractor) state(p string) (destState, error) {
	if s, ok := x.dest[p]; ok {
		return s, nil
	}
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		if ps, ok := x.dest[p[:i]]; ok && ps == destAbsent {
			x.dest[p] = destAbsent
			return destAbsent, nil
		}
	}
	fi, err := x.t.Lstat(x.ctx, p)
	var s destState
	switch {
	case err == nil && fi.IsDir():
		s = destDir
	case err == nil && fi.Mode().IsRegular():
		s = destFile
	case err == nil:
		s = destOther
	case errors.Is(err, fs.ErrNotExist):
		s = destAbsent
	case vfs.CodeOf(err) == vfs.CodeNotDir:
		s = destAbsent // beneath a file: decided on the parent
	case vfs.CodeOf(err) == vfs.CodePermission:
		// A secret or otherwise hidden place: the entry is filtered, whether
		// or not something is there (which stays unknown).
		s = destDenied
	default:
		return 0, err
	}
	x.dest[p] = s
	return s, nil
}

// decideDest looks at what the destination holds on p's way and at p.
func (x *extractor) decideDest(p *planned) (Reason, string, error) {
	for i := 0; i < len(p.path); i++ {
		if p.path[i] != '/' {
			continue
		}
		if r, d, err := x.decideParent(p.path[:i]); err != nil || r != "" {
			return r, d, err
		}
	}
	s, err := x.state(p.path)
	if err != nil {
		return "", "", err
	}
	switch {
	case s == destDenied:
		return ReasonPolicy, "the policy refuses this path", nil
	case s == destAbsent:
		if p.kind == kindDir {
			x.newDirs = append(x.newDirs, p.path)
		}
	case p.kind == kindDir && s == destDir:
	case p.kind == kindFile && s == destFile && x.opts.Overwrite:
		p.repl = true
	default:
		return ReasonExists, "the destination already has this name", nil
	}
	return "", "", nil
}

// decideParent looks at what the destination holds at prefix, a directory
// above an entry: one to create is checked and noted in x.newDirs.
func (x *extractor) decideParent(prefix string) (Reason, string, error) {
	s, err := x.state(prefix)
	if err != nil {
		return "", "", err
	}
	switch s {
	case destDenied:
		return ReasonPolicy, "the policy refuses " + prefix, nil
	case destOther:
		return ReasonDestLink, prefix + " is a symlink or special file in the destination", nil
	case destFile:
		return ReasonExists, prefix + " is a file in the destination", nil
	case destAbsent:
		if !x.hasDir[prefix] {
			if r, d, err := x.checkMkdir(prefix); err != nil || r != "" {
				return r, d, err
			}
			x.newDirs = append(x.newDirs, prefix)
		}
	}
	return "", "", nil
}

// checkMkdir asks the policy about a directory the merge will create as a
// parent; a refusal is remembered, so each directory is asked once.
func (x *extractor) checkMkdir(d string) (Reason, string, error) {
	if detail, ok := x.deniedDir[d]; ok {
		return ReasonPolicy, detail, nil
	}
	r, detail, err := x.check(&planned{path: d, kind: kindDir, size: -1})
	if r != "" {
		x.deniedDir[d] = detail
	}
	return r, detail, err
}

// check asks the destination's policy about the call the merge will make.
func (x *extractor) check(p *planned) (Reason, string, error) {
	var err error
	switch p.kind {
	case kindDir:
		if p.size == 0 && !slices.Contains(x.newDirs, p.path) {
			return "", "", nil // exists: nothing to create
		}
		err = x.t.Check(x.ctx, policy.OpMkdir, p.path, "", -1)
	case kindFile:
		op := policy.OpCreate
		if p.repl {
			op = policy.OpWrite
		}
		err = x.t.Check(x.ctx, op, p.path, "", p.size)
	case kindSymlink:
		err = x.t.Check(x.ctx, policy.OpSymlink, p.path, p.link, -1)
	case kindHardlink:
		err = x.t.Check(x.ctx, policy.OpLink, p.link, p.path, -1)
	}
	if err == nil {
		return "", "", nil
	}
	if vfs.CodeOf(err) == vfs.CodeOutside {
		// The Dir's own symlink rule (a target climbing above it).
		if p.kind == kindSymlink {
			return ReasonLinkTarget, "the target climbs above the destination", nil
		}
		return ReasonTraversal, err.Error(), nil
	}
	if vfs.CodeOf(err) == vfs.CodePermission {
		return ReasonPolicy, cmp.Or(vfs.MessageOf(err), err.Error()), nil
	}
	return "", "", err
}

// checkSymlinks resolves every accepted symlink through the archive's own tree
// (its directories and the other accepted links), now that all are known, and
// filters those that would lead outside the destination. A link filtered here
// makes the links that lead through it fail the next round.
func (x *extractor) checkSymlinks() error {
	for changed := true; changed; {
		changed = false
		kept := x.plan[:0]
		for _, p := range x.plan {
			if p.kind == kindSymlink {
				if detail := x.resolveInside(p.path, p.link); detail != "" {
					x.names[p.path].blocked = true
					x.res.Filtered = append(x.res.Filtered, Filtered{Name: printable(p.path), Path: p.path, Reason: ReasonLinkTarget, Detail: detail})
					changed = true
					continue
				}
			}
			kept = append(kept, p)
		}
		x.plan = kept
	}
	return nil
}

// resolveInside follows target from link's directory through the archive's
// model and reports why it leaves the destination ("" if it stays inside).
func (x *extractor) resolveInside(link, target string) string {
	var stack []string
	if i := strings.LastIndexByte(link, '/'); i >= 0 {
		stack = strings.Split(link[:i], "/")
	}
	hops := 0
	pending := strings.Split(target, "/")
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return "the target climbs above the destination"
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, c)
		cur := strings.Join(stack, "/")
		n := x.names[cur]
		if n == nil || n.kind != kindSymlink {
			continue
		}
		if n.blocked {
			return "the target leads through a link that was left out"
		}
		hops++
		if hops > 40 {
			return "too many levels of symlinks"
		}
		var t string
		for _, q := range x.plan {
			if q.path == cur && q.kind == kindSymlink {
				t = q.link
				break
			}
		}
		stack = stack[:len(stack)-1]
		pending = append(strings.Split(t, "/"), pending...)
	}
	return ""
}
