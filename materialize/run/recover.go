//go:build linux

package run

import (
	"context"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/syncback"
)

// Recover finishes the sync-backs into d that were interrupted (the process
// died while applying): those whose journal carries label.
//
// Each is rolled forward through d ([syncback.Recover]); a journal a
// running sync holds is left alone. told, if not nil, is told of each
// journal before it is finished; the func it returns, if not nil, of the
// outcome. The error is the listing's: the journals found are all tried.
func Recover(ctx context.Context, d *dir.Dir, label string, opts syncback.RecoverOptions, told func(syncback.JournalInfo) func(*syncback.Report, error)) error {
	js, err := syncback.Pending("")
	if err != nil {
		return err
	}
	for _, j := range js {
		if j.Busy || j.Label != label {
			continue
		}
		var done func(*syncback.Report, error)
		if told != nil {
			done = told(j)
		}
		rep, err := syncback.Recover(ctx, d, j.Path, opts)
		if done != nil {
			done(rep, err)
		}
	}
	return nil
}
