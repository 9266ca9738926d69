// Package pack is gitree's direct reader of git pack files. A [Store], made
// by [Open] from a repository's git directory, reads objects ([Store.Read],
// [Store.Info]) and streams large blobs ([Store.Stream]) with positioned
// reads, its own resumable DEFLATE decoder and bounded delta resolution.
// Objects in no usable pack are [ErrNotPacked], for the caller to read
// through go-git; a malformed pack entry is an io_error whose chain holds
// [ErrCorrupt]. See pack.go for the reader's guarantees.
package pack
