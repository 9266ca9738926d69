package vfs

import (
	"io/fs"
	"time"

	"github.com/capfs/capfs/internal/hostfd"
)

// WrapFile returns w, a File wrapping f, with exactly the optional File
// interfaces ([OptionalFiles]) that both w and f implement.
//
// w's own method answers each one kept. So a wrapper implements every
// optional File interface it can answer (forwarding to f, or answering
// itself), and WrapFile keeps it exactly where f has it: a type assertion
// on the result answers as one on f would, and what the result claims
// works. A wrapper withholds one by not implementing it, and says why in
// its doc comment. Over a nil f, the result claims none.
//
// The result's other methods are w's File methods; methods of w outside
// [File] and the optional interfaces are not kept.
func WrapFile(w, f File) File {
	_, typed := w.(TypedFile)
	_, stater := w.(OpenStater)
	_, fd := w.(hostfd.Filer)
	_, attr := w.(AttrFile)
	_, inTyped := f.(TypedFile)
	_, inStater := f.(OpenStater)
	_, inFd := f.(hostfd.Filer)
	_, inAttr := f.(AttrFile)
	return withOptionals(w, typed && inTyped, stater && inStater, fd && inFd, attr && inAttr)
}

// wrappedFile is the File a [WrapFile] result is made of.
type wrappedFile struct{ File }

// unwrapFile returns the File w, where f is a [WrapFile] result over w, or f.
func unwrapFile(f File) File {
	if u, ok := f.(interface{ wrapped() File }); ok {
		return u.wrapped()
	}
	return f
}

func (w wrappedFile) wrapped() File { return w.File }

// The optional File interfaces a [WrapFile] result keeps, each answered by
// the wrapper's method.
type (
	keptTyped  struct{ w TypedFile }
	keptStater struct{ w OpenStater }
	keptFd     struct{ w hostfd.Filer }
	keptAttr   struct{ w AttrFile }
)

func (k keptTyped) Type() fs.FileMode { return k.w.Type() }

func (k keptStater) OpenStat() (Info, bool) { return k.w.OpenStat() }

func (k keptFd) HostFd(t hostfd.Token) (int, bool) { return k.w.HostFd(t) }

func (k keptAttr) Chmod(mode fs.FileMode) error { return k.w.Chmod(mode) }

func (k keptAttr) Chtimes(atime, mtime time.Time) error { return k.w.Chtimes(atime, mtime) }

// The optional File interfaces a [WrapFile] result keeps, as bits.
const (
	hasTyped = 1 << iota
	hasStater
	hasFd
)

// withOptionals is w with the optional File interfaces named true, which w
// implements: one struct per subset (withKept, or withAttr with AttrFile).
func withOptionals(w File, typed, stater, fd, attr bool) File {
	b := wrappedFile{w}
	var (
		t    keptTyped
		s    keptStater
		h    keptFd
		a    keptAttr
		kept int
	)
	if typed {
		t.w, kept = w.(TypedFile), kept|hasTyped
	}
	if stater {
		s.w, kept = w.(OpenStater), kept|hasStater
	}
	if fd {
		h.w, kept = w.(hostfd.Filer), kept|hasFd
	}
	if attr {
		a.w = w.(AttrFile)
		return withAttr(b, t, s, h, a, kept)
	}
	return withKept(b, t, s, h, kept)
}

// withKept is b with the kept interfaces of kept's bits embedded.
func withKept(b wrappedFile, t keptTyped, s keptStater, h keptFd, kept int) File {
	switch kept {
	case hasTyped | hasStater | hasFd:
		return struct {
			wrappedFile
			keptTyped
			keptStater
			keptFd
		}{b, t, s, h}
	case hasTyped | hasStater:
		return struct {
			wrappedFile
			keptTyped
			keptStater
		}{b, t, s}
	case hasTyped | hasFd:
		return struct {
			wrappedFile
			keptTyped
			keptFd
		}{b, t, h}
	case hasStater | hasFd:
		return struct {
			wrappedFile
			keptStater
			keptFd
		}{b, s, h}
	case hasTyped:
		return struct {
			wrappedFile
			keptTyped
		}{b, t}
	case hasStater:
		return struct {
			wrappedFile
			keptStater
		}{b, s}
	case hasFd:
		return struct {
			wrappedFile
			keptFd
		}{b, h}
	}
	return b
}

// withAttr is withKept with keptAttr embedded too.
func withAttr(b wrappedFile, t keptTyped, s keptStater, h keptFd, a keptAttr, kept int) File {
	switch kept {
	case hasTyped | hasStater | hasFd:
		return struct {
			wrappedFile
			keptTyped
			keptStater
			keptFd
			keptAttr
		}{b, t, s, h, a}
	case hasTyped | hasStater:
		return struct {
			wrappedFile
			keptTyped
			keptStater
			keptAttr
		}{b, t, s, a}
	case hasTyped | hasFd:
		return struct {
			wrappedFile
			keptTyped
			keptFd
			keptAttr
		}{b, t, h, a}
	case hasStater | hasFd:
		return struct {
			wrappedFile
			keptStater
			keptFd
			keptAttr
		}{b, s, h, a}
	case hasTyped:
		return struct {
			wrappedFile
			keptTyped
			keptAttr
		}{b, t, a}
	case hasStater:
		return struct {
			wrappedFile
			keptStater
			keptAttr
		}{b, s, a}
	case hasFd:
		return struct {
			wrappedFile
			keptFd
			keptAttr
		}{b, h, a}
	}
	return struct {
		wrappedFile
		keptAttr
	}{b, a}
}
