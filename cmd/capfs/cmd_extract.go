package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

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
		af, st, err := hostfile.OpenRegular(s.env.abs(src))
		if err != nil {
			return usageErrorf("extract: %s: %v", src, err)
		}
		defer af.Close()
		res, err := archive.ExtractToDir(ctx, s.Root, af, st.Size(), dest, opts)
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
