package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/internal/hostfile"
)

// newExtractCmd is "capfs extract ARCHIVE DEST": a host archive file extracted
// safely into a namespace directory, every entry decided by the session's policy.
func newExtractCmd(o *globalOptions) *cobra.Command {
	var (
		overwrite, strict, links, keepMtimes, asJSON bool
		format                                       string
		maxEntries                                   int
		maxBytes, maxEntry, maxArchive               string
		timeout                                      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "extract ARCHIVE DEST",
		Short: "Extract an archive into a namespace directory, safely",
		Long: `Extract the host file ARCHIVE (zip, tar, tar.gz or tar.zst, detected from its
first bytes) into the existing namespace directory DEST.

Every entry is decided before anything is written: names are sanitized (no
"..", absolute or drive paths, control characters, over-long components),
symlinks and hard links are left out unless --links (then only those whose
target stays inside DEST), devices, FIFOs and sparse files are left out, names
that collide after case folding or Unicode normalization are left out, and the
policy decides each path as it decides any write. Data is staged privately and
checked (CRC, sizes) and only then merged into DEST through ordinary checked
calls; a refused archive leaves DEST as it was. Modes are clamped (no setuid,
setgid or sticky; at most 0755), ownership is never applied.

The result lists what was extracted and what was left out, and why. Exit
status: 0 when every entry was extracted, 1 when some were left out or the
archive was refused.`,
		Args: cobra.ExactArgs(2),
	}
	f := cmd.Flags()
	f.BoolVar(&overwrite, "overwrite", false, "let a file replace an existing regular file of DEST (atomically)")
	f.BoolVar(&strict, "strict", false, "refuse the whole archive if any entry would be left out")
	f.BoolVar(&links, "links", false, "extract symlinks and hard links whose target stays inside DEST")
	f.BoolVar(&keepMtimes, "keep-mtimes", false, "set modification times from the archive")
	f.StringVar(&format, "format", "", "force the format: zip, tar, tar.gz or tar.zst (default: detect)")
	f.IntVar(&maxEntries, "max-entries", 0, "most entries of any kind (default 50000)")
	f.StringVar(&maxBytes, "max-extracted", "", "most bytes extracted in all, e.g. 512MiB (default 512MiB)")
	f.StringVar(&maxEntry, "max-entry", "", "most bytes of one file (default 256MiB)")
	f.StringVar(&maxArchive, "max-archive", "", "most bytes of the archive, after decompression (default 256MiB)")
	f.DurationVar(&timeout, "timeout", 0, "wall-clock budget of the extraction (default 5m)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON (extracted, filtered, entries, bytes)")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		src, dest := args[0], args[1]
		opts := archive.Options{Overwrite: overwrite, Strict: strict, KeepModTimes: keepMtimes}
		if links {
			opts.Links = archive.LinksInside
		}
		if format != "" {
			fm, err := archive.ParseFormat(format)
			if err != nil {
				return usageErrorf("--format %s: %v", format, err)
			}
			opts.Format = fm
		}
		opts.Limits.MaxEntries = maxEntries
		opts.Limits.Timeout = timeout
		for _, l := range []struct {
			flag, v string
			to      *int64
		}{{"--max-extracted", maxBytes, &opts.Limits.MaxExtractedBytes}, {"--max-entry", maxEntry, &opts.Limits.MaxEntryBytes}, {"--max-archive", maxArchive, &opts.Limits.MaxArchiveBytes}} {
			if l.v == "" {
				continue
			}
			n, err := parseQuota(l.v)
			if err != nil || n == 0 {
				return usageErrorf("%s %s: want a size such as 64MiB", l.flag, l.v)
			}
			*l.to = n
		}
		// ARCHIVE is an outside file: only a regular one, opened without
		// blocking, and named in errors as the user wrote it.
		af, st, err := hostfile.OpenRegular(src)
		if err != nil {
			return usageErrorf("extract: %s: %v", src, err)
		}
		defer af.Close()
		res, err := s.Root.ExtractArchiveFrom(ctx, af, st.Size(), dest, opts)
		out := cmd.OutOrStdout()
		if asJSON && res != nil {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(res); jerr != nil {
				return jerr
			}
		} else if res != nil {
			for _, it := range res.Extracted {
				fmt.Fprintf(out, "x %s\n", show(it.Path))
			}
			for _, fl := range res.Filtered {
				name := fl.Path
				if name == "" {
					name = fl.Name
				}
				detail := ""
				if fl.Detail != "" {
					detail = " (" + fl.Detail + ")"
				}
				fmt.Fprintf(out, "- %s: left out, %s%s\n", show(name), fl.Reason, show(detail))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "capfs: extract: %d extracted (%s), %d left out, of %d entries\n",
				len(res.Extracted), humanBytes(res.Bytes), len(res.Filtered), res.Entries)
		}
		if err != nil {
			return err
		}
		if len(res.Filtered) > 0 {
			return exitStatus(1)
		}
		return nil
	})
	return cmd
}

// newArchiveCmd is "capfs archive SRC OUT": a namespace tree written as a
// reproducible archive to a host file.
func newArchiveCmd(o *globalOptions) *cobra.Command {
	var (
		format, mtime string
		asJSON        bool
		git           gitEntries
	)
	cmd := &cobra.Command{
		Use:   "archive SRC OUT",
		Short: "Write a namespace tree to an archive file, reproducibly",
		Long: `Write the tree below the namespace path SRC to the host file OUT ("-" for
standard output) as an archive: tar.zst by default, or --format tar, tar.gz or
zip. Entries are written in path order without owners, with modes normalized
(0755 directories, 0644 or 0755 files); with --mtime every entry gets that time,
so the bytes depend on the tree alone. Files the policy does not let you read
are left out and listed. ".git" directories and files are left out, as git
archive leaves them, so the archive extracts anywhere (capfs extract refuses to
write a git directory); --git keep includes them. OUT is written to a temporary
name beside it and renamed into place when complete.`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().StringVar(&format, "format", "tar.zst", "tar.zst, tar, tar.gz or zip")
	cmd.Flags().StringVar(&mtime, "mtime", "", "modification time of every entry (RFC 3339, or @UNIXSECONDS)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (entries, bytes, skipped)")
	addGitFlag(cmd.Flags(), &git, "archives them; capfs extract then leaves them out")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		src, outPath := args[0], args[1]
		fm, err := archive.ParseFormat(format)
		if err != nil || fm == archive.FormatAuto {
			return usageErrorf("--format %s: want tar.zst, tar, tar.gz or zip", format)
		}
		opts := archive.CreateOptions{Format: fm}
		if opts.Exclude, err = git.exclude(); err != nil {
			return err
		}
		if mtime != "" {
			t, err := parseMtime(mtime)
			if err != nil {
				return usageErrorf("--mtime %s: %v", mtime, err)
			}
			opts.ModTime = t
		}
		var w io.Writer
		var tmp *os.File
		if outPath == "-" {
			w = cmd.OutOrStdout()
		} else {
			tmp, err = os.CreateTemp(filepath.Dir(outPath), "."+filepath.Base(outPath)+".capfs-*")
			if err != nil {
				return usageErrorf("archive: %s: %v", outPath, cause(err))
			}
			defer os.Remove(tmp.Name()) // after the rename, a no-op
			defer tmp.Close()
			w = tmp
		}
		res, err := s.Root.CreateArchive(ctx, src, w, opts)
		if err != nil {
			return err
		}
		if tmp != nil {
			if err := tmp.Sync(); err != nil {
				return failed(fmt.Errorf("archive: %s: %v", outPath, cause(err)))
			}
			if err := tmp.Close(); err != nil {
				return failed(fmt.Errorf("archive: %s: %v", outPath, cause(err)))
			}
			if err := os.Rename(tmp.Name(), outPath); err != nil {
				return failed(fmt.Errorf("archive: %s: %v", outPath, cause(err)))
			}
		}
		report := cmd.ErrOrStderr()
		if asJSON {
			enc := json.NewEncoder(report)
			if outPath != "-" {
				enc = json.NewEncoder(cmd.OutOrStdout())
			}
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		for _, sk := range res.Skipped {
			fmt.Fprintf(report, "capfs: archive: left out %s: %s\n", show(sk.Path), show(sk.Reason))
		}
		git.report(report, "archive")
		fmt.Fprintf(report, "capfs: archive: %d entries, %s of file data\n", res.Entries, humanBytes(res.Bytes))
		return nil
	})
	return cmd
}

// parseMtime reads --mtime: RFC 3339 or @UNIXSECONDS.
func parseMtime(s string) (time.Time, error) {
	if len(s) > 1 && s[0] == '@' {
		var sec int64
		if _, err := fmt.Sscanf(s[1:], "%d", &sec); err != nil {
			return time.Time{}, errors.New("want @UNIXSECONDS or an RFC 3339 time")
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want @UNIXSECONDS or an RFC 3339 time")
	}
	return t, nil
}

// gitEntries is --git of snapshot save, snapshot restore and archive: what
// becomes of ".git" entries (git directories and gitdir files, at any depth).
// omit, the default, leaves them out, as git archive does, so what is saved
// restores and extracts anywhere (the policy refuses to write a git directory);
// keep stores them too.
type gitEntries struct {
	arg     string
	omitted atomic.Int64
}

// addGitFlag adds --git to f; verb says what keep does ("stores them").
func addGitFlag(f *pflag.FlagSet, g *gitEntries, verb string) {
	f.StringVar(&g.arg, "git", "omit", `".git" directories and files: omit (as git archive does) or keep (`+verb+`)`)
}

// exclude is the Exclude filter --git asks for: nil for keep.
func (g *gitEntries) exclude() (func(string, fs.FileMode) bool, error) {
	switch g.arg {
	case "keep":
		return nil, nil
	case "omit", "":
		return func(p string, _ fs.FileMode) bool {
			if path.Base(p) != ".git" {
				return false
			}
			g.omitted.Add(1)
			return true
		}, nil
	}
	return nil, usageErrorf("--git %s: want omit or keep", g.arg)
}

// report says on w what was left out, if anything: "capfs: WHAT: left out ...".
func (g *gitEntries) report(w io.Writer, what string) {
	switch n := g.omitted.Load(); {
	case n == 1:
		fmt.Fprintf(w, "capfs: %s: left out .git (--git keep includes it)\n", what)
	case n > 1:
		fmt.Fprintf(w, "capfs: %s: left out %d .git entries (--git keep includes them)\n", what, n)
	}
}
