package materialize

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// EnvStateDir names the environment variable that sets capfs's state
// directory; sync journals go in its "journal" subdirectory.
const EnvStateDir = "CAPFS_STATE_DIR"

// journalSuffix ends the name of every journal file.
const journalSuffix = ".journal"

// DefaultJournalDir returns where SyncBack keeps its journals when
// SyncOptions.JournalDir is "": $CAPFS_STATE_DIR/journal, else
// $XDG_STATE_HOME/capfs/journal, else ~/.local/state/capfs/journal (state, not
// cache: a journal is what lets Recover finish a sync). It is outside every
// project and every checkout.
func DefaultJournalDir() (string, error) {
	if d := os.Getenv(EnvStateDir); d != "" {
		return filepath.Join(d, "journal"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "capfs", "journal"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "capfs", "journal"), nil
}

// A journal is the on-disk record of one sync's plan, written and flushed
// (fsync of the file and of its directory) before the first change is
// applied, so that Recover can finish the sync if the process dies partway.
// It is a file of JSON lines in the journal directory (mode 0700, the file
// 0600), locked (flock) while its sync or a Recover runs:
//
//	{"capfs_sync_journal":1,"label":…,"checkout":…,"created":…,"steps":S,"ops":N}
//	{"step":{…}}   S lines: every change of the plan, applied or not, with its base
//	{"op":[k,"create"]}   N lines: the order of the apply (step k, phase)
//	{"commit":N}   the plan is complete; flushed again
//	{"done":i}     op i applied (not flushed: a hint; Recover re-checks the source)
//
// A journal without its commit line is a plan that never started: nothing was
// applied. Once the apply ends (whatever its outcome) the journal is removed.
// The checkout path it names is host-private; the journal holds no file
// contents: Recover reads them from the checkout, checking each digest.
type journal struct {
	f    *os.File
	path string
	dir  string
}

// jStep is a step as the journal records it.
type jStep struct {
	Kind    ChangeKind  `json:"kind"`
	Path    string      `json:"path"`
	Old     *Entry      `json:"old,omitempty"`
	New     *Entry      `json:"new,omitempty"`
	Perm    fs.FileMode `json:"perm,omitempty"`
	Chmod   bool        `json:"chmod,omitempty"`
	Force   bool        `json:"force,omitempty"`
	Gone    bool        `json:"gone,omitempty"`
	Parents []string    `json:"parents,omitempty"`
	// Not pending: why it is not applied (for Recover to list it again).
	State  string   `json:"state,omitempty"`
	Code   vfs.Code `json:"code,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Clash  bool     `json:"conflict,omitempty"`
}

type jRecord struct {
	Version  int        `json:"capfs_sync_journal,omitempty"`
	Label    string     `json:"label,omitempty"`
	Checkout string     `json:"checkout,omitempty"`
	Created  *time.Time `json:"created,omitempty"`
	Steps    int        `json:"steps,omitempty"`
	Ops      int        `json:"ops,omitempty"`
	Step     *jStep     `json:"step,omitempty"`
	Op       []any      `json:"op,omitempty"`
	Commit   *int       `json:"commit,omitempty"`
	Done     *int       `json:"done,omitempty"`
}

var stateNames = map[stepState]string{
	stPending: "", stSettled: "settled", stRefused: "refused", stConflict: "conflict", stTheirs: "theirs",
	stBlocked: "depends", stAborted: "aborted", stApplied: "applied", stFailed: "failed", stStopped: "stopped",
}

func stateNamed(n string) stepState {
	for k, v := range stateNames {
		if v == n {
			return k
		}
	}
	return stPending
}

func journalError(err error) error {
	e := vfs.NewError(vfs.CodeOf(vfs.Errno("syncback", vfs.Root, err)), "syncback", vfs.Root, "cannot keep the sync journal")
	var errno unix.Errno
	if errors.As(err, &errno) {
		e.Err = errno
	}
	return e
}

// openJournalDir creates (0700) and returns the journal directory, refusing one
// inside the checkout.
func openJournalDir(jdir, checkout string) (string, error) {
	if jdir == "" {
		d, err := DefaultJournalDir()
		if err != nil {
			return "", vfs.NewError(vfs.CodeNotFound, "syncback", vfs.Root, "no journal directory: set "+EnvStateDir)
		}
		jdir = d
	}
	abs, err := filepath.Abs(jdir)
	if err != nil {
		return "", journalError(err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", journalError(err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if checkout != "" {
		if real, err := filepath.EvalSymlinks(checkout); err == nil {
			checkout = real
		}
		if under(abs, checkout) {
			return "", vfs.NewError(vfs.CodeInvalidPath, "syncback", vfs.Root, "the journal directory is inside the checkout")
		}
	}
	return abs, nil
}

// writeJournal writes and flushes the plan's journal in jdir and returns it
// open and locked.
func writeJournal(jdir, label, checkout string, plan []*step, ops []op) (*journal, error) {
	name := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())
	p := filepath.Join(jdir, name+journalSuffix)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, journalError(err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	if err == nil {
		err = writePlan(f, label, checkout, plan, ops)
	}
	if err == nil {
		err = syncDir(jdir)
	}
	if err != nil {
		f.Close()
		os.Remove(p)
		return nil, journalError(err)
	}
	hook("committed")
	return &journal{f: f, path: p, dir: jdir}, nil
}

// writePlan writes the journal's header on its own line first (whatever
// happens next, the journal names the checkout that holds the changes), then
// the plan's steps and ops, flushed, then the commit line, flushed.
func writePlan(f *os.File, label, checkout string, plan []*step, ops []op) error {
	now := time.Now()
	head, _ := json.Marshal(jRecord{Version: 1, Label: label, Checkout: checkout, Created: &now, Steps: len(plan), Ops: len(ops)})
	if _, err := f.Write(append(head, '\n')); err != nil {
		return err
	}
	hook("journal")
	if err := writeSteps(f, plan, ops); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	n := len(ops)
	line, _ := json.Marshal(jRecord{Commit: &n})
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// writeSteps writes a record for each step of the plan, then for each op
// (naming its step by index), in writes of about 64 KiB.
func writeSteps(f *os.File, plan []*step, ops []op) error {
	index := map[*step]int{}
	for i, s := range plan {
		index[s] = i
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	put := func(r jRecord) error {
		if err := enc.Encode(r); err != nil {
			return err
		}
		hook("journal")
		if buf.Len() >= 64<<10 {
			if _, err := f.Write(buf.Bytes()); err != nil {
				return err
			}
			buf.Reset()
		}
		return nil
	}
	for _, s := range plan {
		js := jStep{Kind: s.c.Kind, Path: s.c.Path, Old: s.c.Old, New: s.c.New, Perm: s.perm, Chmod: s.chmod,
			Force: s.force, Gone: s.gone, Parents: s.parents, State: stateNames[s.state], Code: s.code, Reason: s.reason, Clash: s.conflict}
		if err := put(jRecord{Step: &js}); err != nil {
			return err
		}
	}
	for _, o := range ops {
		if err := put(jRecord{Op: []any{index[o.s], string(o.ph)}}); err != nil {
			return err
		}
	}
	_, err := f.Write(buf.Bytes())
	return err
}

// done records op i as applied (not flushed: see journal).
func (j *journal) done(i int) error {
	line, _ := json.Marshal(jRecord{Done: &i})
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return journalError(err)
	}
	return nil
}

// finish removes the journal: its sync is over.
func (j *journal) finish() error {
	err := os.Remove(j.path)
	if err == nil {
		err = syncDir(j.dir)
	}
	j.f.Close()
	if err != nil {
		return journalError(err)
	}
	return nil
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// JournalInfo describes a journal left by a sync that did not finish.
type JournalInfo struct {
	Path      string    // the journal file (host-private)
	Label     string    // SyncOptions.Label of the sync
	Checkout  string    // the checkout it reads new contents from (host-private)
	Created   time.Time // when the sync wrote it
	Committed bool      // the plan was complete: changes may have been applied
	Busy      bool      // a sync or a Recover holds it now
}

// PendingJournals lists the journals in jdir ("" for DefaultJournalDir())
// whose sync did not finish, oldest first. A journal held by a running sync
// is listed with Busy set.
func PendingJournals(jdir string) ([]JournalInfo, error) {
	if jdir == "" {
		d, err := DefaultJournalDir()
		if err != nil {
			return nil, nil
		}
		jdir = d
	}
	ents, err := os.ReadDir(jdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, journalError(err)
	}
	var out []JournalInfo
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), journalSuffix) {
			continue
		}
		p := filepath.Join(jdir, e.Name())
		j, err := readJournal(p, false)
		if err != nil {
			if errors.Is(err, errBusy) {
				out = append(out, JournalInfo{Path: p, Busy: true})
			}
			continue
		}
		out = append(out, JournalInfo{Path: p, Label: j.label, Checkout: j.checkout, Created: j.created, Committed: j.committed})
		j.f.Close()
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Created.Before(out[k].Created) })
	return out, nil
}

var (
	errBusy = errors.New("journal in use")
	errGone = errors.New("journal gone")
)

// readJ is a journal as read back.
type readJ struct {
	f         *os.File
	version   int
	label     string
	checkout  string
	created   time.Time
	committed bool
	plan      []*step
	ops       []op
	done      map[int]bool
}

// readJournal opens, locks (without waiting: errBusy when held) and parses the
// journal at p. With full unset it stops after the header.
func readJournal(p string, full bool) (*readJ, error) {
	f, err := lockJournal(p)
	if err != nil {
		return nil, err
	}
	j := &readJ{f: f, done: map[int]bool{}}
	if err := j.parse(full); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// lockJournal opens and locks the journal at p without waiting (errBusy when
// held). errGone means another Recover finished it (and removed it) while
// this one waited: then there is nothing to do.
func lockJournal(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, errBusy
		}
		return nil, err
	}
	var st, cur unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || unix.Lstat(p, &cur) != nil || st.Ino != cur.Ino || st.Dev != cur.Dev {
		f.Close()
		return nil, errGone
	}
	return f, nil
}

// errMalformedJournal is a journal whose records make no sense.
var errMalformedJournal = errors.New("malformed journal")

// parse reads j's records up to a torn last line. With full unset it stops
// after the header, only looking for the commit line.
func (j *readJ) parse(full bool) error {
	sc := bufio.NewScanner(j.f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 0; sc.Scan(); n++ {
		var r jRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			break // a torn last line
		}
		if n > 0 {
			if err := j.record(&r); err != nil {
				return err
			}
			continue
		}
		if err := j.header(&r); err != nil {
			return err
		}
		if !full {
			j.committed = scanCommit(sc)
			return nil
		}
	}
	return nil
}

// header takes the journal's version, label, checkout and time from its
// first record.
func (j *readJ) header(r *jRecord) error {
	if r.Version != 1 {
		return errMalformedJournal
	}
	j.version = r.Version
	j.label, j.checkout = r.Label, r.Checkout
	if r.Created != nil {
		j.created = *r.Created
	}
	return nil
}

// scanCommit reads on to the commit line, without building the plan, and
// reports whether there is one.
func scanCommit(sc *bufio.Scanner) bool {
	for sc.Scan() {
		if bytes.HasPrefix(sc.Bytes(), []byte(`{"commit":`)) {
			return true
		}
	}
	return false
}

// record adds one record after the header to j: a step of the plan, an op
// (of a step already read), the commit line, or an op done.
func (j *readJ) record(r *jRecord) error {
	switch {
	case r.Step != nil:
		js := r.Step
		s := &step{c: Change{Kind: js.Kind, Path: js.Path, Old: js.Old, New: js.New}, perm: js.Perm, chmod: js.Chmod,
			force: js.Force, gone: js.Gone, parents: js.Parents, state: stateNamed(js.State), code: js.Code, reason: js.Reason, conflict: js.Clash}
		j.plan = append(j.plan, s)
	case r.Op != nil:
		return j.addOp(r.Op)
	case r.Commit != nil:
		if *r.Commit != len(j.ops) {
			return errMalformedJournal
		}
		j.committed = true
	case r.Done != nil:
		j.done[*r.Done] = true
	}
	return nil
}

// addOp adds the op a record names as [step index, phase].
func (j *readJ) addOp(rec []any) error {
	if len(rec) != 2 {
		return errMalformedJournal
	}
	k, ok1 := rec[0].(float64)
	ph, ok2 := rec[1].(string)
	if !ok1 || !ok2 || int(k) < 0 || int(k) >= len(j.plan) {
		return errMalformedJournal
	}
	s := j.plan[int(k)]
	s.ops++
	j.ops = append(j.ops, op{s, phase(ph)})
	return nil
}

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

// Recover finishes the sync whose journal is at journalPath (see
// PendingJournals), applying what it had not applied through src, which must
// be the Dir the sync wrote to (the caller knows it by the journal's Label).
// It rolls forward: each remaining step is applied when the source still has
// the step's base, counted applied when the source already has its result
// (applied before the crash), and otherwise left unapplied as a conflict; new
// file contents are read from the checkout the journal names, and must still
// have their digest. Every call goes through src, so its policy, hooks and
// audit apply. The report lists every change of the plan, as SyncBack's does
// (the changes the interrupted sync had not applied on purpose included); its
// Checkout names the checkout, kept when anything is not applied. The journal
// is removed once done. A journal whose plan was never committed applied
// nothing: every change is listed as not applied (stopped) and the checkout is
// kept. A journal held by a running sync answers conflict ("in use"); one
// another Recover finished meanwhile, an empty report.
func Recover(ctx context.Context, src *dir.Dir, journalPath string, opts RecoverOptions) (*SyncReport, error) {
	const op = "recover"
	if src == nil {
		return nil, vfs.NewError(vfs.CodeInvalidPath, op, vfs.Root, "nil source Dir")
	}
	j, err := readJournal(journalPath, true)
	if errors.Is(err, errGone) || errors.Is(err, fs.ErrNotExist) {
		return &SyncReport{}, nil // finished by another Recover meanwhile
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
		return &SyncReport{}, nil
	}
	rep := &SyncReport{Checkout: j.checkout}
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
func (j *readJ) rollForward(ctx context.Context, src *dir.Dir, opts RecoverOptions, rep *SyncReport) error {
	rootFd, err := unix.Open(j.checkout, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		rootFd = -1
	} else {
		defer unix.Close(rootFd)
	}
	a := &applier{src: src, rootFd: rootFd, onReject: opts.OnReject, plan: j.plan, j: &journal{f: j.f}}
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
func removeSyncedCheckout(rep *SyncReport, p string) {
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
