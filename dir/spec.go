package dir

import (
	"os"

	"github.com/capfs/capfs/policy"
)

// spec is what one method asks of the enforcement path (scope.run): which op
// the policy decides, how its paths are read and resolved, what the resolution
// should bring back, and whether the call reaches the backend at all. Each
// method has one, a package-level value; a call carries a pointer to it and
// only what differs from call to call (the paths, a size).
type spec struct {
	op     policy.Op
	method string // the public method, used as the error's Op
	kind   destKind
	// fol says how the call treats its path's final component (and its
	// destination's, for destPath calls), for canonical resolution.
	fol follow

	// Parsing (step 2).
	emptyIsDot bool // "" means "." (List, ReadDir, Walk)
	single     bool // the path must be one name (OpenDir)
	fixed      bool // the paths are parsed by the caller (File, Backend view)

	// Deciding (step 4).
	alsoRead  bool // an open for reading and writing: decided as a read too
	checkOnly bool // stop after step 4 (Dir.Check): no hooks, no backend
	// inner says the call decides paths inside it from its request
	// (allowInner, allowEntry, allowLink, allowSize): a composite call.
	inner bool

	// Resolving and acting.
	// fused marks a read or a listing a backend may resolve, decide and act
	// on in one call (vfs.ResolveOpen, vfs.ResolveReadDir); see scope.fuses.
	fused bool
	// status asks the resolution for the status of what the path reaches
	// (call.got, call.info); kept says the answer is an fs.FileInfo, which a
	// keptStater's resolution can give (call.kept).
	status, kept bool

	// Derived from op by mk.
	cls        policy.OpClass // policy.ClassOf(op), for Engine.AllowsClass
	writes     bool           // op.Writes(): a read-only capability refuses it
	structural bool           // changes what names reach what (rename, copy, link, symlink): the tree lock is taken exclusively
}

// mk fills the fields of s derived from its op and returns it.
func mk(s spec) *spec {
	s.writes = s.op.Writes()
	s.cls = policy.ClassOf(s.op)
	switch s.op {
	case policy.OpRename, policy.OpCopy, policy.OpSymlink, policy.OpLink:
		s.structural = true
	}
	return &s
}

// The specs of Dir's methods (dir.go, tree.go, chown.go, control.go, file.go).
var (
	specList           = mk(spec{op: policy.OpList, method: "List", emptyIsDot: true})
	specReadDir        = mk(spec{op: policy.OpList, method: "ReadDir", emptyIsDot: true, fused: true})
	specStat           = mk(spec{op: policy.OpStat, method: "Stat", status: true, kept: true})
	specLstat          = mk(spec{op: policy.OpStat, method: "Lstat", fol: followNone, status: true, kept: true})
	specExists         = mk(spec{op: policy.OpStat, method: "Exists", fol: followNone})
	specOpenDir        = mk(spec{op: policy.OpSub, method: "OpenDir", single: true})
	specSub            = mk(spec{op: policy.OpSub, method: "Sub"})
	specChild          = mk(spec{op: policy.OpSub, method: "Child"})
	specCreateDir      = mk(spec{op: policy.OpMkdir, method: "CreateDir", fol: followEntry})
	specMkdirAll       = mk(spec{op: policy.OpMkdir, method: "MkdirAll"})
	specRemove         = mk(spec{op: policy.OpRemove, method: "Remove", fol: followEntry})
	specReadFile       = mk(spec{op: policy.OpRead, method: "ReadFile", fused: true})
	specWriteFile      = mk(spec{op: policy.OpWrite, method: "WriteFile"})
	specAppend         = mk(spec{op: policy.OpWrite, method: "Append", inner: true})
	specSymlink        = mk(spec{op: policy.OpSymlink, method: "Symlink", kind: destTarget, fol: followEntry})
	specReadlink       = mk(spec{op: policy.OpReadlink, method: "Readlink", fol: followNone})
	specLink           = mk(spec{op: policy.OpLink, method: "Link", kind: destPath, fol: followEntry})
	specChmod          = mk(spec{op: policy.OpChmod, method: "Chmod"})
	specChtimes        = mk(spec{op: policy.OpChtimes, method: "Chtimes"})
	specChown          = mk(spec{op: policy.OpChown, method: "Chown"})
	specLchown         = mk(spec{op: policy.OpChown, method: "Lchown", fol: followNone})
	specRemoveAll      = mk(spec{op: policy.OpRemove, method: "RemoveAll", fol: followEntry, inner: true})
	specMove           = mk(spec{op: policy.OpRename, method: "Move", kind: destPath, fol: followEntry, inner: true})
	specCopy           = mk(spec{op: policy.OpCopy, method: "Copy", kind: destPath, fol: followEntry, inner: true})
	specWalk           = mk(spec{op: policy.OpList, method: "Walk", emptyIsDot: true, inner: true})
	specReadDirVisible = mk(spec{op: policy.OpList, method: "ReadDirVisible", emptyIsDot: true, inner: true})
	specGlob           = mk(spec{op: policy.OpList, method: "Glob", inner: true})
	specOpenFile       = mk(spec{op: policy.OpSub, method: "OpenFile"})
	specCreateFile     = mk(spec{op: policy.OpCreate, method: "CreateFile", fol: followEntry})
)

// The specs of File's methods: the leaf is parsed already.
var (
	specFileReadBytes  = mk(spec{op: policy.OpRead, method: "ReadBytes", fixed: true})
	specFileReadText   = mk(spec{op: policy.OpRead, method: "ReadText", fixed: true})
	specFileWriteBytes = mk(spec{op: policy.OpWrite, method: "WriteBytes", fixed: true})
	specFileWriteText  = mk(spec{op: policy.OpWrite, method: "WriteText", fixed: true})
	specFileStat       = mk(spec{op: policy.OpStat, method: "Stat", fixed: true})
	specFileAppend     = mk(spec{op: policy.OpWrite, method: "Append", fixed: true, inner: true})
)

// The specs of the Backend view's methods (views.go, chown.go): paths parsed
// already, methods named as the SPI's operations.
var (
	specViewStat     = mk(spec{op: policy.OpStat, method: "stat", fixed: true, status: true})
	specViewLstat    = mk(spec{op: policy.OpStat, method: "lstat", fol: followNone, fixed: true, status: true})
	specViewResolve  = mk(spec{op: policy.OpStat, method: "resolve", fol: followNone, fixed: true})
	specViewReadDir  = mk(spec{op: policy.OpList, method: "readdir", fixed: true})
	specViewDirInfo  = mk(spec{op: policy.OpList, method: "readdir", fixed: true, inner: true})
	specViewMkdir    = mk(spec{op: policy.OpMkdir, method: "mkdir", fol: followEntry, fixed: true})
	specViewRemove   = mk(spec{op: policy.OpRemove, method: "remove", fol: followEntry, fixed: true})
	specViewRename   = mk(spec{op: policy.OpRename, method: "rename", kind: destPath, fol: followEntry, fixed: true, inner: true})
	specViewLink     = mk(spec{op: policy.OpLink, method: "link", kind: destPath, fol: followEntry, fixed: true})
	specViewSymlink  = mk(spec{op: policy.OpSymlink, method: "symlink", kind: destTarget, fol: followEntry, fixed: true})
	specViewReadlink = mk(spec{op: policy.OpReadlink, method: "readlink", fol: followNone, fixed: true})
	specViewChmod    = mk(spec{op: policy.OpChmod, method: "chmod", fixed: true})
	specViewChtimes  = mk(spec{op: policy.OpChtimes, method: "chtimes", fixed: true})
	specViewChown    = mk(spec{op: policy.OpChown, method: "chown", fixed: true})
	specViewLchown   = mk(spec{op: policy.OpChown, method: "lchown", fol: followNone, fixed: true})
	specViewSub      = mk(spec{op: policy.OpSub, method: "sub", fixed: true})
	// specViewSymlinkVerbatim is symlink storing its target as given (see
	// backendView.verbatimLinks): the target is not a path of the tree.
	specViewSymlinkVerbatim = mk(spec{op: policy.OpSymlink, method: "symlink", fol: followEntry, fixed: true})
)

// openSpecs are the specs of one open method, by what its flags make of it.
type openSpecs [3][2][2]*spec // op (read, write, create) × alsoRead × followEntry

// The open methods: Dir.Open, File.Open (its leaf parsed, a final symlink
// followed whatever the flags, never fused) and the Backend view's OpenFile.
var (
	specDirOpen  = makeOpenSpecs(spec{method: "Open"}, true)
	specFileOpen = makeOpenSpecs(spec{method: "Open", fixed: true}, false)
	specViewOpen = makeOpenSpecs(spec{method: "open", fixed: true}, true)
)

var openOps = [3]policy.Op{policy.OpRead, policy.OpWrite, policy.OpCreate}

// makeOpenSpecs makes the specs of an open method like base. With byFlags,
// the flags choose how a final symlink is treated (openFollow) and a read
// that only reads is fused.
func makeOpenSpecs(base spec, byFlags bool) *openSpecs {
	var t openSpecs
	for o, op := range openOps {
		for rw := range 2 {
			for entry := range 2 {
				s := base
				s.op, s.alsoRead = op, rw == 1
				if byFlags {
					s.fused = op == policy.OpRead
					if entry == 1 {
						s.fol = followEntry
					}
				}
				t[o][rw][entry] = mk(s)
			}
		}
	}
	return &t
}

// of returns the spec of an open with flag: its op (openFlagOp), whether it
// reads too (O_RDWR) and how it treats a final symlink (openFollow).
func (t *openSpecs) of(flag int) *spec {
	o := 0
	switch openFlagOp(flag) {
	case policy.OpWrite:
		o = 1
	case policy.OpCreate:
		o = 2
	}
	rw, entry := 0, 0
	if flag&os.O_RDWR != 0 {
		rw = 1
	}
	if openFollow(flag) == followEntry {
		entry = 1
	}
	return t[o][rw][entry]
}

// checkSpecs are Dir.Check's specs, one per op.
var checkSpecs = func() map[policy.Op]*spec {
	m := make(map[policy.Op]*spec)
	for _, op := range []policy.Op{policy.OpStat, policy.OpList, policy.OpRead, policy.OpWrite, policy.OpCreate,
		policy.OpMkdir, policy.OpRemove, policy.OpRename, policy.OpCopy, policy.OpSymlink, policy.OpReadlink,
		policy.OpLink, policy.OpChmod, policy.OpChtimes, policy.OpChown, policy.OpSub} {
		m[op] = checkSpec(op)
	}
	return m
}()

// checkSpec makes the spec of a Dir.Check of op: resolved as the call behind
// op would be (opFollow), with the second argument the call takes.
func checkSpec(op policy.Op) *spec {
	s := spec{op: op, method: "Check", checkOnly: true, fol: opFollow(op)}
	switch op {
	case policy.OpRename, policy.OpCopy, policy.OpLink:
		s.kind = destPath
	case policy.OpSymlink:
		s.kind = destTarget
	}
	return mk(s)
}
