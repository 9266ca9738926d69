//go:build linux

package materialize

import (
	"context"
	"errors"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capfs/capfs/materialize/internal/hostfs"
	"github.com/capfs/capfs/vfs"
)

// Skippable reports whether err, met reading the source, is a refusal (denied,
// gone, special, outside, too many links) to record rather than fail on: the
// checkout records it as a Skip, sync-back as a refused change.
func Skippable(err error) bool {
	switch vfs.CodeOf(err) {
	case vfs.CodePermission, vfs.CodeNotFound, vfs.CodeNotRegular, vfs.CodeOutside, vfs.CodeTooManyLinks:
		return true
	}
	return false
}

func (t *Tree) skip(rel string, err error) {
	e := Skip{Path: rel, Code: vfs.CodeOf(err)}
	var ve *vfs.Error
	if errors.As(err, &ve) {
		e.Reason = ve.Message()
		if e.Reason == "" {
			e.Reason = ve.Error()
		}
	}
	t.mu.Lock()
	t.skipped = append(t.skipped, e)
	t.mu.Unlock()
}

// readDir lists directory rel ("" for the root) of the source, recording as
// skipped (invalid_path, with the reason) each entry the listing leaves out
// because no path can name it (vfs.Unaddressable: a host name with a
// backslash), so the run's summary names it and no bind shows it.
func (t *Tree) readDir(ctx context.Context, rel string) ([]fs.DirEntry, error) {
	note := func(u vfs.Unaddressable) {
		p := u.Name
		if rel != "" {
			p = rel + "/" + u.Name
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.skipped = append(t.skipped, Skip{Path: p, Code: vfs.CodeInvalidPath, Reason: "no capfs path can name it: " + u.Reason})
	}
	dir := rel
	if dir == "" {
		dir = "."
	}
	ents, err := t.src.ReadDir(vfs.WithUnaddressable(ctx, note), dir)
	if err != nil {
		return nil, err
	}
	// A backend that lists such a name (a git tree's) rather than leave it out.
	out := ents[:0]
	for _, e := range ents {
		if why := vfs.NameProblem(e.Name()); why != "" {
			note(vfs.Unaddressable{Name: e.Name(), Reason: why})
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// walk lists the source through the Dir, depth first in lexical order (so a
// directory comes before its contents), and returns what to check out. The
// metadata of the entries the listings call regular files is fetched afterwards
// by Options.Workers goroutines (fileInfos): on a git tree a file's size is a
// read of its object's header, most of the walk's time.
func (t *Tree) walk(ctx context.Context) ([]*srcEntry, error) {
	root, err := t.readDir(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []*srcEntry
	type frame struct {
		rel  string
		ents []fs.DirEntry
	}
	stack := []frame{{"", root}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, canceled("checkout", vfs.Root, err)
		}
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var subdirs []frame
		for _, de := range f.ents {
			rel := de.Name()
			if f.rel != "" {
				rel = f.rel + "/" + rel
			}
			e, ents, err := t.walkEntry(ctx, rel, de)
			if err != nil {
				return nil, err
			}
			if e == nil {
				continue
			}
			out = append(out, e)
			if e.typ == fs.ModeDir {
				subdirs = append(subdirs, frame{rel, ents})
			}
		}
		// Push in reverse so the first subdirectory is walked next (depth first,
		// lexical order).
		for i := len(subdirs) - 1; i >= 0; i-- {
			stack = append(stack, subdirs[i])
		}
	}
	return t.fileInfos(ctx, out)
}

// walkEntry examines the listed entry de at rel and returns what to check
// out (nil: skipped) and, for a directory, its listing. A regular file's
// metadata is left for fileInfos; a symlink's target is data, written as it is
// (one leaving the tree included: the sandbox resolves it in its own
// namespace, and capfs reads the checkout without following links); a special
// file, text no link may hold, and what the Dir refuses, is skipped.
func (t *Tree) walkEntry(ctx context.Context, rel string, de fs.DirEntry) (*srcEntry, []fs.DirEntry, error) {
	if de.Type() == 0 {
		return &srcEntry{rel: rel, de: de}, nil, nil
	}
	info, err := de.Info()
	if err != nil {
		return nil, nil, t.skipOr(rel, err)
	}
	e := &srcEntry{rel: rel, typ: info.Mode().Type(), size: info.Size(),
		mode: info.Mode().Perm(), mtime: info.ModTime()}
	switch e.typ {
	case fs.ModeDir:
		ents, err := t.readDir(ctx, rel)
		if err != nil {
			return nil, nil, t.skipOr(rel, err)
		}
		e.size = 0
		return e, ents, nil
	case fs.ModeSymlink:
		target, err := t.src.Readlink(ctx, rel)
		if err == nil {
			_, _, err = vfs.LinkTarget(vfs.MustParse(rel), target)
		}
		if err != nil {
			return nil, nil, t.skipOr(rel, err)
		}
		e.size, e.target = 0, target
		return e, nil, nil
	case 0:
		return e, nil, nil
	}
	t.skip(rel, vfs.NewError(vfs.CodeNotRegular, "checkout", vfs.MustParse(rel),
		"special file ("+e.typ.String()+") not checked out"))
	return nil, nil, nil
}

// skipOr records err as a Skip of rel and returns nil when it is a refusal
// (see skippable); otherwise it returns err.
func (t *Tree) skipOr(rel string, err error) error {
	if !Skippable(err) {
		return err
	}
	t.skip(rel, err)
	return nil
}

// fileInfos fills in the metadata of the entries the walk left for it (those
// with de set) on Options.Workers goroutines, and returns entries without the
// ones it skipped (refused by the policy, gone, or no longer regular files).
func (t *Tree) fileInfos(ctx context.Context, entries []*srcEntry) ([]*srcEntry, error) {
	var todo []*srcEntry
	for _, e := range entries {
		if e.de != nil {
			todo = append(todo, e)
		}
	}
	err := t.parallel(ctx, todo, func(_ context.Context, e *srcEntry) error {
		de := e.de
		e.de = nil
		info, err := de.Info()
		if err == nil && !info.Mode().IsRegular() {
			err = vfs.NewError(vfs.CodeNotRegular, "checkout", vfs.MustParse(e.rel), "changed during checkout")
		}
		if err != nil {
			if Skippable(err) {
				t.skip(e.rel, err)
				e.dropped = true
				return nil
			}
			return err
		}
		e.size, e.mode, e.mtime = info.Size(), info.Mode().Perm(), info.ModTime()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := entries[:0]
	for _, e := range entries {
		if !e.dropped {
			out = append(out, e)
		}
	}
	return out, nil
}

// parallel calls fn for every entry on Options.Workers goroutines (at most one
// per entry), stopping at the first error.
func (t *Tree) parallel(ctx context.Context, entries []*srcEntry, fn func(ctx context.Context, e *srcEntry) error) error {
	n := t.opts.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = min(n, len(entries))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(entries)) {
					return
				}
				if err := fn(ctx, entries[i]); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return canceled("checkout", vfs.Root, err)
	}
	return nil
}

// progress runs the throttled Progress callback until stop is closed.
type progress struct {
	files, bytes atomic.Int64
	total        Progress
	stop, done   chan struct{}
}

func (t *Tree) startProgress(entries []*srcEntry) *progress {
	pr := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	for _, e := range entries {
		if e.typ == 0 {
			pr.total.TotalFiles++
			pr.total.TotalBytes += e.size
		}
	}
	if t.opts.Progress == nil {
		close(pr.done)
		return pr
	}
	every := t.opts.ProgressInterval
	if every <= 0 {
		every = DefaultProgressInterval
	}
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t.opts.Progress(pr.snapshot(false))
			case <-pr.stop:
				t.opts.Progress(pr.snapshot(true))
				return
			}
		}
	}()
	return pr
}

func (pr *progress) snapshot(done bool) Progress {
	p := pr.total
	p.Files, p.Bytes, p.Done = int(pr.files.Load()), pr.bytes.Load(), done
	return p
}

func (pr *progress) finish() {
	close(pr.stop)
	<-pr.done
}

// runWorkers calls fn for every regular file of entries on Options.Workers
// goroutines, stopping at the first error.
func (t *Tree) runWorkers(ctx context.Context, entries []*srcEntry, pr *progress, fn func(ctx context.Context, e *srcEntry, buf []byte) error) error {
	n := t.opts.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *srcEntry)
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bp := hostfs.BufPool.Get().(*[]byte)
			defer hostfs.BufPool.Put(bp)
			for e := range jobs {
				if ctx.Err() != nil {
					continue
				}
				if err := fn(ctx, e, *bp); err != nil {
					once.Do(func() { first = err; cancel() })
					continue
				}
				pr.files.Add(1)
			}
		}()
	}
	for _, e := range entries {
		if e.typ != 0 {
			continue
		}
		select {
		case jobs <- e:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return canceled("checkout", vfs.Root, err)
	}
	return nil
}
