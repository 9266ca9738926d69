package run

import (
	"context"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
)

// Recover finishes the sync-backs into d that were interrupted (the process
// died while applying): those whose journal carries label.
//
// Each is rolled forward through d ([materialize.Recover]); a journal a
// running sync holds is left alone. told, if not nil, is told of each
// journal before it is finished; the func it returns, if not nil, of the
// outcome. The error is the listing's: the journals found are all tried.
func Recover(ctx context.Context, d *dir.Dir, label string, opts materialize.RecoverOptions, told func(materialize.JournalInfo) func(*materialize.SyncReport, error)) error {
	js, err := materialize.PendingJournals("")
	if err != nil {
		return err
	}
	for _, j := range js {
		if j.Busy || j.Label != label {
			continue
		}
		var done func(*materialize.SyncReport, error)
		if told != nil {
			done = told(j)
		}
		rep, err := materialize.Recover(ctx, d, j.Path, opts)
		if done != nil {
			done(rep, err)
		}
	}
	return nil
}
