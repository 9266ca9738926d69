//go:build linux

package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/materialize/sandbox"
	"github.com/capfs/capfs/materialize/syncback"
)

// Mount is one Dir the sandbox sees, at Target.
type Mount struct {
	// Name names the mount in errors and reports ("grant g1", a path).
	Name string
	// Dir is what the sandbox sees: its policy decides every read and
	// every change, its audit trail records them.
	Dir *dir.Dir
	// Target is where it appears: an absolute, clean path other than "/",
	// neither holding nor inside another mount's.
	Target string
	// Writable binds it read-write; its changes are synced back through Dir.
	Writable bool
	// Lazy, if not nil, serves Dir through a lazy mount ([StartLazy]) made
	// with these options, instead of a checkout.
	Lazy *LazyOptions
	// Checkout is the checkout's options (ReadOnly is set from Writable).
	Checkout materialize.Options
	// Sync is the options of [Session.SyncBack] for a writable mount.
	Sync syncback.Options
	// Work, if not "", is where Dir comes from by the caller's name (capfs
	// run: a namespace path). [Run] then records the mount's checkout when
	// it is kept past the run ([Record]), so a later sync-back finds it.
	Work string
}

// Spec is one sandboxed run: the mounts, and the command to run on them.
type Spec struct {
	Mounts []Mount
	// Launch is the command; [Run] adds the mounts' binds to its Mounts.
	Launch sandbox.Launch
	// Runner runs the launch (nil: [sandbox.Default], bubblewrap required).
	Runner *sandbox.Runner
	// Tag, if not "", tags the audit events of the checkouts (Tag+" checkout")
	// and of Run's sync-backs (Tag+" wrappers=<names>", naming the wrappers
	// that ran the command).
	Tag string
	// Ready, if not nil, is called as each mount's view is made, in order (i
	// is its index in Mounts): to print what it left out, to keep it. An error
	// stops [Start].
	Ready func(i int, v *View) error
}

// View is how one [Mount] reaches the sandbox: a checkout or a lazy mount.
type View struct {
	Mount Mount
	// Tree is the checkout; for a lazy mount, the Tree of its changes once
	// [Session.Finish] made it (nil before, and for a read-only one).
	Tree *materialize.Tree
	// Lazy is the lazy mount (nil for a checkout).
	Lazy *Lazy
	// Synced says [Session.SyncBack] ran on the mount; Sync is its report
	// (nil when it failed before it could make one).
	Synced bool
	Sync   *syncback.Report
	// KeptID is the id of the record of the kept checkout ([Record]), once
	// made.
	KeptID string
}

// Bind is what the sandbox binds for v.
func (v *View) Bind() sandbox.Mount {
	if v.Lazy != nil {
		return sandbox.Mount{Source: v.Lazy.Mountpoint, Target: v.Mount.Target, Writable: v.Mount.Writable}
	}
	t := v.Tree
	m := sandbox.Mount{Source: t.Path(), Target: v.Mount.Target, Writable: v.Mount.Writable}
	if m.Writable {
		m.ReadOnly = t.ReadOnlyPaths()
	}
	if t.Bound() {
		m.File = t.BindFile()
	}
	return m
}

// MountError is the failure of one step on one mount.
type MountError struct {
	Op    string // "checkout", "lazy mount", "lazy finish", "sync-back" or "record"
	Name  string // the mount's Name
	Index int    // the mount's index in Spec.Mounts
	Err   error
}

func (e *MountError) Error() string { return e.Op + " of " + e.Name + ": " + e.Err.Error() }

// Unwrap returns the step's error.
func (e *MountError) Unwrap() error { return e.Err }

// Session is a run's mounts, made by [Start] and removed by [Session.Close].
//
// Between the two, the caller runs the command ([Session.Launch]), then
// calls [Session.Finish] and reviews the changes: [Session.SyncBack],
// or its own review of each [View]'s Tree. [Run] does all of it.
type Session struct {
	spec  Spec
	views []*View
	binds []sandbox.Mount
}

// Start makes each mount's view, in order: a checkout or a lazy mount.
//
// On failure it removes what it made and returns a [*MountError] naming the
// mount (or an error wrapping [fs.ErrInvalid] for a bad Target).
func Start(ctx context.Context, spec *Spec) (*Session, error) {
	if err := checkTargets(spec.Mounts); err != nil {
		return nil, err
	}
	s := &Session{spec: *spec}
	for i := range spec.Mounts {
		v, err := s.start(ctx, i)
		if err == nil && spec.Ready != nil {
			err = spec.Ready(i, v)
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		s.binds = append(s.binds, v.Bind())
	}
	return s, nil
}

// start makes mount i's view and adds it to s.
func (s *Session) start(ctx context.Context, i int) (*View, error) {
	m := s.spec.Mounts[i]
	v := &View{Mount: m}
	if m.Lazy != nil {
		lw, err := StartLazy(ctx, m.Dir, *m.Lazy)
		if err != nil {
			return nil, &MountError{Op: "lazy mount", Name: m.Name, Index: i, Err: err}
		}
		v.Lazy = lw
	} else {
		co := m.Checkout
		co.ReadOnly = !m.Writable
		t, err := materialize.Checkout(s.tagged(ctx, " checkout"), m.Dir, co)
		if err != nil {
			return nil, &MountError{Op: "checkout", Name: m.Name, Index: i, Err: err}
		}
		v.Tree = t
	}
	s.views = append(s.views, v)
	return v, nil
}

// tagged is ctx with the audit tag Spec.Tag+suffix ("" Tag: ctx).
func (s *Session) tagged(ctx context.Context, suffix string) context.Context {
	if s.spec.Tag == "" {
		return ctx
	}
	return audit.WithRequestTag(ctx, s.spec.Tag+suffix)
}

// checkTargets refuses a target that is not an absolute clean path below "/",
// and two that nest.
func checkTargets(ms []Mount) error {
	for i, m := range ms {
		if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
			return fmt.Errorf("run: %s: target %q must be a clean absolute path below /: %w", m.Name, m.Target, fs.ErrInvalid)
		}
		for _, o := range ms[:i] {
			if Nested(o.Target, m.Target) {
				return fmt.Errorf("run: %s and %s would be bound at nested paths: %w", o.Name, m.Name, fs.ErrInvalid)
			}
		}
	}
	return nil
}

// Nested reports whether sandbox paths a and b are the same or one holds
// the other: the sandbox cannot bind both.
func Nested(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// Views are the mounts' views, in the order of Spec.Mounts.
func (s *Session) Views() []*View { return s.views }

// Binds are what [Session.Launch] binds, one per mount, in order: the
// session's own, which the caller may change (redirect a Source through a
// mount of its own) before the launch.
func (s *Session) Binds() []sandbox.Mount { return s.binds }

// Launch runs l under runner (nil: [sandbox.Default]) with the binds added
// to l.Mounts, and returns the command's result.
func (s *Session) Launch(ctx context.Context, runner *sandbox.Runner, l *sandbox.Launch) (*sandbox.Result, error) {
	if runner == nil {
		runner = sandbox.Default()
	}
	launch := *l
	launch.Mounts = append(slices.Clip(l.Mounts), s.binds...)
	return runner.Run(ctx, &launch)
}

// Finish, once the command exited, stops each lazy mount and makes the Tree
// of a writable one's changes.
//
// It does not stop at a failure: each is a [*MountError] (Op "lazy
// finish"), and that mount's changes stay in its upper directory
// ([Lazy.UpperDir]), which Close leaves.
func (s *Session) Finish(ctx context.Context) error {
	var errs []error
	for i, v := range s.views {
		if v.Lazy == nil || v.Tree != nil {
			continue
		}
		if !v.Mount.Writable {
			errs = append(errs, v.Lazy.Stop())
			continue
		}
		t, err := v.Lazy.Finish(ctx, v.Mount.Dir)
		if err != nil {
			errs = append(errs, &MountError{Op: "lazy finish", Name: v.Mount.Name, Index: i, Err: err})
			continue
		}
		v.Tree = t
	}
	return errors.Join(errs...)
}

// SyncBack brings each writable mount's changes back through its Dir
// ([syncback.Run] with Mount.Sync), recording each report in
// its [View].
//
// A sync-back that fails, or leaves changes not applied, is a
// [*MountError] (Op "sync-back"); the others go on. What is not applied
// stays in the kept checkout its report names.
func (s *Session) SyncBack(ctx context.Context) error {
	var errs []error
	for i, v := range s.views {
		if !v.Mount.Writable || v.Tree == nil {
			continue
		}
		sr, err := syncback.Run(ctx, v.Tree, v.Mount.Sync)
		v.Synced, v.Sync = true, sr
		if err == nil && sr != nil && len(sr.NotApplied) > 0 {
			err = fmt.Errorf("%d changes not applied: %w", len(sr.NotApplied), fs.ErrPermission)
		}
		if err != nil {
			errs = append(errs, &MountError{Op: "sync-back", Name: v.Mount.Name, Index: i, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Close removes every checkout and lazy mount of s, but those kept
// ([materialize.Tree.Keep], a sync-back that left changes) and the upper
// directory of a lazy mount Finish could not turn into a Tree.
func (s *Session) Close() error {
	var errs []error
	for _, v := range s.views {
		if v.Tree != nil {
			errs = append(errs, v.Tree.Close())
		}
		if v.Lazy != nil {
			errs = append(errs, v.Lazy.Close())
		}
	}
	s.views = nil
	return errors.Join(errs...)
}

// Report says what [Run] did.
type Report struct {
	Mounts []MountReport
	// Result is the command's (nil when it could not be launched).
	Result *sandbox.Result
}

// MountReport is what Run did with one mount.
type MountReport struct {
	Name     string
	Target   string
	Writable bool
	Lazy     bool
	// Skipped lists what the checkout left out of the sandbox, and why.
	Skipped []materialize.Skip
	// Synced says a sync-back of the mount ran; Sync is its report (nil
	// when it failed before it could make one).
	Synced bool
	Sync   *syncback.Report
	// Kept is the host path of the mount's checkout (or lazy upper) when it
	// is kept past the run: what a sync-back did not apply, or
	// [materialize.Tree.Keep].
	Kept string
	// KeptID is the id of its record for a later sync-back ([Record]), ""
	// when none was made (no Mount.Work).
	KeptID string
}

// Report describes s's mounts as they are now.
func (s *Session) Report() *Report {
	rep := &Report{}
	for _, v := range s.views {
		mr := MountReport{Name: v.Mount.Name, Target: v.Mount.Target, Writable: v.Mount.Writable, Lazy: v.Lazy != nil, Synced: v.Synced, Sync: v.Sync}
		if v.Lazy == nil {
			mr.Skipped = v.Tree.Skipped()
		}
		if v.Tree != nil && v.Tree.Kept() {
			mr.Kept, mr.KeptID = v.Tree.Path(), v.KeptID
		}
		rep.Mounts = append(rep.Mounts, mr)
	}
	return rep
}

// Run runs spec's command on its mounts and syncs the writable ones back.
//
// It is [Start], [Session.Launch] (spec.Launch run by spec.Runner),
// [Session.Finish], [Session.SyncBack] and
// [Session.Close]. It returns a nil Report with Start's error; once the
// mounts are made, the Report with any error: the launch's (then nothing
// is synced back), or the joined errors of Finish and SyncBack.
func Run(ctx context.Context, spec *Spec) (*Report, error) {
	s, err := Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res, err := s.Launch(ctx, spec.Runner, &spec.Launch)
	ferr := s.Finish(ctx)
	if err == nil {
		err = s.SyncBack(s.tagged(ctx, " wrappers="+strings.Join(res.Wrappers, ",")))
	}
	if ferr != nil {
		err = errors.Join(err, ferr)
	}
	if rerr := s.record(&spec.Launch, res); rerr != nil {
		err = errors.Join(err, rerr)
	}
	rep := s.Report()
	rep.Result = res
	return rep, err
}

// record records, for a later sync-back, each kept checkout of a mount with
// a Work name ([Record]), as made by l, which ended with res.
func (s *Session) record(l *sandbox.Launch, res *sandbox.Result) error {
	var errs []error
	for i, v := range s.views {
		if v.Tree == nil || !v.Tree.Kept() || v.Mount.Work == "" || v.KeptID != "" {
			continue
		}
		rec := Kept{Work: v.Mount.Work, Label: v.Mount.Sync.Label, Command: append([]string{l.Path}, l.Args...),
			Created: time.Now(), Reason: "not all changes were applied"}
		if res != nil {
			rec.Status = res.ExitCode
		}
		rec, err := Record(v.Tree, rec)
		if err != nil {
			errs = append(errs, &MountError{Op: "record", Name: v.Mount.Name, Index: i, Err: err})
			continue
		}
		v.KeptID = rec.ID
	}
	return errors.Join(errs...)
}
