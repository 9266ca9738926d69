package archive

import (
	"io/fs"
	"time"
)

// The default limits. Every byte limit counts bytes after decompression.
const (
	DefaultMaxArchiveBytes   int64 = 256 << 20 // the archive as read: a zip's size, a tar's decompressed stream
	DefaultMaxEntries              = 50_000    // entries of any type, filtered ones included
	DefaultMaxExtractedBytes int64 = 512 << 20 // sum of the sizes of the files extracted
	DefaultMaxEntryBytes     int64 = 256 << 20 // one file's size
	DefaultMaxDepth                = 256       // components in one path
	DefaultTimeout                 = 5 * time.Minute
	DefaultMemoryBudget      int64 = 64 << 20 // staged file data kept in memory before spilling to disk
)

// Limits bound what one extraction may cost. A zero field takes its default
// (see the Default constants); a negative one means no limit. Exceeding any limit
// refuses the whole archive (error code file_too_large, or canceled for Timeout)
// before anything reaches the destination.
type Limits struct {
	MaxArchiveBytes   int64
	MaxEntries        int
	MaxExtractedBytes int64
	MaxEntryBytes     int64
	MaxDepth          int
	// Timeout is the wall-clock budget of the whole extraction, merge included.
	Timeout time.Duration
}

func (l Limits) withDefaults() Limits {
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def64(&l.MaxArchiveBytes, DefaultMaxArchiveBytes)
	def64(&l.MaxExtractedBytes, DefaultMaxExtractedBytes)
	def64(&l.MaxEntryBytes, DefaultMaxEntryBytes)
	if l.MaxEntries == 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

// LinkPolicy says what becomes of symlink and hard-link entries.
type LinkPolicy int

const (
	// LinksRefuse (the default) filters every symlink and hard-link entry
	// (ReasonSymlink, ReasonHardlink).
	LinksRefuse LinkPolicy = iota
	// LinksInside extracts a symlink whose target is relative and, resolved
	// through the archive's own directories and links, stays inside the
	// destination; and a hard link whose target is a regular file extracted from
	// the same archive. Others are filtered (ReasonLinkTarget). Symlinks are
	// created after every file, so no entry is ever written through one.
	LinksInside
)

// Options configure Extract. The zero value is the safe default.
type Options struct {
	Limits Limits
	Links  LinkPolicy
	// Overwrite lets a file entry replace an existing regular file of the
	// destination (atomically). Without it an existing name is filtered
	// (ReasonExists). A directory entry merges into an existing directory either
	// way; a type change (file over directory, anything over a symlink) is always
	// filtered.
	Overwrite bool
	// Strict refuses the whole archive if any entry would be filtered, so that
	// either every entry is extracted or nothing is.
	Strict bool
	// KeepModTimes sets each file's modification time from the archive (as tar -x
	// does). Default off: files get the time of extraction.
	KeepModTimes bool
	// Format forces the format; FormatAuto (the default) detects it from the
	// first bytes.
	Format Format
	// MemoryBudget is how many bytes of file data are staged in memory before the
	// rest is staged in a private 0700 directory on disk (0: the default; negative:
	// always on disk).
	MemoryBudget int64
	// StagingDir is where that directory is made ("" : os.TempDir()).
	StagingDir string
	// Filter, if set, is asked about every entry that passed every other check;
	// returning false filters it with ReasonPolicy and detail "filter".
	Filter func(path string, mode fs.FileMode) bool
}

// Mode clamping (see the package doc): the archive's permission bits ANDed
// with 0644 (0755 if any execute bit is set) for files and 0755 for
// directories, with owner rw (files) or rwx (directories) always set; setuid,
// setgid and sticky always dropped.
func clampFile(m fs.FileMode) fs.FileMode {
	max := fs.FileMode(0o644)
	if m&0o111 != 0 {
		max = 0o755
	}
	return (m&fs.ModePerm)&max | 0o600
}

func clampDir(m fs.FileMode) fs.FileMode {
	return (m&fs.ModePerm)&0o755 | 0o700
}
