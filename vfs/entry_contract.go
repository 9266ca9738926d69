package vfs

import "strings"

// CheckCreate returns the error of creating the entry name in a directory, or
// nil. It is not_found if the directory was removed (gone). It is invalid_path
// if name, taken from a symlink target, is not a valid name.
func CheckCreate(op string, p Path, gone bool, name string) error {
	if gone {
		return NewError(CodeNotFound, op, p, "directory has been removed")
	}
	if !ValidName(name) {
		// Only possible for a name taken from a symlink target.
		return NewError(CodeInvalidPath, op, p, "invalid name in symlink target")
	}
	return nil
}

// CheckMkdir returns the error of making directory p, named name in a
// directory, or nil. It is already_exists if found says p names an entry (a
// dangling symlink included), else as [CheckCreate].
func CheckMkdir(p Path, found, gone bool, name string) error {
	if found {
		return NewError(CodeExists, "mkdir", p, "")
	}
	return CheckCreate("mkdir", p, gone, name)
}

// CheckRemove returns the error of removing the entry r resolves to, or nil.
// It is not_found if the entry is missing, invalid_path for the root, and
// not_empty if full reports a directory that holds entries. full's error is
// returned as is.
func CheckRemove[N any](op string, p Path, r Resolution[N], full func(N) (bool, error)) error {
	switch {
	case !r.Found:
		return NewError(CodeNotFound, op, p, "")
	case r.Name == "":
		return NewError(CodeInvalidPath, op, p, "cannot remove the root")
	}
	isFull, err := full(r.Node)
	if err != nil {
		return err
	}
	if isFull {
		return NewError(CodeNotEmpty, op, p, "")
	}
	return nil
}

// CheckSymlinkTarget returns invalid_path if target cannot be stored as the
// text of symlink p: empty, longer than [MaxPathLen], or holding a NUL byte.
//
// It is the whole creation check of a backend that holds its data privately
// (memory, sqlite, a layer's view, a git or CAS tree): a symlink's target is
// data. Such a backend stores a target that is absolute or climbs above its
// root as written, Readlink returns it, listings and walks show the link and
// Lstat describes it; only resolving through it is refused
// (path_outside_sandbox, [Resolve]), so no capfs code follows it out. A
// backend whose tree host processes read directly (physical) refuses to create
// one ([SymlinkTarget]); [LinkTarget] is the Dir's form of the rule.
func CheckSymlinkTarget(op string, p Path, target string) error {
	switch {
	case target == "":
		return NewError(CodeInvalidPath, op, p, "empty symlink target")
	case len(target) > MaxPathLen:
		return NewError(CodeInvalidPath, op, p, "symlink target too long")
	case strings.IndexByte(target, 0) >= 0:
		return NewError(CodeInvalidPath, op, p, "NUL byte in symlink target")
	}
	return nil
}

// CheckLinkSource returns the error of making newp another name of the entry
// at oldp, or nil. oldp is looked up without following a final symlink. The
// error is not_found if found is false, and a permission error for a
// directory. Its errors carry oldp as Path and newp as Dest. Backends check
// the source first, then resolve the destination for [CheckLinkDest].
func CheckLinkSource(oldp, newp Path, found, dir bool) error {
	switch {
	case !found:
		return PairError(CodeNotFound, "link", oldp, newp, "")
	case dir:
		return PairError(CodePermission, "link", oldp, newp, "cannot hard-link a directory")
	}
	return nil
}

// CheckLinkDest returns the error of creating the link newp, or nil. newp is
// resolved without its trailing slash and without following a final symlink.
// The error is already_exists if found (a dangling symlink included), and
// not_a_directory for a trailing slash. Otherwise it is as [CheckCreate] for
// name in its directory (gone if removed). Its errors carry oldp as Path and
// newp as Dest.
func CheckLinkDest(oldp, newp Path, found, gone bool, name string) error {
	switch {
	case found:
		return PairError(CodeExists, "link", oldp, newp, "")
	case newp.MustBeDir():
		return PairError(CodeNotDir, "link", oldp, newp, "")
	}
	if err := CheckCreate("link", newp, gone, name); err != nil {
		return Readdress(err, "link", oldp.String(), newp.String())
	}
	return nil
}
