package dir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/fsnotify/fsnotify"

	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// WatchOp is what happened to a watched path.
type WatchOp uint8

// The operations. Several may be set on one coalesced event.
const (
	WatchCreate WatchOp = 1 << iota
	WatchWrite
	WatchRemove
	WatchRename // the path was renamed away (its new name gets WatchCreate)
	WatchChmod
	// WatchRescan means events were lost (the kernel's queue overflowed, or the
	// watcher's bounded buffer filled while the consumer was slow): the
	// consumer should list the tree again. Path is "." .
	WatchRescan
)

func (o WatchOp) String() string {
	var parts []string
	for _, x := range []struct {
		op   WatchOp
		name string
	}{{WatchCreate, "create"}, {WatchWrite, "write"}, {WatchRemove, "remove"}, {WatchRename, "rename"}, {WatchChmod, "chmod"}, {WatchRescan, "rescan"}} {
		if o&x.op != 0 {
			parts = append(parts, x.name)
		}
	}
	return strings.Join(parts, "|")
}

// WatchEvent is one change, named by its path relative to the watched Dir.
type WatchEvent struct {
	Op   WatchOp
	Path string
}

// WatchOptions configure Watch.
type WatchOptions struct {
	// Patterns are doublestar patterns relative to the Dir ("**/*.go"); an
	// event is delivered if its path matches one. None means every path.
	Patterns []string
	// Buffer is how many distinct paths may wait for the consumer (0: 4096).
	// Events for a path already waiting are merged into it (their Ops or'ed);
	// when the buffer is full, everything waiting is dropped and replaced by
	// one WatchRescan. Memory is bounded by Buffer whatever the event rate.
	Buffer int
}

// Watch reports changes beneath this Dir until ctx ends, Close is called, or
// the capability is revoked (a grant that expires is revoked), whichever
// comes first; then Events is closed and Err says why.
//
// Sources: when the Dir's backend is a host directory (vfs.HostPather, the
// physical backend), the kernel's inotify, through fsnotify, with a watch on
// every directory (new directories are added as they appear; symlinks are not
// followed); otherwise the ChangeFeed installed among the Dir's hooks
// (WithHooks(feed)), which sees every successful change made through any Dir
// that has it. Without either, Watch fails with not_supported.
//
// Every event is decided before delivery: the Dir's policy is asked, as for a
// Stat of the path (with Purpose PurposeWatch), and an event whose path it
// refuses, or would ask about, is dropped, so no event ever names a path the
// policy hides. Watch itself is one call decided as a List of the Dir
// (audited); events are not audited one by one.
//
// Not guaranteed: events describe names, not contents (a write through a
// hard link made outside capfs names only the path inotify saw); with
// inotify, changes made between a new directory's creation and its watch
// being added are reported only as that directory's WatchCreate.
func (d *Dir) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	ctx = withPurpose(ctx, PurposeWatch)
	if err := d.Check(ctx, policy.OpList, ".", "", -1); err != nil {
		return nil, vfs.Reop(err, "Watch")
	}
	for _, p := range opts.Patterns {
		if !doublestar.ValidatePattern(p) {
			return nil, errAt(vfs.CodeInvalidPath, "Watch", p, "", "invalid pattern")
		}
	}
	buf := opts.Buffer
	if buf <= 0 {
		buf = 4096
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{
		d: d, ctx: ctx, cancel: cancel, patterns: opts.Patterns, max: buf,
		out: make(chan WatchEvent), pending: map[string]WatchOp{}, wake: make(chan struct{}, 1),
	}
	var err error
	if hp, ok := d.s.b.(vfs.HostPather); ok {
		if root, ok := hp.HostPath(); ok {
			err = w.startInotify(root)
			goto started
		}
	}
	if f := d.s.env.feed(); f != nil {
		w.startFeed(f)
	} else {
		err = errAt(vfs.CodeNotSupported, "Watch", ".", "", "the backend has no change stream: install a dir.ChangeFeed hook")
	}
started:
	if err != nil {
		cancel()
		return nil, err
	}
	go w.deliver()
	return w, nil
}

// Watcher is a running Watch. Use Events, then Close.
type Watcher struct {
	d        *Dir
	ctx      context.Context
	cancel   context.CancelFunc
	patterns []string
	max      int
	out      chan WatchEvent
	wake     chan struct{}
	stopSrc  func()

	mu      sync.Mutex
	pending map[string]WatchOp
	order   []string
	rescan  bool
	err     error
	done    bool
}

// Events returns the channel events arrive on; it is closed when the watch ends.
func (w *Watcher) Events() <-chan WatchEvent { return w.out }

// Err returns why the watch ended (nil while it runs, or after Close): the
// context's error, or revoked.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close ends the watch. It is idempotent.
func (w *Watcher) Close() error {
	w.cancel()
	return nil
}

func (w *Watcher) end(err error) {
	w.mu.Lock()
	if w.err == nil && !w.done {
		w.err = err
	}
	w.mu.Unlock()
	w.cancel()
}

// visible decides whether an event on rel (relative to the Dir) may be
// delivered: pattern, then the policy, as a Stat.
func (w *Watcher) visible(rel string) bool {
	if len(w.patterns) > 0 {
		ok := false
		for _, p := range w.patterns {
			if m, _ := doublestar.Match(p, rel); m {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	s := &w.d.s
	if !s.env.customPolicy {
		return true
	}
	p, err := vfs.ParseGuest(rel)
	if err != nil {
		return false
	}
	r := &policy.Request{ID: newRequestID(), Subject: s.env.subject, Op: policy.OpStat, Path: s.treePath(p), GuestPath: printable(rel), Size: -1}
	return s.env.policy.Decide(w.ctx, r).Effect == policy.Allow
}

// post queues an event, coalescing by path, bounded by w.max.
func (w *Watcher) post(op WatchOp, rel string) {
	if s := &w.d.s; s.gate.isRevoked() {
		w.end(errAt(vfs.CodeRevoked, "Watch", ".", "", "the capability was revoked"))
		return
	}
	if op != WatchRescan && !w.visible(rel) {
		return
	}
	w.mu.Lock()
	switch {
	case op == WatchRescan:
		w.overflowLocked()
	case w.pending[rel] != 0:
		w.pending[rel] |= op
	case len(w.order) >= w.max:
		w.overflowLocked()
	default:
		w.pending[rel] = op
		w.order = append(w.order, rel)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Watcher) overflowLocked() {
	clear(w.pending)
	w.order = w.order[:0]
	w.rescan = true
}

// next takes the oldest waiting event.
func (w *Watcher) next() (WatchEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rescan {
		w.rescan = false
		return WatchEvent{Op: WatchRescan, Path: "."}, true
	}
	if len(w.order) == 0 {
		return WatchEvent{}, false
	}
	rel := w.order[0]
	w.order = w.order[1:]
	op := w.pending[rel]
	delete(w.pending, rel)
	if len(w.order) == 0 {
		w.order = nil // let the backing array go after a storm
	}
	return WatchEvent{Op: op, Path: rel}, true
}

// deliver hands waiting events to the consumer, and checks for revocation.
func (w *Watcher) deliver() {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		if w.stopSrc != nil {
			w.stopSrc()
		}
		w.mu.Lock()
		if w.err == nil {
			w.err = w.ctx.Err()
		}
		w.done = true
		w.mu.Unlock()
		close(w.out)
	}()
	for {
		if w.d.s.gate.isRevoked() {
			w.end(errAt(vfs.CodeRevoked, "Watch", ".", "", "the capability was revoked"))
			return
		}
		ev, ok := w.next()
		if !ok {
			select {
			case <-w.ctx.Done():
				return
			case <-w.wake:
			case <-tick.C:
				w.checkLive()
			}
			continue
		}
	send:
		for {
			select {
			case <-w.ctx.Done():
				return
			case w.out <- ev:
				break send
			case <-w.wake:
				// An overflow while ev waited for the consumer: the rescan
				// supersedes ev (and everything before it); send that instead.
				w.mu.Lock()
				superseded := w.rescan && ev.Op != WatchRescan
				w.mu.Unlock()
				if superseded {
					break send
				}
			case <-tick.C:
				w.checkLive()
				// Put it back in front (it may have merged with newer ops meanwhile).
				w.mu.Lock()
				if !w.rescan {
					if old, ok := w.pending[ev.Path]; ok {
						w.pending[ev.Path] = old | ev.Op
					} else if ev.Op != WatchRescan {
						w.pending[ev.Path] = ev.Op
						w.order = append([]string{ev.Path}, w.order...)
					} else {
						w.rescan = true
					}
				}
				w.mu.Unlock()
				break send
			}
		}
	}
}

// checkLive asks the policy about the Dir itself, so that a grant that has
// expired (and is revoked by that decision) ends an idle watch.
func (w *Watcher) checkLive() {
	if w.d.s.env.customPolicy {
		w.visible(".")
	}
}

// startInotify watches the host directory root and every directory beneath.
func (w *Watcher) startInotify(root string) error {
	fw, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		return errAt(vfs.CodeNotSupported, "Watch", ".", "", err.Error())
	}
	w.stopSrc = func() { fw.Close() }
	var addTree func(dir string)
	addTree = func(dir string) {
		if err := fw.Add(dir); err != nil {
			return
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			if e.Type().IsDir() { // not a symlink to one
				addTree(filepath.Join(dir, e.Name()))
			}
		}
	}
	addTree(root)
	rel := func(name string) (string, bool) {
		r, err := filepath.Rel(root, name)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "", false
		}
		return filepath.ToSlash(r), true
	}
	go func() {
		for {
			select {
			case <-w.ctx.Done():
				return
			case e, ok := <-fw.Events:
				if !ok {
					return
				}
				r, ok := rel(e.Name)
				if !ok {
					continue
				}
				var op WatchOp
				if e.Has(fsnotify.Create) {
					op |= WatchCreate
					if fi, err := os.Lstat(e.Name); err == nil && fi.IsDir() {
						addTree(e.Name)
					}
				}
				if e.Has(fsnotify.Write) {
					op |= WatchWrite
				}
				if e.Has(fsnotify.Remove) {
					op |= WatchRemove
				}
				if e.Has(fsnotify.Rename) {
					op |= WatchRename
				}
				if e.Has(fsnotify.Chmod) {
					op |= WatchChmod
				}
				if op != 0 {
					w.post(op, r)
				}
			case err, ok := <-fw.Errors:
				if !ok {
					return
				}
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					w.post(WatchRescan, ".")
				}
			}
		}
	}()
	return nil
}

// startFeed subscribes to a ChangeFeed, mapping its tree paths to the Dir.
func (w *Watcher) startFeed(f *ChangeFeed) {
	base := w.d.s.base
	sub := f.subscribe(func(op WatchOp, treePath string) {
		p, err := vfs.ParseGuest(treePath)
		if err != nil {
			return
		}
		r, ok := p.TrimPrefix(base)
		if !ok {
			return
		}
		rel := r.String()
		if r.IsRoot() {
			rel = "."
		}
		w.post(op, rel)
	})
	w.stopSrc = func() { f.unsubscribe(sub) }
}

// ChangeFeed is the in-process change stream of a virtual backend: install it
// as a hook on every Dir over the backend (WithHooks(feed)), and Watch on any
// of them (or their Subs) reports the changes made through all of them. It
// publishes after a call succeeds, never blocks the call (each watcher has
// its own bounded buffer), and holds no events itself. Safe for concurrent use.
type ChangeFeed struct {
	mu   sync.RWMutex
	subs map[*feedSub]struct{}
}

type feedSub struct{ fn func(WatchOp, string) }

// NewChangeFeed returns a ChangeFeed with no subscribers.
func NewChangeFeed() *ChangeFeed { return &ChangeFeed{subs: map[*feedSub]struct{}{}} }

// Name names the hook in audit events.
func (f *ChangeFeed) Name() string { return "changefeed" }

// Before does nothing: the feed only observes.
func (f *ChangeFeed) Before(context.Context, *policy.Request) error { return nil }

// After publishes the change a successful call made.
func (f *ChangeFeed) After(_ context.Context, r *policy.Request, err error) {
	if err != nil {
		return
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.subs) == 0 {
		return
	}
	emit := func(op WatchOp, p string) {
		for s := range f.subs {
			s.fn(op, p)
		}
	}
	switch r.Op {
	case policy.OpCreate, policy.OpMkdir, policy.OpSymlink:
		emit(WatchCreate, r.Path)
	case policy.OpWrite:
		emit(WatchWrite, r.Path)
	case policy.OpRemove:
		emit(WatchRemove, r.Path)
	case policy.OpRename:
		emit(WatchRename, r.Path)
		emit(WatchCreate, r.Dest)
	case policy.OpCopy:
		emit(WatchCreate, r.Dest)
	case policy.OpLink:
		emit(WatchCreate, r.Dest)
	case policy.OpChmod, policy.OpChtimes, policy.OpChown:
		emit(WatchChmod, r.Path)
	}
}

func (f *ChangeFeed) subscribe(fn func(WatchOp, string)) *feedSub {
	s := &feedSub{fn: fn}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s
}

func (f *ChangeFeed) unsubscribe(s *feedSub) {
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
}

// feed returns the ChangeFeed among the env's hooks, if any.
func (e *env) feed() *ChangeFeed {
	for _, h := range e.hooks {
		if f, ok := h.(*ChangeFeed); ok {
			return f
		}
	}
	return nil
}
