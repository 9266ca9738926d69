//go:build linux

package syncback

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// RecoverOptions configures Recover.
type RecoverOptions struct {
	// OnReject: with RejectAbort (the default) recovery stops at the first
	// step whose base the source changed since; with RejectApplyRest it goes
	// on with the steps that do not depend on it.
	OnReject RejectMode
	// KeepCheckout leaves the checkout in place even when everything was
	// applied. Otherwise Recover removes it once nothing is left unapplied.
	KeepCheckout bool
}

// Recover finishes the sync whose journal is at journalPath (see [Pending]),
// applying what it had not applied through src, which
// must be the Dir the sync wrote to (the caller knows it by the journal's Label).
// It rolls forward: each remaining step is applied when the source still has
// the step's base, counted applied when the source already has its result
// (applied before the crash), and otherwise left unapplied as a conflict; new
// file contents are read from the checkout the journal names, and must still
// have their digest. Every call goes through src, so its policy, hooks and
// audit apply. The report lists every change of the plan, as Run's does
// (the changes the interrupted sync had not applied on purpose included); its
// Checkout names the checkout, kept when anything is not applied. The journal
// is removed once done. A journal whose plan was never committed applied
// nothing: every change is listed as not applied (stopped) and the checkout is
// kept. A journal held by a running sync answers conflict ("in use"); one
// another Recover finished meanwhile, an empty report.
func Recover(ctx context.Context, src *dir.Dir, journalPath string, opts RecoverOptions) (*Report, error) {
	const op = "recover"
	if src == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "nil source Dir")
	}
	j, err := readJournal(journalPath, true)
	if errors.Is(err, errGone) || errors.Is(err, fs.ErrNotExist) {
		return &Report{}, nil // finished by another Recover meanwhile
	}
	if errors.Is(err, errBusy) {
		return nil, vfs.NewError(vfs.CodeConflict, op, vfs.Root, "the journal is in use by a running sync")
	}
	if err != nil {
		return nil, vfs.NewError(vfs.CodeOf(vfs.Errno(op, vfs.Root, err)), op, vfs.Root, "cannot read the sync journal")
	}
	defer j.f.Close()
	if j.version == 0 {
		// Not even a header: the sync died creating the journal, before it
		// could apply anything.
		removeJournal(journalPath)
		return &Report{}, nil
	}
	rep := &Report{Checkout: j.checkout}
	var runErr error
	if j.committed {
		runErr = j.rollForward(ctx, src, opts, rep)
	} else {
		stopPending(j.plan, stStopped, vfs.CodeCanceled, "not applied: the sync was interrupted before it started (the checkout holds the change)")
	}
	fillReport(rep, j.plan)
	if j.committed && len(rep.NotApplied) == 0 && !opts.KeepCheckout {
		removeSyncedCheckout(rep, j.checkout)
	}
	removeJournal(journalPath)
	if runErr != nil {
		return rep, runErr
	}
	if len(rep.NotApplied) > 0 {
		return rep, listError(rep.NotApplied[0].Code, op, "not applied", unappliedPaths(rep.NotApplied))
	}
	return rep, nil
}

// rollForward applies the committed plan's ops not done yet through src,
// reading new contents from the checkout the journal names.
func (j *readJ) rollForward(ctx context.Context, src *dir.Dir, opts RecoverOptions, rep *Report) error {
	var read func(string, *materialize.Entry) ([]byte, error)
	if rootFd, err := unix.Open(j.checkout, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		defer unix.Close(rootFd)
		read = func(rel string, want *materialize.Entry) ([]byte, error) {
			return hostfs.ReadChecked(rootFd, rel, want.Size, want.Digest)
		}
	}
	a := &applier{src: src, read: read, onReject: opts.OnReject, plan: j.plan, j: &journal{f: j.f}}
	j.removeInterruptedTemps(ctx, src)
	return a.run(ctx, j.ops, j.done, rep)
}

// removeInterruptedTemps removes capfs's own temporaries beside the target
// of the interrupted op (the first not done) when it writes a file: the
// interrupted Dir.WriteFile may have left one there.
func (j *readJ) removeInterruptedTemps(ctx context.Context, src *dir.Dir) {
	for i, o := range j.ops {
		if j.done[i] {
			continue
		}
		if n := o.s.c.New; n != nil && n.IsRegular() {
			removeTemps(ctx, src, o.s.c.Path)
		}
		return
	}
}

// removeSyncedCheckout removes the checkout p of a recovered sync that
// applied everything, if it is one Checkout made, and then clears
// rep.Checkout (also when it is gone already).
func removeSyncedCheckout(rep *Report, p string) {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		rep.Checkout = "" // gone already
		return
	}
	if isCheckoutDir(p) && hostfs.RemoveTree(p) == nil {
		rep.Checkout = ""
	}
}

// removeJournal removes the journal at p, and flushes its directory.
func removeJournal(p string) {
	if err := os.Remove(p); err == nil {
		_ = syncDir(filepath.Dir(p))
	}
}

// isCheckoutDir reports whether p looks like a directory Checkout made (a
// real directory named capfs-checkout-…, owned by this user): Recover removes
// nothing else, whatever a journal says.
func isCheckoutDir(p string) bool {
	if !filepath.IsAbs(p) || !strings.HasPrefix(filepath.Base(p), "capfs-checkout-") {
		return false
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Getuid()
}

func unappliedPaths(us []Unapplied) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Change.Path
	}
	return out
}

// removeTemps removes the temporary files Dir.WriteFile leaves beside p when
// interrupted (".capfs-tmp-" and 16 hex digits).
func removeTemps(ctx context.Context, src *dir.Dir, p string) {
	parent := filepath.Dir(p)
	names, err := src.List(ctx, parent)
	if err != nil {
		return
	}
	for _, n := range names {
		if len(n) == len(".capfs-tmp-")+16 && strings.HasPrefix(n, ".capfs-tmp-") {
			q := n
			if parent != "." {
				q = parent + "/" + n
			}
			_ = src.Remove(ctx, q)
		}
	}
}
