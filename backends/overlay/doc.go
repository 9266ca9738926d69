// Package overlay is the copy-on-write layer of a lazy sandbox. Its [Overlay] is
// a [vfs.Backend] showing a lower tree (a Dir's Backend view, never changed).
// A process's changes are kept in a private upper directory on the host.
//
// An [Overlay] is served through a Dir: dir.New(overlay), then a FUSE mount
// ([github.com/capfs/capfs/fuseexport.Mount]) for a sandboxed process. The Dir
// resolves each path in the overlay (its Resolve, ResolveStat and ResolveOpen)
// before the layer acts on it. The layer itself follows no symlink inside a
// path.
//
// What the process saw is kept too: the first sight of each lower entry is its
// [Base]. So a sync-back judges conflicts against what the process read, not
// against what the source holds when the run ends. [Overlay.Changes] lists what
// changed, each replaced entry with its Base.
//
// A copy-up is the same file changing, not another file: the copy keeps the
// lower entry's ID (a mount's inode number) under every name it gets, and a
// lower file open for reading reads the copy from then on. This is not
// overlayfs's rule for readers (they keep the lower file); see ident.go,
// reader.go and docs/design-notes.md.
//
// Mounting an Overlay costs the same whatever the lower tree's size.
//
// The writable overlays of a git revision and a CAS tree (gitree.Overlay,
// cas.Overlay) use the same technique with an upper in memory, whose product
// is a new commit: internal/cowview. docs/design-notes.md says why the two stay
// apart.
package overlay
