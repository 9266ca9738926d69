// Package vfs is the core of capfs. It holds the validated guest path type
// ([Path]), the one error type with stable codes ([Error]), file information
// ([Info]), and the [Backend] and [File] storage SPI. It also holds the shared
// symlink resolver every virtual backend uses ([Resolve]), and the [Namespace]
// that composes backends into one tree.
//
// # Guarantees
//
//   - A [Path] never holds "..", ".", empty segments, NUL or backslash, and is
//     always relative. Backends never parse raw guest strings ([ParseGuest] does,
//     once).
//   - Guest paths are cleaned lexically: "a/../b" is "b" even if "a" is a symlink.
//     This differs from POSIX, where ".." after a symlink is physical. ".." inside
//     a symlink target is resolved physically, beneath the backend's root.
//   - Symlinks resolve beneath the backend's root and never outside it. An
//     absolute target, or ".." above the root, is path_outside_sandbox. At most
//     [MaxSymlinks] (40, the kernel's limit) links are followed per lookup.
//   - Every error is an [*Error] with a stable [Code], the operation and a path
//     relative to the layer that returned it, never a host path. Each code
//     matches its io/fs sentinel with [errors.Is].
//
// # Not guaranteed
//
// vfs does not police guests: policy, audit and attenuation live in package dir.
// A [Backend] or [Namespace] is a host-only object. Handing one to a guest hands
// it full authority over that tree.
package vfs
