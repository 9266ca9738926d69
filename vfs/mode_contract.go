package vfs

import "io/fs"

// POSIX st_mode bits, the same on every Unix; capfs stores and exchanges them.
const (
	unixTypeMask = 0o170000
	unixDir      = 0o040000
	unixReg      = 0o100000
	unixLink     = 0o120000
	unixFIFO     = 0o010000
	unixSock     = 0o140000
	unixChar     = 0o020000
	unixBlock    = 0o060000
	unixSetuid   = 0o4000
	unixSetgid   = 0o2000
	unixSticky   = 0o1000
)

// UnixMode converts m to st_mode bits: its type (a regular file when m has no
// type bit), permission bits, setuid, setgid and sticky.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	switch {
	case m&fs.ModeDir != 0:
		u |= unixDir
	case m&fs.ModeSymlink != 0:
		u |= unixLink
	case m&fs.ModeNamedPipe != 0:
		u |= unixFIFO
	case m&fs.ModeSocket != 0:
		u |= unixSock
	case m&fs.ModeCharDevice != 0:
		u |= unixChar
	case m&fs.ModeDevice != 0:
		u |= unixBlock
	default:
		u |= unixReg
	}
	return u | unixSpecial(m)
}

func unixSpecial(m fs.FileMode) uint32 {
	var u uint32
	if m&fs.ModeSetuid != 0 {
		u |= unixSetuid
	}
	if m&fs.ModeSetgid != 0 {
		u |= unixSetgid
	}
	if m&fs.ModeSticky != 0 {
		u |= unixSticky
	}
	return u
}

// FileModeOf converts st_mode bits to an fs.FileMode, the inverse of
// [UnixMode]. An unknown type gives fs.ModeIrregular.
func FileModeOf(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&unixSetuid != 0 {
		m |= fs.ModeSetuid
	}
	if u&unixSetgid != 0 {
		m |= fs.ModeSetgid
	}
	if u&unixSticky != 0 {
		m |= fs.ModeSticky
	}
	switch u & unixTypeMask {
	case unixReg:
		return m
	case unixDir:
		return m | fs.ModeDir
	case unixLink:
		return m | fs.ModeSymlink
	case unixFIFO:
		return m | fs.ModeNamedPipe
	case unixSock:
		return m | fs.ModeSocket
	case unixChar:
		return m | fs.ModeDevice | fs.ModeCharDevice
	case unixBlock:
		return m | fs.ModeDevice
	}
	return m | fs.ModeIrregular
}
