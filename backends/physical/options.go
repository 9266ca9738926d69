package physical

// SymlinkPolicy says how the backend treats symbolic links.
type SymlinkPolicy int

const (
	// SymlinksInRoot follows symlinks, beneath the root only (the default).
	// A link whose resolution would leave the root fails with
	// path_outside_sandbox, and Symlink refuses to create one.
	SymlinksInRoot SymlinkPolicy = iota
	// SymlinksReject follows no symlink at all (RESOLVE_NO_SYMLINKS).
	// A path that would need one fails with fs_permission_denied. Symlink fails
	// with not_supported, and Features.Symlinks is false. Lstat and Readlink still
	// describe links that already exist.
	SymlinksReject
)

// HardLinkPolicy says how the backend treats regular files with more than one
// name (nlink > 1). Such a file may share its inode with a file outside the root.
type HardLinkPolicy int

const (
	// HardLinksReplace (the default) reads such files in place, but never writes
	// to them. Opening one for writing first gives the name a private copy (an
	// empty one for O_TRUNC), renamed over the name, and the handle writes the
	// copy. The other names keep the old contents. Chmod and Chtimes refuse such
	// files.
	HardLinksReplace HardLinkPolicy = iota
	// HardLinksReject refuses to open such files at all, for reading or writing,
	// with fs_permission_denied; Link fails with not_supported and
	// Features.HardLinks is false.
	HardLinksReject
)

// ResolverMode selects how paths are resolved beneath the root.
type ResolverMode int

const (
	// ResolverAuto uses openat2 if the kernel offers it (and a seccomp filter does
	// not refuse it), the portable resolver otherwise. The default.
	ResolverAuto ResolverMode = iota
	// ResolverOpenat2 uses openat2 only; New fails with not_supported without it.
	ResolverOpenat2
	// ResolverPortable always walks paths component by component with openat and
	// O_NOFOLLOW, following symlinks itself by the same rules.
	ResolverPortable
)

type config struct {
	symlinks  SymlinkPolicy
	hardLinks HardLinkPolicy
	oneFS     bool
	maxSize   int64
	resolver  ResolverMode
	noReopen  bool // tests: never reopen through /proc/self/fd (the fallback path)
	verbatim  bool // WithVerbatimLinks
}

// Option configures New.
type Option func(*config)

// WithSymlinks sets the symlink policy (SymlinksInRoot by default).
func WithSymlinks(p SymlinkPolicy) Option { return func(c *config) { c.symlinks = p } }

// WithVerbatimLinks makes a symlink's target data, for a directory private to
// capfs (the lazy layer's upper) that no host process resolves links in.
//
// Symlink then stores an absolute target, and in the FS New returned one
// climbing above the root; a Sub still refuses a climbing target, which may
// land in the wider tree. Readlink returns the target as stored, and
// HostLinkTarget maps none. Resolution is unchanged: no lookup follows a link
// out of the root (path_outside_sandbox). Never give it to a directory of the
// user's: host tools there would follow what a guest stored.
func WithVerbatimLinks() Option { return func(c *config) { c.verbatim = true } }

// WithOneFilesystem refuses to cross mount points beneath the root
// (RESOLVE_NO_XDEV): a path that would fails with path_outside_sandbox.
func WithOneFilesystem() Option { return func(c *config) { c.oneFS = true } }

// WithHardLinks sets the hard-link policy (HardLinksReplace by default).
func WithHardLinks(p HardLinkPolicy) Option { return func(c *config) { c.hardLinks = p } }

// WithMaxFileSize limits every file to n bytes. A Write, WriteAt or Truncate
// that would make a file larger fails with file_too_large and writes nothing.
// Reads stop after n+1 bytes; the read that would go further fails with
// file_too_large. n <= 0 means no limit.
func WithMaxFileSize(n int64) Option {
	return func(c *config) {
		if n < 0 {
			n = 0
		}
		c.maxSize = n
	}
}

// WithResolver selects the path resolver (ResolverAuto by default). Tests force
// each in turn.
func WithResolver(m ResolverMode) Option { return func(c *config) { c.resolver = m } }
