//go:build linux

package syncback

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/capfs/capfs/materialize"
	"github.com/capfs/capfs/vfs"
)

// decide settles what is applied: conflicts under ConflictKeepTheirs are the
// source's, and steps depending on a step not applied are blocked; under
// RejectAbort any refusal or unsettled conflict aborts every pending step. It
// returns the error to report (nil when nothing is refused or in conflict).
func decide(plan []*step, opts Options) error {
	if opts.Conflict == ConflictKeepTheirs {
		for _, s := range plan {
			if s.state == stConflict {
				s.state, s.reason = stTheirs, "the source's version kept ("+s.reason+")"
			}
		}
	}
	var refused []materialize.Refusal
	var conflicts []string
	for _, s := range plan {
		switch s.state {
		case stRefused:
			refused = append(refused, materialize.Refusal{Change: s.c, Code: s.code, Reason: s.reason})
		case stConflict:
			conflicts = append(conflicts, s.c.Path)
		}
	}
	block(plan)
	var err error
	switch {
	case len(refused) > 0:
		err = refusalError("syncback", refused, len(conflicts))
	case len(conflicts) > 0:
		err = listError(vfs.CodeConflict, "syncback", "changed in the source since the checkout", conflicts)
	}
	if err != nil && opts.OnReject == RejectAbort {
		for _, s := range plan {
			if s.state == stPending || s.state == stBlocked {
				s.state, s.code, s.reason = stAborted, vfs.CodeOf(err), "not applied: other changes were refused or in conflict, and the sync was aborted"
			}
		}
	}
	return err
}

// block marks blocked the pending steps that depend on a step not applied: a
// step beneath a directory that is not created, a removal of a directory above
// a path that stays. It repeats until nothing more is blocked.
func block(plan []*step) {
	for {
		notMade, kept := notApplied(plan)
		changed := false
		for _, s := range plan {
			if s.state != stPending || s.started {
				continue
			}
			if why := blockedBy(s, notMade, kept); why != "" {
				s.state, s.code, s.reason = stBlocked, vfs.CodeConflict, why
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

// notApplied maps what the steps not applied leave as it is: notMade, each
// directory not created, and kept, every path that stays and every directory
// above one, to the step's path that caused it.
func notApplied(plan []*step) (notMade, kept map[string]string) {
	notMade, kept = map[string]string{}, map[string]string{}
	for _, s := range plan {
		switch s.state {
		case stPending, stApplied, stSettled:
			continue
		}
		if s.createsDir() || s.c.Kind == materialize.TypeChanged {
			notMade[s.c.Path] = s.c.Path
		}
		for p := path.Dir(s.c.Path); p != "." && p != "/"; p = path.Dir(p) {
			if _, ok := kept[p]; !ok {
				kept[p] = s.c.Path
			}
		}
		kept[s.c.Path] = s.c.Path
	}
	return notMade, kept
}

// blockedBy is why s cannot be applied (see notApplied), "" when it can: a
// directory above it is not made, or it removes a directory above a path
// that stays.
func blockedBy(s *step, notMade, kept map[string]string) string {
	if s.c.Kind != materialize.Deleted {
		for p := path.Dir(s.c.Path); p != "." && p != "/"; p = path.Dir(p) {
			if q, ok := notMade[p]; ok {
				return "not applied: it depends on " + q + ", which is not applied"
			}
		}
	}
	if s.removes() {
		if q, ok := kept[s.c.Path]; ok && q != s.c.Path {
			return "not applied: " + q + " stays, and is inside it"
		}
	}
	return ""
}

// fillReport lists every step of the plan in the report's views.
func fillReport(rep *Report, plan []*step) {
	rep.Refused, rep.Conflicts, rep.Skipped, rep.Settled, rep.NotApplied = nil, nil, nil, nil, nil
	for _, s := range plan {
		if s.conflict {
			rep.Conflicts = append(rep.Conflicts, s.c.Path)
		}
		var cause Cause
		switch s.state {
		case stSettled:
			rep.Settled = append(rep.Settled, s.c)
			rep.Skipped = append(rep.Skipped, s.c)
			continue
		case stPending:
			continue // a dry run's
		case stApplied:
			continue // listed in order by the applier
		case stRefused:
			rep.Refused = append(rep.Refused, materialize.Refusal{Change: s.c, Code: s.code, Reason: s.reason})
			cause = CauseRefused
		case stConflict:
			cause = CauseConflict
		case stTheirs:
			rep.Skipped = append(rep.Skipped, s.c)
			cause = CauseTheirs
		case stBlocked:
			cause = CauseDepends
		case stAborted:
			cause = CauseAborted
		case stFailed:
			cause = CauseFailed
		case stStopped:
			cause = CauseStopped
		}
		code := s.code
		if code == "" {
			code = vfs.CodeConflict
		}
		rep.NotApplied = append(rep.NotApplied, Unapplied{s.c, cause, code, s.reason})
	}
	sort.Strings(rep.Conflicts)
}

func paths(cs []materialize.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}

// listError is an error naming paths: the first as its Path, all (up to ten) in
// its message.
func listError(code vfs.Code, op, what string, ps []string) error {
	const show = 10
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", what)
	for i, p := range ps {
		if i == show {
			fmt.Fprintf(&b, ", and %d more", len(ps)-show)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
	}
	first := ""
	if len(ps) > 0 {
		first = ps[0]
	}
	e := vfs.NewError(code, op, vfs.Root, b.String())
	e.Path = first
	return e
}

// refusalError is the error of a sync with refusals: the first refusal's code,
// every refused path with its reason, and how many conflicts there were too.
func refusalError(op string, rs []materialize.Refusal, conflicts int) error {
	ps := make([]string, len(rs))
	for i, r := range rs {
		ps[i] = r.Change.Path + " (" + string(r.Code) + ": " + r.Reason + ")"
	}
	what := fmt.Sprintf("%d change(s) refused", len(rs))
	if conflicts > 0 {
		what += fmt.Sprintf(" and %d in conflict", conflicts)
	}
	e := listError(rs[0].Code, op, what, ps).(*vfs.Error)
	e.Path = rs[0].Change.Path
	return e
}
