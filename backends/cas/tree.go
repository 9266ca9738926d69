package cas

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/capfs/capfs/vfs"
)

// Directory is one REAPI build.bazel.remote.execution.v2.Directory message: the
// files, subdirectories and symlinks of one directory, each list sorted by name.
// Node properties are never written (and ignored when read), so a tree's digest
// depends only on names, contents, the executable bit and link targets.
type Directory struct {
	Files    []FileNode
	Dirs     []DirNode
	Symlinks []SymlinkNode
}

// FileNode is a regular file: its name, content digest and whether the owner may
// execute it.
type FileNode struct {
	Name       string
	Digest     Digest
	Executable bool
}

// DirNode is a subdirectory: its name and the digest of its Directory message.
type DirNode struct {
	Name   string
	Digest Digest
}

// SymlinkNode is a symbolic link: its name and its target text, stored verbatim.
type SymlinkNode struct {
	Name   string
	Target string
}

// ErrBadTree is wrapped by the errors of Encode and DecodeDirectory for a message
// that is not a canonical Directory.
var ErrBadTree = errors.New("cas: malformed directory")

// Field numbers of the REAPI messages (remote_execution.proto).
const (
	fDirFiles    = 1
	fDirDirs     = 2
	fDirSymlinks = 3
	fDirProps    = 5

	fNodeName   = 1
	fNodeDigest = 2 // FileNode, DirectoryNode
	fNodeTarget = 2 // SymlinkNode
	fFileExec   = 4
	fFileProps  = 6
	fLinkProps  = 4

	fDigestHash = 1
	fDigestSize = 2
)

const (
	wireVarint = 0
	wireBytes  = 2
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendBytesField(b []byte, field int, s string) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// digestLen is the encoded length of a Digest message.
func digestLen(d Digest) int {
	n := 1 + 1 + 64 // tag, length, 64 hex digits
	if d.Size != 0 {
		n += 1 + uvarintLen(uint64(d.Size))
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendDigestMsg(b []byte, d Digest) []byte {
	b = appendTag(b, fDigestHash, wireBytes)
	b = append(b, 64)
	b = hex.AppendEncode(b, d.Hash[:])
	if d.Size != 0 {
		b = appendTag(b, fDigestSize, wireVarint)
		b = binary.AppendUvarint(b, uint64(d.Size))
	}
	return b
}

func appendNode(b []byte, field int, name string, d Digest, exec bool) []byte {
	n := 1 + uvarintLen(uint64(len(name))) + len(name)
	dl := digestLen(d)
	n += 1 + uvarintLen(uint64(dl)) + dl
	if exec {
		n += 2
	}
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(n))
	b = appendBytesField(b, fNodeName, name)
	b = appendTag(b, fNodeDigest, wireBytes)
	b = binary.AppendUvarint(b, uint64(dl))
	b = appendDigestMsg(b, d)
	if exec {
		b = appendTag(b, fFileExec, wireVarint)
		b = append(b, 1)
	}
	return b
}

// Encode returns the canonical encoding of d: the bytes proto.Marshal of the REAPI
// Directory message gives (fields in number order, default values omitted, no
// unknown fields), built without reflection so that it cannot depend on a protobuf
// library's choices. Its SHA-256 is the directory's digest. Encode fails, wrapping
// ErrBadTree, when a name is not a valid single path element, a list is not
// strictly sorted by name (Go string order), a name appears twice across the three
// lists, or a size is negative.
func (d *Directory) Encode() ([]byte, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	return d.appendEncoded(nil), nil
}

func (d *Directory) appendEncoded(b []byte) []byte {
	for _, f := range d.Files {
		b = appendNode(b, fDirFiles, f.Name, f.Digest, f.Executable)
	}
	for _, s := range d.Dirs {
		b = appendNode(b, fDirDirs, s.Name, s.Digest, false)
	}
	for _, l := range d.Symlinks {
		n := 1 + uvarintLen(uint64(len(l.Name))) + len(l.Name)
		if l.Target != "" {
			n += 1 + uvarintLen(uint64(len(l.Target))) + len(l.Target)
		}
		b = appendTag(b, fDirSymlinks, wireBytes)
		b = binary.AppendUvarint(b, uint64(n))
		b = appendBytesField(b, fNodeName, l.Name)
		if l.Target != "" {
			b = appendBytesField(b, fNodeTarget, l.Target)
		}
	}
	return b
}

// Digest returns the digest of d's canonical encoding.
func (d *Directory) Digest() (Digest, error) {
	b, err := d.Encode()
	if err != nil {
		return Digest{}, err
	}
	return DigestOf(b), nil
}

func (d *Directory) validate() error {
	for i, f := range d.Files {
		if f.Digest.Size < 0 {
			return fmt.Errorf("%w: file %q has a negative size", ErrBadTree, trunc(f.Name))
		}
		if err := checkNodeName("file", i, f.Name, nameAt(d.Files, i-1, func(f FileNode) string { return f.Name })); err != nil {
			return err
		}
	}
	for i, s := range d.Dirs {
		if s.Digest.Size < 0 {
			return fmt.Errorf("%w: directory %q has a negative size", ErrBadTree, trunc(s.Name))
		}
		if err := checkNodeName("directory", i, s.Name, nameAt(d.Dirs, i-1, func(s DirNode) string { return s.Name })); err != nil {
			return err
		}
	}
	for i, l := range d.Symlinks {
		if !utf8.ValidString(l.Target) {
			return fmt.Errorf("%w: symlink %q has a target that is not UTF-8", ErrBadTree, trunc(l.Name))
		}
		if err := checkNodeName("symlink", i, l.Name, nameAt(d.Symlinks, i-1, func(l SymlinkNode) string { return l.Name })); err != nil {
			return err
		}
	}
	return d.checkUnique()
}

// checkNodeName checks the name of node i of a list of kind: a valid path
// element, sorted after the one before it (prev).
func checkNodeName(kind string, i int, name, prev string) error {
	if !vfs.ValidName(name) || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %s name %q is not a valid path element (UTF-8, no / \\ or NUL, not . or ..)", ErrBadTree, kind, trunc(name))
	}
	if i > 0 && name <= prev {
		return fmt.Errorf("%w: %s %q is not sorted after %q or repeats it", ErrBadTree, kind, trunc(name), trunc(prev))
	}
	return nil
}

// checkUnique refuses a name that appears in two of d's lists: it
// merge-walks the three sorted lists.
func (d *Directory) checkUnique() error {
	if len(d.Files)+len(d.Dirs)+len(d.Symlinks) <= 1 {
		return nil
	}
	var at [3]int
	prev, first := "", true
	for {
		best, which := d.smallest(at)
		if which < 0 {
			return nil
		}
		if !first && best == prev {
			return fmt.Errorf("%w: name %q appears twice", ErrBadTree, trunc(best))
		}
		prev, first = best, false
		at[which]++
	}
}

// smallest is the smallest of the names at positions at of d's files,
// directories and symlinks, and which list holds it (the first on a tie; -1
// when every list is done).
func (d *Directory) smallest(at [3]int) (string, int) {
	best, which := "", -1
	if at[0] < len(d.Files) {
		best, which = d.Files[at[0]].Name, 0
	}
	if at[1] < len(d.Dirs) && (which < 0 || d.Dirs[at[1]].Name < best) {
		best, which = d.Dirs[at[1]].Name, 1
	}
	if at[2] < len(d.Symlinks) && (which < 0 || d.Symlinks[at[2]].Name < best) {
		best, which = d.Symlinks[at[2]].Name, 2
	}
	return best, which
}

func nameAt[T any](s []T, i int, name func(T) string) string {
	if i < 0 {
		return ""
	}
	return name(s[i])
}

// DecodeDirectory parses a Directory message. Node properties (fields the REAPI
// lets a client attach: mtime, unix mode) are skipped; any other unknown field, a
// wire-format error, an invalid or repeated name, an unsorted list, or a digest
// whose hash is not 64 hex digits is an error wrapping ErrBadTree. The result is
// what Encode would accept.
func DecodeDirectory(b []byte) (*Directory, error) {
	d := &Directory{}
	err := walkFields(b, func(field, wire int, v []byte, _ uint64) error {
		switch {
		case field == fDirFiles && wire == wireBytes:
			f, err := decodeFileNode(v)
			if err != nil {
				return err
			}
			d.Files = append(d.Files, f)
		case field == fDirDirs && wire == wireBytes:
			s, err := decodeDirNode(v)
			if err != nil {
				return err
			}
			d.Dirs = append(d.Dirs, s)
		case field == fDirSymlinks && wire == wireBytes:
			l, err := decodeSymlinkNode(v)
			if err != nil {
				return err
			}
			d.Symlinks = append(d.Symlinks, l)
		case field == fDirProps && wire == wireBytes:
		default:
			return fmt.Errorf("%w: unknown Directory field %d", ErrBadTree, field)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// decodeFileNode parses a FileNode message, which must have a digest.
func decodeFileNode(b []byte) (FileNode, error) {
	var f FileNode
	err := walkFields(b, func(field, wire int, v []byte, n uint64) error {
		var err error
		switch {
		case field == fNodeName && wire == wireBytes:
			f.Name = string(v)
		case field == fNodeDigest && wire == wireBytes:
			f.Digest, err = decodeDigest(v)
		case field == fFileExec && wire == wireVarint:
			f.Executable = n != 0
		case field == fFileProps && wire == wireBytes:
		default:
			return fmt.Errorf("%w: unknown FileNode field %d", ErrBadTree, field)
		}
		return err
	})
	if err != nil {
		return f, err
	}
	if f.Digest.IsZero() {
		return f, fmt.Errorf("%w: file %q has no digest", ErrBadTree, trunc(f.Name))
	}
	return f, nil
}

// decodeDirNode parses a DirectoryNode message, which must have a digest.
func decodeDirNode(b []byte) (DirNode, error) {
	var s DirNode
	err := walkFields(b, func(field, wire int, v []byte, _ uint64) error {
		var err error
		switch {
		case field == fNodeName && wire == wireBytes:
			s.Name = string(v)
		case field == fNodeDigest && wire == wireBytes:
			s.Digest, err = decodeDigest(v)
		default:
			return fmt.Errorf("%w: unknown DirectoryNode field %d", ErrBadTree, field)
		}
		return err
	})
	if err != nil {
		return s, err
	}
	if s.Digest.IsZero() {
		return s, fmt.Errorf("%w: directory %q has no digest", ErrBadTree, trunc(s.Name))
	}
	return s, nil
}

// decodeSymlinkNode parses a SymlinkNode message.
func decodeSymlinkNode(b []byte) (SymlinkNode, error) {
	var l SymlinkNode
	err := walkFields(b, func(field, wire int, v []byte, _ uint64) error {
		switch {
		case field == fNodeName && wire == wireBytes:
			l.Name = string(v)
		case field == fNodeTarget && wire == wireBytes:
			l.Target = string(v)
		case field == fLinkProps && wire == wireBytes:
		default:
			return fmt.Errorf("%w: unknown SymlinkNode field %d", ErrBadTree, field)
		}
		return nil
	})
	return l, err
}

func decodeDigest(b []byte) (Digest, error) {
	var d Digest
	seenHash := false
	err := walkFields(b, func(field, wire int, v []byte, n uint64) error {
		switch {
		case field == fDigestHash && wire == wireBytes:
			h, err := parseHash(string(v))
			if err != nil {
				return fmt.Errorf("%w: %v", ErrBadTree, err)
			}
			d.Hash, seenHash = h.Hash, true
		case field == fDigestSize && wire == wireVarint:
			if int64(n) < 0 {
				return fmt.Errorf("%w: negative size", ErrBadTree)
			}
			d.Size = int64(n)
		default:
			return fmt.Errorf("%w: unknown Digest field %d", ErrBadTree, field)
		}
		return nil
	})
	if err == nil && !seenHash {
		err = fmt.Errorf("%w: digest without a hash", ErrBadTree)
	}
	return d, err
}

// walkFields calls fn for every field of a protobuf message: for length-delimited
// fields v is the payload, for varints n is the value. Other wire types fail.
func walkFields(b []byte, fn func(field, wire int, v []byte, n uint64) error) error {
	for len(b) > 0 {
		tag, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: bad tag", ErrBadTree)
		}
		b = b[k:]
		field, wire := tag>>3, int(tag&7)
		if field == 0 || field > 1<<29-1 {
			return fmt.Errorf("%w: bad field number", ErrBadTree)
		}
		switch wire {
		case wireVarint:
			n, k := binary.Uvarint(b)
			if k <= 0 {
				return fmt.Errorf("%w: bad varint", ErrBadTree)
			}
			b = b[k:]
			if err := fn(int(field), wire, nil, n); err != nil {
				return err
			}
		case wireBytes:
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return fmt.Errorf("%w: bad length", ErrBadTree)
			}
			v := b[k : k+int(n)]
			b = b[k+int(n):]
			if err := fn(int(field), wire, v, 0); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unexpected wire type %d", ErrBadTree, wire)
		}
	}
	return nil
}
