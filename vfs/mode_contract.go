package vfs

import "io/fs"

// unixTypes pairs each fs.FileMode type with its st_mode type bits, the same
// on every Unix. is is the bit that tells the type in an fs.FileMode.
var unixTypes = [...]struct {
	is, m fs.FileMode
	u     uint32
}{
	{fs.ModeDir, fs.ModeDir, 0o040000},
	{fs.ModeSymlink, fs.ModeSymlink, 0o120000},
	{fs.ModeNamedPipe, fs.ModeNamedPipe, 0o010000},
	{fs.ModeSocket, fs.ModeSocket, 0o140000},
	{fs.ModeCharDevice, fs.ModeDevice | fs.ModeCharDevice, 0o020000},
	{fs.ModeDevice, fs.ModeDevice, 0o060000},
}

// unixBits pairs the setuid, setgid and sticky bits with their st_mode bits.
var unixBits = [...]struct {
	m fs.FileMode
	u uint32
}{{fs.ModeSetuid, 0o4000}, {fs.ModeSetgid, 0o2000}, {fs.ModeSticky, 0o1000}}

const (
	unixTypeMask = 0o170000
	unixReg      = 0o100000
)

// UnixMode converts m to st_mode bits.
// It keeps the type (a regular file when m has no type bit), the permission
// bits, setuid, setgid and sticky.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	for _, b := range unixBits {
		if m&b.m != 0 {
			u |= b.u
		}
	}
	for _, t := range unixTypes {
		if m&t.is != 0 {
			return u | t.u
		}
	}
	return u | unixReg
}

// FileModeOf converts st_mode bits to an [fs.FileMode], the inverse of
// [UnixMode]. An unknown type gives [fs.ModeIrregular].
func FileModeOf(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	for _, b := range unixBits {
		if u&b.u != 0 {
			m |= b.m
		}
	}
	if u&unixTypeMask == unixReg {
		return m
	}
	for _, t := range unixTypes {
		if u&unixTypeMask == t.u {
			return m | t.m
		}
	}
	return m | fs.ModeIrregular
}
