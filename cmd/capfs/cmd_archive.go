package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/archive"
)

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
			tmp, err = os.CreateTemp(filepath.Dir(s.env.abs(outPath)), "."+filepath.Base(outPath)+".capfs-*")
			if err != nil {
				return usageErrorf("archive: %s: %v", outPath, cause(err))
			}
			defer os.Remove(tmp.Name()) // after the rename, a no-op
			defer tmp.Close()
			w = tmp
		}
		res, err := archive.CreateFromDir(ctx, s.Root, src, w, opts)
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
			if err := os.Rename(tmp.Name(), s.env.abs(outPath)); err != nil {
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
