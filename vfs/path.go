package vfs

import (
	"strings"
)

// Limits on guest paths. They bound the work any single call can cause.
const (
	// MaxNameLen is the longest single path component, in bytes (NAME_MAX on Linux).
	MaxNameLen = 255
	// MaxPathLen is the longest guest path accepted, in bytes, before cleaning (PATH_MAX).
	MaxPathLen = 4096
)

// Path is a validated, cleaned path relative to the root of whatever it is handed
// to (a [Backend], a [Namespace], a Dir). It never contains "..", ".", empty
// segments, NUL bytes or backslashes, and never begins with "/". The zero Path is
// the root.
//
// Path is the only path type the layers below dir/ accept: no backend ever parses
// a raw guest string. A Path may carry a "must be a directory" mark, set when the
// guest wrote a trailing slash ("a/b/"). Backends then require the final object,
// after following a final symlink, to be a directory (not_a_directory otherwise).
//
// A Path may also be marked Resolved (see [Path.Resolved]). It then names a
// location that [Backend.Resolve] already reached, and the backend acting on it
// follows no symlink at all.
type Path struct {
	p        string // "" for the root, else "a/b/c"
	mustDir  bool
	resolved bool // follow nothing: see Resolved
}

// Root is the Path of the root directory.
var Root = Path{}

// ParseGuest turns a guest-supplied path into a [Path], relative to the receiving
// directory. A leading "/" means that directory's own root (a chroot view), never
// the host's. The path is cleaned lexically: "." and empty segments vanish, and
// ".." removes the previous segment, without consulting the filesystem. So
// "a/../b" is always "b", even when "a" is a symlink. The errors, all [*Error]
// with Op "parse":
//
//   - invalid_path: empty string, NUL byte, backslash, a component longer than
//     [MaxNameLen], or a path longer than [MaxPathLen];
//   - path_outside_sandbox: a ".." that would climb above the root.
func ParseGuest(s string) (Path, error) {
	if s == "" {
		return Path{}, &Error{Code: CodeInvalidPath, Op: "parse", Path: s, msg: "empty path"}
	}
	if len(s) > MaxPathLen {
		return Path{}, &Error{Code: CodeInvalidPath, Op: "parse", Path: truncate(s), msg: "path too long"}
	}
	// The common case, an already clean relative path, is recognized eight bytes
	// at a time; one pass over the bytes decides the rest.
	if cleanWords(s) {
		return Path{p: s}, nil
	}
	switch scanBytes(s) {
	case scanClean:
		return Path{p: s}, nil
	case scanBadByte:
		msg := "NUL byte in path"
		if strings.IndexByte(s, 0) < 0 {
			msg = "backslash in path"
		}
		return Path{}, &Error{Code: CodeInvalidPath, Op: "parse", Path: printable(s), msg: msg}
	}
	mustDir := strings.HasSuffix(s, "/") || strings.HasSuffix(s, "/.") || s == "." || strings.HasSuffix(s, "/..")
	var b strings.Builder
	b.Grow(len(s))
	// segs holds the start offsets of segments in b, to pop on "..".
	var stack [32]int
	segs := stack[:0]
	rest := s
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, "/")
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(segs) == 0 {
				return Path{}, &Error{Code: CodeOutside, Op: "parse", Path: s, msg: "path climbs above the root"}
			}
			start := segs[len(segs)-1]
			segs = segs[:len(segs)-1]
			if start > 0 {
				start-- // drop the separator too
			}
			str := b.String()[:start]
			b.Reset()
			b.WriteString(str)
			continue
		}
		if len(seg) > MaxNameLen {
			return Path{}, &Error{Code: CodeInvalidPath, Op: "parse", Path: truncate(s), msg: "path component too long"}
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		segs = append(segs, b.Len())
		b.WriteString(seg)
	}
	p := Path{p: b.String(), mustDir: mustDir}
	if p.p == "" {
		p.mustDir = false // the root is always a directory
	}
	return p, nil
}

const (
	scanClean   = iota // clean relative path: use as is
	scanDirty          // valid bytes, but needs cleaning (or has an over-long component)
	scanBadByte        // contains NUL or backslash
)

// SWAR constants: every byte's low bit, and every byte's high bit.
const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// bytesAt returns the high bit of every byte of x that equals c, and possibly
// of bytes just above one that does (a borrow runs on through bytes equal to
// c^1): never of a byte below the first that equals c.
func bytesAt(x uint64, c byte) uint64 {
	t := x ^ (swarLo * uint64(c))
	return (t - swarLo) &^ t & swarHi
}

// maxCleanRun is the most words in a row with no '/' that cleanWords accepts:
// a segment of 248 or more bytes holds 31 (see cleanWords).
const maxCleanRun = (MaxNameLen - 7) / 8

// cleanWords reports whether s (non-empty) is certainly a clean relative path
// (scanBytes would say scanClean), eight bytes at a time. It says false for
// anything else, and also, conservatively, for some clean paths: a segment
// starting with "." (".git", "a/.b") or longer than 247 bytes; scanBytes then
// decides.
//
// bytesAt may mark a byte just above a real match: a '.' right after a '/' is
// marked as a '/'. It sits where a segment starts, which already makes the
// answer false, so the marks are as good as exact here. A segment longer than MaxNameLen holds at least
// maxCleanRun whole words with no '/' (its last, padded word not counted); one
// of 247 bytes or fewer holds at most maxCleanRun-1.
func cleanWords(s string) bool {
	n := len(s)
	if s[n-1] == '/' {
		return false // a trailing slash (an empty last segment)
	}
	// starts carries the mark of a segment starting at the next word's first
	// byte: the string's start begins one.
	starts := uint64(0x80)
	run := 0 // whole words in a row with no '/'
	i := 0
	for ; i+8 <= n; i += 8 {
		x := load64(s[i:])
		slash := bytesAt(x, '/')
		bad := bytesAt(x, 0) | bytesAt(x, '\\')
		// An empty segment ("//", a leading "/") or one starting with '.'.
		if bad|(starts|slash<<8)&dotOrSlash(x) != 0 {
			return false
		}
		starts = slash >> 56
		if slash != 0 {
			run = 0
		} else if run++; run >= maxCleanRun {
			return false
		}
	}
	if i == n {
		return true
	}
	// The tail, as the end of the last eight bytes (or the bytes of a string
	// shorter than eight), padded above with 'a', which is none of the bytes
	// looked for.
	rem := n - i
	var x uint64
	if n >= 8 {
		x = load64(s[n-8:])>>(8*uint(8-rem)) | 0x6161616161616161<<(8*uint(rem))
	} else {
		x = 0x6161616161616161
		for k, c := range []byte(s) {
			x = x&^(0xff<<(8*uint(k))) | uint64(c)<<(8*uint(k))
		}
	}
	slash := bytesAt(x, '/')
	return (bytesAt(x, 0)|bytesAt(x, '\\'))|(starts|slash<<8)&dotOrSlash(x) == 0
}

// dotOrSlash returns the high bit of every byte of x that is '.' or '/', and
// of no other: with the low bit set, both read '/', and no byte then reads
// '/'^1, so no borrow runs past a match.
func dotOrSlash(x uint64) uint64 {
	return bytesAt(x|swarLo, '/')
}

// load64 returns the first eight bytes of w, little-endian, in one load.
func load64(w string) uint64 {
	w = w[:8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// scanBytes classifies s (non-empty) in one pass, a byte at a time: scanBadByte
// if it holds a NUL or backslash, scanClean if it is already a clean relative
// path with no trailing slash and no over-long component, scanDirty otherwise.
func scanBytes(s string) int {
	result := scanClean
	if s[0] == '/' || s[len(s)-1] == '/' {
		result = scanDirty
	}
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 0, '\\':
			return scanBadByte
		case '/':
			if n := i - start; n == 0 || n > MaxNameLen || (s[start] == '.' && (n == 1 || (n == 2 && s[start+1] == '.'))) {
				result = scanDirty
			}
			start = i + 1
		}
	}
	if n := len(s) - start; n > MaxNameLen || (n > 0 && s[start] == '.' && (n == 1 || (n == 2 && s[start+1] == '.'))) {
		result = scanDirty
	}
	return result
}

// ValidName reports whether name is usable as a single path component.
// It must be non-empty, not "." or "..", hold no "/", NUL or backslash, and be at
// most [MaxNameLen] bytes.
func ValidName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > MaxNameLen {
		return false
	}
	return !strings.ContainsAny(name, "/\\\x00")
}

// MustParse is [ParseGuest] for paths known to be valid, such as constants in
// tests. It panics on error.
func MustParse(s string) Path {
	p, err := ParseGuest(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the path in slash form: "." for the root, else "a/b/c" (never a
// trailing slash).
func (p Path) String() string {
	if p.p == "" {
		return "."
	}
	return p.p
}

// Raw returns the path without the root's "." spelling: "" for the root.
func (p Path) Raw() string { return p.p }

// IsRoot reports whether p is the root.
func (p Path) IsRoot() bool { return p.p == "" }

// MustBeDir reports whether the guest required a directory (wrote a trailing slash).
func (p Path) MustBeDir() bool { return p.mustDir }

// WithoutDirMark returns p without the trailing-slash mark (keeping the Resolved
// mark).
func (p Path) WithoutDirMark() Path { return Path{p: p.p, resolved: p.resolved} }

// WithDirMark returns p with the trailing-slash mark set as must says (the root
// never carries it).
func (p Path) WithDirMark(must bool) Path {
	p.mustDir = must && p.p != ""
	return p
}

// Resolved returns p marked as already resolved.
// Such a path is a location that [Backend.Resolve] returned. Every component but
// the last is a real directory (no symlink). The last component is whatever the
// resolution stopped at. A backend given a Resolved path follows no symlink at
// all, intermediate or final. It may meet one: a symlink swapped in after the
// resolution, or a final link under an operation that follows it. Then the call
// fails with conflict and reaches nothing. This is how a Dir acts on exactly
// the location its policy decided on.
func (p Path) Resolved() Path { p.resolved = true; return p }

// IsResolved reports whether p carries the Resolved mark.
func (p Path) IsResolved() bool { return p.resolved }

// Unresolved returns p without the Resolved mark.
func (p Path) Unresolved() Path { p.resolved = false; return p }

// Base returns the last component, or "" for the root.
func (p Path) Base() string {
	if i := strings.LastIndexByte(p.p, '/'); i >= 0 {
		return p.p[i+1:]
	}
	return p.p
}

// Dir returns the parent path; the parent of the root is the root. The parent of a
// Resolved path is Resolved.
func (p Path) Dir() Path {
	if i := strings.LastIndexByte(p.p, '/'); i >= 0 {
		return Path{p: p.p[:i], resolved: p.resolved}
	}
	return Path{resolved: p.resolved}
}

// Join appends a relative Path. The result is Resolved if q is and p is either
// Resolved or the root.
func (p Path) Join(q Path) Path {
	res := q.resolved && (p.resolved || p.p == "")
	switch {
	case q.p == "":
		return Path{p: p.p, mustDir: p.mustDir, resolved: res}
	case p.p == "":
		return Path{p: q.p, mustDir: q.mustDir, resolved: res}
	}
	return Path{p: p.p + "/" + q.p, mustDir: q.mustDir, resolved: res}
}

// Child appends a single validated component. It returns invalid_path if name is not
// a ValidName. The child of a Resolved path is Resolved (an entry listed in a real
// directory, to be acted on without following it).
func (p Path) Child(name string) (Path, error) {
	if !ValidName(name) {
		return Path{}, &Error{Code: CodeInvalidPath, Op: "join", Path: printable(name), msg: "invalid name"}
	}
	if p.p == "" {
		return Path{p: name, resolved: p.resolved}, nil
	}
	return Path{p: p.p + "/" + name, resolved: p.resolved}, nil
}

// Elems returns the components of p; nil for the root.
func (p Path) Elems() []string {
	if p.p == "" {
		return nil
	}
	return strings.Split(p.p, "/")
}

// Depth returns the number of components.
func (p Path) Depth() int {
	if p.p == "" {
		return 0
	}
	return strings.Count(p.p, "/") + 1
}

// HasPrefix reports whether q is p or an ancestor of p (component-wise, so "ab" is not
// a prefix of "abc").
func (p Path) HasPrefix(q Path) bool {
	if q.p == "" {
		return true
	}
	return p.p == q.p || (strings.HasPrefix(p.p, q.p) && p.p[len(q.p)] == '/')
}

// TrimPrefix returns p relative to its ancestor q, and whether q was an ancestor.
func (p Path) TrimPrefix(q Path) (Path, bool) {
	if !p.HasPrefix(q) {
		return p, false
	}
	if q.p == "" {
		return p, true
	}
	if p.p == q.p {
		return Path{mustDir: p.mustDir, resolved: p.resolved}, true
	}
	return Path{p: p.p[len(q.p)+1:], mustDir: p.mustDir, resolved: p.resolved}, true
}

// Equal reports whether p and q name the same path (ignoring the directory and
// Resolved marks).
func (p Path) Equal(q Path) bool { return p.p == q.p }

// truncate shortens over-long paths for error messages.
func truncate(s string) string {
	if len(s) > 128 {
		return printable(s[:128]) + "…"
	}
	return printable(s)
}

// printable replaces NUL bytes so error text stays readable and never truncates early.
func printable(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", `\x00`)
}

// SymlinkTarget validates the target text of a symlink to be created at link.
// It returns the path the target names, relative to the same root as link.
// Absolute targets, and targets that climb above the root from the link's
// directory, are path_outside_sandbox. A resolver here would refuse to follow
// them anyway, but host tools reading a host directory would follow them out:
// the physical backend refuses to create them, and sync-back to bring new ones
// back. An empty target, NUL or backslash is invalid_path. The check is
// lexical. [LinkTarget] is the form that takes a leaving target as data.
func SymlinkTarget(link Path, target string) (Path, error) {
	switch {
	case target == "":
		return Path{}, NewError(CodeInvalidPath, "symlink", link, "empty symlink target")
	case target[0] == '/':
		return Path{}, NewError(CodeOutside, "symlink", link, "absolute symlink targets are not allowed")
	case strings.ContainsAny(target, "\x00\\"):
		return Path{}, NewError(CodeInvalidPath, "symlink", link, "NUL or backslash in symlink target")
	case len(target) > MaxPathLen:
		return Path{}, NewError(CodeInvalidPath, "symlink", link, "symlink target too long")
	}
	q, err := ParseGuest(link.Dir().Raw() + "/" + target)
	if err != nil {
		if CodeOf(err) == CodeOutside {
			return Path{}, NewError(CodeOutside, "symlink", link, "symlink target climbs above the root")
		}
		return Path{}, NewError(CodeInvalidPath, "symlink", link, "invalid symlink target")
	}
	return q, nil
}

// LinkTarget reads the target text of a symlink at link as [SymlinkTarget]
// does, but takes a target that leaves the tree (absolute, or climbing above
// the root) as data: leaves is set, q is the zero Path and err is nil. Such a
// link is stored, listed and read back; no resolver of capfs follows it (see
// [CheckSymlinkTarget]). Text no link may hold is invalid_path, as
// for SymlinkTarget.
func LinkTarget(link Path, target string) (q Path, leaves bool, err error) {
	q, err = SymlinkTarget(link, target)
	if CodeOf(err) != CodeOutside {
		return q, false, err
	}
	switch {
	case strings.ContainsAny(target, "\x00\\"):
		return Path{}, false, NewError(CodeInvalidPath, "symlink", link, "NUL or backslash in symlink target")
	case len(target) > MaxPathLen:
		return Path{}, false, NewError(CodeInvalidPath, "symlink", link, "symlink target too long")
	}
	return Path{}, true, nil
}
