package treediff

import (
	"io/fs"
	"sort"
)

// Kind says how one path differs between two trees.
type Kind string

// The kinds of [Change]. A path that is a directory on one side and not on
// the other is reported as its files deleted (or added) plus the
// non-directory added (or deleted), as git does. TypeChanged is for a
// non-directory whose type changes (file, symlink, submodule) at one path.
const (
	Added       Kind = "added"        // only in b
	Modified    Kind = "modified"     // content (or symlink target) differs; modes may differ too
	Deleted     Kind = "deleted"      // only in a
	TypeChanged Kind = "type_changed" // e.g. a regular file in a, a symlink in b
	ModeChanged Kind = "mode_changed" // same content, different permission bits
	Renamed     Kind = "renamed"      // a deletion and an addition paired by [Renames]
)

// Change is one difference between two trees. Only leaves are reported —
// files, symlinks and submodules — never directories themselves.
type Change struct {
	Kind Kind
	// Path is slash-separated and relative to the compared roots. For a
	// rename it is the new path.
	Path string
	// OldPath is the path in a of a rename; "" for other kinds.
	OldPath string
	// Score is a rename's similarity in percent (100: the same content).
	Score int
	// OldMode and NewMode are the modes in a and b (0 where absent): 0644 or
	// 0755 for files, fs.ModeSymlink|0777 for symlinks, fs.ModeDir|0755 for a
	// submodule. [Backend] reports other permission bits as Lstat gives them.
	OldMode, NewMode fs.FileMode
	// OldID and NewID are git object ids in hex ("" where absent): the blob
	// id of a file or symlink, the pinned commit of a submodule.
	OldID, NewID string
}

// From is the change's path in a: OldPath for a rename, else Path.
func (c Change) From() string {
	if c.OldPath != "" {
		return c.OldPath
	}
	return c.Path
}

// sortChanges sorts cs by Path, keeping the order of equal paths.
func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
