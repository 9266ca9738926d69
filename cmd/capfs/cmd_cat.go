package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

func newCatCmd(o *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cat PATH...",
		Short: "Print files of the namespace",
		Long: `Write the contents of each regular file PATH to standard output, in order.
Directories, FIFOs, sockets and devices are refused; so are files the policy
denies (secrets).`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		for _, p := range args {
			f, err := s.Root.OpenFile(ctx, p)
			if err != nil {
				return err
			}
			h, err := f.Open(ctx, 0)
			if err != nil {
				return err
			}
			_, err = io.Copy(cmd.OutOrStdout(), ctxReader{ctx, h, p})
			h.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	return cmd
}

// ctxReader stops a copy at the next read once ctx is done (SIGINT, SIGTERM):
// a long cat ends within one read of the signal.
type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	name string
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		p, _ := vfs.ParseGuest(c.name)
		return 0, vfs.NewError(vfs.CodeCanceled, "read", p, "interrupted")
	}
	return c.r.Read(p)
}
