package vfs

import (
	"reflect"

	"github.com/capfs/capfs/internal/hostfd"
)

// Optional describes one optional interface a [Backend] may implement (see
// below), or a [File] may (see [OptionalFiles]).
//
// The optional Backend interfaces come in groups:
//   - fused resolution: [StatResolver], [OpenResolver], [ListResolver] resolve
//     a path and act on what it reaches in one lookup;
//   - listings with status: [DirInfoReader] lists a directory with every
//     entry's status in one pass;
//   - host-backed: [HostPather] and [HostLinkResolver] serve a tree that is a
//     real host directory;
//   - locator: [Locator] says where a Sub's root is now;
//   - chown: [Chowner] changes ownership;
//   - link times: [LinkTimer] sets a symlink's own times;
//   - capacity: [StatFSer] reports the storage's size and what is free.
//
// A wrapper of a Backend (one that embeds it or holds it) implements every one
// of them, so that wrapping never hides what the wrapped backend can do. It
// forwards the read-side ones through the helper that falls back when the
// wrapped backend lacks the interface: [ResolveStat], [ResolveOpen],
// [ResolveReadDir], [ReadDirInfo], [Chown], [Lchtimes], [StatFS]. So what it
// claims always works (or answers not_supported where the interface's
// contract allows it). Where no fallback exists (Locator), it claims the
// interface only when the wrapped backend has it. A wrapper that withholds
// one, or answers it itself, says why in its doc comment.
// [github.com/capfs/capfs/vfs/vfstest.CheckForwards] checks a wrapper against
// [Optionals].
type Optional struct {
	Name  string       // the interface's name: "StatResolver"
	Group string       // its group: "fused resolution", "host-backed", ...
	Type  reflect.Type // the interface type
	// Writes reports that the interface changes the tree (a read-only wrapper
	// refuses it rather than forwarding).
	Writes bool
	// Unsupported reports that the interface's contract lets an implementation
	// answer not_supported (Chowner: the backend may keep no ownership).
	Unsupported bool
	// Escapes reports that what the interface hands out escapes the
	// wrapper's later checks: the host descriptor, which reads and writes
	// past every wrapper. A wrapper that checks each call forwards it only
	// where the descriptor cannot bypass that check (a read-only view, a
	// descriptor open for reading only), and otherwise withholds it (a
	// quota's writable files), saying why.
	Escapes bool
}

// Optionals returns every optional Backend interface: the one list wrappers
// and their checks go by. Add a new optional interface here.
func Optionals() []Optional {
	return []Optional{
		{Name: "StatResolver", Group: "fused resolution", Type: reflect.TypeFor[StatResolver]()},
		{Name: "OpenResolver", Group: "fused resolution", Type: reflect.TypeFor[OpenResolver]()},
		{Name: "ListResolver", Group: "fused resolution", Type: reflect.TypeFor[ListResolver]()},
		{Name: "DirInfoReader", Group: "listings with status", Type: reflect.TypeFor[DirInfoReader]()},
		{Name: "HostPather", Group: "host-backed", Type: reflect.TypeFor[HostPather]()},
		{Name: "HostLinkResolver", Group: "host-backed", Type: reflect.TypeFor[HostLinkResolver]()},
		{Name: "Locator", Group: "locator", Type: reflect.TypeFor[Locator]()},
		{Name: "Chowner", Group: "chown", Type: reflect.TypeFor[Chowner](), Writes: true, Unsupported: true},
		{Name: "LinkTimer", Group: "link times", Type: reflect.TypeFor[LinkTimer](), Writes: true, Unsupported: true},
		{Name: "StatFSer", Group: "capacity", Type: reflect.TypeFor[StatFSer](), Unsupported: true},
	}
}

// OptionalFiles returns every optional [File] interface, in three groups.
//
//   - file status: [TypedFile] and [OpenStater] let a layer skip an fstat
//     per open.
//   - file attributes: [AttrFile] changes the mode and times of the object
//     the File opened (fchmod, futimens). A read-only layer's File refuses
//     it with read_only.
//   - host descriptor: [hostfd.Filer] gives the host file descriptor under
//     the File (FUSE passthrough). Its method takes a [hostfd.Token], which
//     only this module's packages can name, so the descriptor stays out of
//     capfs's public API. It Escapes (see [Optional]).
//
// A wrapper of a File keeps each one its File has, by [WrapFile]: it
// implements them all, and WrapFile keeps exactly those the wrapped File
// has. A wrapper that only re-addresses errors is [AddressFile]'s. A wrapper
// that withholds one does not implement it and says why.
// [github.com/capfs/capfs/vfs/vfstest.CheckForwards] checks the Files a
// wrapper opens against it.
func OptionalFiles() []Optional {
	return []Optional{
		{Name: "TypedFile", Group: "file status", Type: reflect.TypeFor[TypedFile]()},
		{Name: "OpenStater", Group: "file status", Type: reflect.TypeFor[OpenStater]()},
		{Name: "hostfd.Filer", Group: "host descriptor", Type: reflect.TypeFor[hostfd.Filer](), Escapes: true},
		{Name: "AttrFile", Group: "file attributes", Type: reflect.TypeFor[AttrFile]()},
	}
}
