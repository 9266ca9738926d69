//go:build linux

package syncback

import (
	"bufio"
	"bytes"
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

	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/vfs"
)

// EnvStateDir names the environment variable that sets capfs's state
// directory; sync journals go in its "journal" subdirectory.
const EnvStateDir = "CAPFS_STATE_DIR"

// journalSuffix ends the name of every journal file.
const journalSuffix = ".journal"

// DefaultJournalDir returns where [Run] keeps its journals when
// [Options].JournalDir is "": $CAPFS_STATE_DIR/journal, else
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
	Kind    materialize.ChangeKind `json:"kind"`
	Path    string                 `json:"path"`
	Old     *materialize.Entry     `json:"old,omitempty"`
	New     *materialize.Entry     `json:"new,omitempty"`
	Perm    fs.FileMode            `json:"perm,omitempty"`
	Chmod   bool                   `json:"chmod,omitempty"`
	Force   bool                   `json:"force,omitempty"`
	Gone    bool                   `json:"gone,omitempty"`
	Parents []string               `json:"parents,omitempty"`
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
	Label     string    // Options.Label of the sync
	Checkout  string    // the checkout it reads new contents from (host-private)
	Created   time.Time // when the sync wrote it
	Committed bool      // the plan was complete: changes may have been applied
	Busy      bool      // a sync or a Recover holds it now
}

// Pending lists the journals in jdir ("" for DefaultJournalDir())
// whose sync did not finish, oldest first. A journal held by a running sync
// is listed with Busy set.
func Pending(jdir string) ([]JournalInfo, error) {
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
		s := &step{c: materialize.Change{Kind: js.Kind, Path: js.Path, Old: js.Old, New: js.New}, perm: js.Perm, chmod: js.Chmod,
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
