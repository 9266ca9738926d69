package vfs

// PairError returns the [*Error] of a two-path operation (rename, link).
// from is its Path, to its Dest.
func PairError(code Code, op string, from, to Path, msg string) *Error {
	return &Error{Code: code, Op: op, Path: from.String(), Dest: to.String(), msg: msg}
}

// CheckRenameFlags returns invalid_path if flags hold an unknown bit, or both
// [RenameNoReplace] and [RenameExchange].
func CheckRenameFlags(from, to Path, flags RenameFlags) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return PairError(CodeInvalidPath, "rename", from, to, "invalid rename flags")
	}
	return nil
}

// RenameAction is what a rename does once [CheckRename] finds its
// preconditions hold.
type RenameAction int

// The rename actions.
const (
	// RenameNone means the ends are one entry or one file, so nothing changes.
	RenameNone RenameAction = iota
	// RenameMove means the destination is free. The backend still checks it
	// may create an entry there.
	RenameMove
	// RenameReplace means the source replaces the existing destination.
	RenameReplace
	// RenameSwap means [RenameExchange] swaps the two entries.
	RenameSwap
)

// RenameEnds describes a rename's two ends, looked up without following a
// final symlink, for [CheckRename]. The funcs are called only when needed.
type RenameEnds struct {
	From, To           Path
	Flags              RenameFlags
	SrcFound, DstFound bool
	SrcRoot, DstRoot   bool // the end is the backend's root
	SrcDir, DstDir     bool // the end is a directory
	SameEntry          bool // both ends name one entry: same parent, same name

	// SameFile, if set, reports whether the destination is another hard
	// link to the source's file.
	SameFile func() bool
	// SrcAbove reports whether the source directory is the destination's
	// parent or one of its ancestors.
	SrcAbove func() bool
	// DstAbove reports whether the destination directory is the source's
	// parent or one of its ancestors.
	DstAbove func() bool
	// DstEmpty reports whether the destination directory is empty. Its error
	// is returned as it is.
	DstEmpty func() (bool, error)
	// Ready, if set, runs once both ends are known valid, before the checks
	// that depend on the flags. Its error is returned as it is.
	Ready func() error
}

// CheckRename applies the preconditions every virtual backend shares to a
// rename (flags already checked by [CheckRenameFlags]) and says what to do.
// Its errors carry From as Path and To as Dest.
func CheckRename(e *RenameEnds) (RenameAction, error) {
	switch {
	case !e.SrcFound:
		return 0, e.fail(CodeNotFound, "")
	case e.SrcRoot || (e.DstFound && e.DstRoot):
		return 0, e.fail(CodeInvalidPath, "cannot rename the root")
	case e.To.MustBeDir() && !e.SrcDir:
		return 0, e.fail(CodeNotDir, "")
	}
	if e.Ready != nil {
		if err := e.Ready(); err != nil {
			return 0, err
		}
	}
	switch {
	case e.Flags&RenameExchange != 0:
		return e.exchange()
	case e.DstFound:
		return e.replace()
	case e.SrcDir && e.SrcAbove():
		return 0, e.fail(CodeInvalidPath, "cannot move a directory into its own subtree")
	}
	return RenameMove, nil
}

// exchange checks a [RenameExchange].
func (e *RenameEnds) exchange() (RenameAction, error) {
	switch {
	case !e.DstFound:
		return 0, e.fail(CodeNotFound, "exchange destination does not exist")
	case e.SameEntry:
		return RenameNone, nil
	case (e.SrcDir && e.SrcAbove()) || (e.DstDir && e.DstAbove()):
		return 0, e.fail(CodeInvalidPath, "cannot move a directory into its own subtree")
	}
	return RenameSwap, nil
}

// replace checks a rename over an existing destination.
func (e *RenameEnds) replace() (RenameAction, error) {
	switch {
	case e.Flags&RenameNoReplace != 0:
		return 0, e.fail(CodeExists, "")
	case e.SameEntry || (e.SameFile != nil && e.SameFile()):
		// The same entry, or two hard links to one file: nothing to do, as
		// POSIX says.
		return RenameNone, nil
	case e.SrcDir && !e.DstDir:
		return 0, e.fail(CodeNotDir, "cannot replace a non-directory with a directory")
	case !e.SrcDir && e.DstDir:
		return 0, e.fail(CodeIsDir, "cannot replace a directory with a non-directory")
	case e.SrcDir && e.SrcAbove():
		return 0, e.fail(CodeInvalidPath, "cannot move a directory into its own subtree")
	}
	if e.DstDir {
		empty, err := e.DstEmpty()
		if err != nil {
			return 0, err
		}
		if !empty {
			return 0, e.fail(CodeNotEmpty, "")
		}
	}
	return RenameReplace, nil
}

// NodeOps is what the shared rename check asks of a virtual backend's nodes.
type NodeOps[N comparable] struct {
	// IsDir reports whether n is a directory.
	IsDir func(n N) bool
	// Above reports whether directory a is d or one of d's ancestors.
	Above func(a, d N) bool
	// Full reports whether n is a directory that holds entries.
	Full func(n N) (bool, error)
}

// RenameEnds describes the looked-up ends of a rename for [CheckRename].
// Two ends with one node are one file. A Full error is addressed to the rename.
func (o NodeOps[N]) RenameEnds(from, to Path, flags RenameFlags, src, dst Resolution[N]) *RenameEnds {
	sn, dn := src.Node, dst.Node
	return &RenameEnds{
		From: from, To: to, Flags: flags,
		SrcFound: src.Found, DstFound: dst.Found,
		SrcRoot: src.Name == "", DstRoot: dst.Name == "",
		SrcDir:    src.Found && o.IsDir(sn),
		DstDir:    dst.Found && o.IsDir(dn),
		SameEntry: src.Parent == dst.Parent && src.Name == dst.Name,
		SameFile:  func() bool { return dn == sn },
		SrcAbove:  func() bool { return o.Above(sn, dst.Parent) },
		DstAbove:  func() bool { return o.Above(dn, src.Parent) },
		DstEmpty: func() (bool, error) {
			full, err := o.Full(dn)
			return !full, Readdress(err, "rename", from.String(), to.String())
		},
	}
}

func (e *RenameEnds) fail(code Code, msg string) error {
	return PairError(code, "rename", e.From, e.To, msg)
}
