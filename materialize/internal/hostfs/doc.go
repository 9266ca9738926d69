// Package hostfs holds the host-side file operations on a checkout that both
// the checkout ([materialize]) and sync-back ([syncback]) use: each names a
// path relative to a directory handle and never follows a symlink.
//
// The package builds on Linux only (openat2, O_PATH).
//
// Opening goes through openat2 (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS) where the kernel has it, else one component at a
// time with O_NOFOLLOW ([OpenBeneath]). Regular files are opened with
// O_NONBLOCK and checked to be the inode examined ([OpenRegularAt]). [Walk]
// and [WalkParallel] enter directories by name relative to their parent's
// handle. So whatever a sandboxed process left in a checkout (a symlink to
// /etc in place of a directory, a FIFO in place of a file), reading or
// writing it never reaches outside it and never blocks on a special file.
//
// [materialize]: github.com/capfs/capfs/materialize
// [syncback]: github.com/capfs/capfs/materialize/syncback
package hostfs
