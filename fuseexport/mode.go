//go:build linux

package fuseexport

import (
	"io/fs"
)

// special reports whether mode is a type a capfs export never shows: FIFOs,
// sockets, devices (a FIFO must never hang a process, nor a device node reach
// hardware).
func special(mode fs.FileMode) bool {
	return mode&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0
}
