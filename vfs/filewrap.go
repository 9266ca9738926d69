package vfs

import (
	"io/fs"

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
	_, inTyped := f.(TypedFile)
	_, inStater := f.(OpenStater)
	_, inFd := f.(hostfd.Filer)
	return withOptionals(w, typed && inTyped, stater && inStater, fd && inFd)
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
)

func (k keptTyped) Type() fs.FileMode { return k.w.Type() }

func (k keptStater) OpenStat() (Info, bool) { return k.w.OpenStat() }

func (k keptFd) HostFd(t hostfd.Token) (int, bool) { return k.w.HostFd(t) }

// The optional File interfaces a [WrapFile] result keeps, as bits.
const (
	hasTyped = 1 << iota
	hasStater
	hasFd
)

// withOptionals is w with the optional File interfaces named true, which w
// implements: one struct per subset.
func withOptionals(w File, typed, stater, fd bool) File {
	b := wrappedFile{w}
	var (
		t    keptTyped
		s    keptStater
		h    keptFd
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
