package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/audit"
)

const auditLong = `Read the audit log: its rotated files first (compressed or not), then the
current one, each event as one line, plain and compact records alike.

  capfs audit                      every event, in the log's order
  capfs audit --runs               the runs (capfs run and capfs sync) in the log
  capfs audit --run last --changes what the last run changed: each path it
                                   created, wrote, removed, renamed or re-moded,
                                   with the decision (ok, denied, failed)

Each line: time, outcome, op, path (-> destination), then the error code and
the deciding rule when there are any. --json prints the events as JSON Lines
instead. A line or file that cannot be read (a crash cut it short) is reported
on stderr and skipped, and so is the rest of a compressed file that
decompresses past 16 times the rotation size (--audit-max-size, at least the
default 16MiB): no rotated file holds that much. The log is --audit's (or the configuration's, or the
default one).`

// auditView is what capfs audit shows.
type auditView struct {
	run     string // a run (run:ID); "last": the last run
	changes bool
	runs    bool
	json    bool
	read    []audit.ReadOption // how each file is read (its decompressed bound)
}

// auditReadFloor is the rotation size auditReadBound assumes at least (a
// variable only for tests, which bound smaller bombs).
var auditReadFloor = int64(defaultAuditMaxSize)

// auditReadBound bounds what one compressed file of the log may decompress
// to: audit.DecompressFactor times the rotation size (--audit-max-size when
// larger than the default, else the default: a log may have been written
// with the default), so 256 MiB by default. A zstd bomb among the rotated
// files is read that far, reported and skipped.
func auditReadBound(maxSize string) audit.ReadOption {
	size := auditReadFloor
	if q, err := parseQuota(maxSize); maxSize != "" && err == nil && q > size {
		size = q
	}
	return audit.MaxDecompressed(size * audit.DecompressFactor)
}

func newAuditCmd(o *globalOptions) *cobra.Command {
	var v auditView
	cmd := &cobra.Command{
		Use:   "audit [--run TAG|last] [--changes] [--runs] [--json]",
		Short: "Read the audit log (rotated and compressed files included): what a run changed",
		Long:  auditLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := o.auditLogPath()
			if err != nil {
				return err
			}
			v.read = []audit.ReadOption{auditReadBound(o.auditMaxSize)}
			return showAudit(cmd.OutOrStdout(), cmd.ErrOrStderr(), path, v)
		},
	}
	f := cmd.Flags()
	f.StringVar(&v.run, "run", "", "only the events of this run (run:ID, from --runs or capfs run's messages), or last for the last run")
	f.BoolVar(&v.changes, "changes", false, "only the calls that change something (create, write, mkdir, remove, rename, ...), refused ones included")
	f.BoolVar(&v.runs, "runs", false, "list the runs in the log: tag, start, events, changes, refusals")
	f.BoolVar(&v.json, "json", false, "print the events as JSON Lines")
	return cmd
}

// auditLogPath is the log capfs audit reads: --audit, else the
// configuration's, else the default.
func (o *globalOptions) auditLogPath() (string, error) {
	p := o.auditFile
	if p == "" && o.configFile != "" {
		cfg, err := loadConfig(o.env, o.configFile)
		if err != nil {
			return "", err
		}
		p = cfg.audit
	}
	switch {
	case p == "":
		return defaultAuditPath(o.env)
	case auditKeywords[p]:
		return "", usageErrorf("--audit %s: no log to read", p)
	}
	return o.env.abs(p), nil
}

// runOf is the run an event's tag names: its first word when that is
// run:ID or sync:ID (the tags runTag makes, and run --grants' "run:ID
// checkout"), else "".
func runOf(tag string) string {
	id, _, _ := strings.Cut(tag, " ")
	if strings.HasPrefix(id, "run:") || strings.HasPrefix(id, "sync:") {
		return id
	}
	return ""
}

// changeOps are the ops that change the tree.
var changeOps = map[string]bool{
	"write": true, "create": true, "mkdir": true, "remove": true, "rename": true, "copy": true,
	"symlink": true, "link": true, "chmod": true, "chtimes": true, "chown": true,
}

// isChange reports whether e changed something or was refused a change (a
// plan's check included).
func isChange(e audit.Event) bool {
	if changeOps[e.Op] {
		return true
	}
	op, ok := strings.CutPrefix(e.Op, "check.")
	return ok && changeOps[op] && e.Outcome != audit.OK
}

// showAudit prints the log at path as v asks, reading it once (--run last
// reads its newest file with a run first, to find that run). A run's events
// are printed in time order through a window of runWindow events, not all
// held.
func showAudit(stdout, stderr io.Writer, path string, v auditView) error {
	report := func(file string, err error) error {
		fmt.Fprintf(stderr, "capfs: audit: %s: %v (skipped)\n", filepath.Base(file), err)
		return nil
	}
	if v.runs {
		return listRuns(stdout, path, report, v.read...)
	}
	if v.run == "last" {
		last, err := lastRun(path, v.read...)
		if err != nil {
			return failed(err)
		}
		if last == "" {
			return failed(errors.New("audit log: no run in the log"))
		}
		v.run = last
	}
	w := bufio.NewWriter(stdout)
	run := &runEvents{print: func(e audit.Event) { writeEvent(w, e, v.json) }}
	err := audit.ScanLog(path, func(e audit.Event) error {
		switch {
		case v.changes && !isChange(e):
		case v.run == "":
			writeEvent(w, e, v.json)
		case runOf(e.Tag) == v.run:
			run.add(e)
		}
		return nil
	}, report, v.read...)
	if err != nil {
		return failed(err)
	}
	run.flush()
	if v.run != "" {
		fmt.Fprintf(stderr, "capfs: audit: %s: %s\n", v.run, run.summary(v.changes))
	}
	return w.Flush()
}

// runWindow is how many events of one run capfs audit --run holds to print
// them in time order. Writers append nearly in time order (compact records
// of concurrent calls are the exception, a few hundred events apart at most),
// so a window of this many sorts them; an event later than that by more
// shows in log order.
const runWindow = 4096

// runEvents prints one run's events in time order through a window of
// runWindow events (a heap, earliest first, log order among equal times),
// and counts them by outcome.
type runEvents struct {
	print  func(audit.Event)
	heap   []seqEvent
	seq    int
	counts map[audit.Outcome]int
	most   int // the most events held at once (tests)
}

type seqEvent struct {
	e   audit.Event
	seq int
}

func (r *runEvents) less(i, j int) bool {
	a, b := r.heap[i], r.heap[j]
	if c := a.e.Time.Compare(b.e.Time); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// add takes e into the window, printing the earliest event when it is full.
func (r *runEvents) add(e audit.Event) {
	if r.counts == nil {
		r.counts = map[audit.Outcome]int{}
	}
	r.counts[e.Outcome]++
	r.seq++
	r.heap = append(r.heap, seqEvent{e, r.seq})
	for i := len(r.heap) - 1; i > 0 && r.less(i, (i-1)/2); i = (i - 1) / 2 {
		r.heap[i], r.heap[(i-1)/2] = r.heap[(i-1)/2], r.heap[i]
	}
	r.most = max(r.most, len(r.heap))
	if len(r.heap) >= runWindow {
		r.pop()
	}
}

// pop prints and removes the earliest event held.
func (r *runEvents) pop() {
	r.print(r.heap[0].e)
	n := len(r.heap) - 1
	r.heap[0] = r.heap[n]
	r.heap = r.heap[:n]
	for i := 0; ; {
		m := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n && r.less(c, m) {
				m = c
			}
		}
		if m == i {
			return
		}
		r.heap[i], r.heap[m] = r.heap[m], r.heap[i]
		i = m
	}
}

// flush prints the events still held.
func (r *runEvents) flush() {
	for len(r.heap) > 0 {
		r.pop()
	}
}

// summary counts the run's events by outcome.
func (r *runEvents) summary(changes bool) string {
	total := r.seq
	what := plural(total, "event", "events")
	if changes {
		what = plural(total, "change", "changes")
	}
	return fmt.Sprintf("%d %s (%d ok, %d denied, %d failed)", total, what, r.counts[audit.OK], r.counts[audit.Denied], r.counts[audit.Failed])
}

// writeEvent prints e as one line.
func writeEvent(w io.Writer, e audit.Event, asJSON bool) {
	if asJSON {
		w.Write(audit.AppendJSON(nil, e))
		return
	}
	p := e.Path
	if p == "" {
		p = e.GuestPath
	}
	line := fmt.Sprintf("%s  %-6s  %-8s %s", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), e.Outcome, e.Op, show(p))
	if e.Dest != "" {
		line += " -> " + show(e.Dest)
	}
	if e.Count > 0 {
		line += fmt.Sprintf("  (%d calls)", e.Count)
	}
	if e.Code != "" {
		line += "  " + e.Code
	}
	if e.Rule != "" {
		line += "  rule " + e.Rule
	}
	fmt.Fprintln(w, line)
}

// lastRun is the run of the latest run event in the newest file of the log
// that has one: rotated files hold events older than the files after them,
// so this reads that file (usually the current one), not the whole log.
func lastRun(path string, read ...audit.ReadOption) (string, error) {
	files, err := audit.LogFiles(path)
	if err != nil {
		return "", err
	}
	for i := len(files) - 1; i >= 0; i-- {
		var last string
		var at time.Time
		err := audit.ScanLogFile(files[i], func(e audit.Event) error {
			if r := runOf(e.Tag); r != "" && !e.Time.Before(at) {
				last, at = r, e.Time
			}
			return nil
		}, nil, read...)
		if err != nil || last != "" {
			return last, err
		}
	}
	return "", nil
}

// runStats is one run in capfs audit --runs.
type runStats struct {
	tag, subject        string
	start               time.Time
	events, changes, no int
}

// listRuns prints the runs in the log, oldest first.
func listRuns(stdout io.Writer, path string, bad func(string, error) error, read ...audit.ReadOption) error {
	byTag := map[string]*runStats{}
	err := audit.ScanLog(path, func(e audit.Event) error {
		run := runOf(e.Tag)
		if run == "" {
			return nil
		}
		r := byTag[run]
		if r == nil {
			r = &runStats{tag: run, subject: e.Subject, start: e.Time}
			byTag[run] = r
		}
		if e.Time.Before(r.start) {
			r.start = e.Time
		}
		r.events++
		if isChange(e) {
			r.changes++
		}
		if e.Outcome == audit.Denied {
			r.no++
		}
		return nil
	}, bad, read...)
	if err != nil {
		return failed(err)
	}
	runs := make([]*runStats, 0, len(byTag))
	for _, r := range byTag {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *runStats) int { return a.start.Compare(b.start) })
	w := bufio.NewWriter(stdout)
	for _, r := range runs {
		fmt.Fprintf(w, "%s  %s  %s  %d events, %d changes, %d denied\n", r.tag, r.start.Local().Format(time.DateTime), r.subject, r.events, r.changes, r.no)
	}
	return w.Flush()
}
