package fuseexport

import (
	"io/fs"
	"syscall"
)

// unixToMode converts st_mode bits to an fs.FileMode.
func unixToMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// modeToUnix converts an fs.FileMode to st_mode bits.
func modeToUnix(mode fs.FileMode) uint32 {
	m := uint32(mode.Perm())
	switch {
	case mode.IsDir():
		m |= syscall.S_IFDIR
	case mode&fs.ModeSymlink != 0:
		m |= syscall.S_IFLNK
	case mode&fs.ModeNamedPipe != 0:
		m |= syscall.S_IFIFO
	case mode&fs.ModeSocket != 0:
		m |= syscall.S_IFSOCK
	case mode&fs.ModeCharDevice != 0:
		m |= syscall.S_IFCHR
	case mode&fs.ModeDevice != 0:
		m |= syscall.S_IFBLK
	default:
		m |= syscall.S_IFREG
	}
	if mode&fs.ModeSetuid != 0 {
		m |= syscall.S_ISUID
	}
	if mode&fs.ModeSetgid != 0 {
		m |= syscall.S_ISGID
	}
	if mode&fs.ModeSticky != 0 {
		m |= syscall.S_ISVTX
	}
	return m
}

// special reports whether mode is a type a capfs export never shows: FIFOs,
// sockets, devices (a FIFO must never hang a process, nor a device node reach
// hardware).
func special(mode fs.FileMode) bool {
	return mode&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0
}
