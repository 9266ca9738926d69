//go:build linux

package hostfs

import (
	"container/heap"
	"io/fs"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// This file holds [WalkParallel], [Walk] with the directory reads spread over
// worker goroutines. It opens, stats and reads links exactly as [Walk] does
// (every directory by name relative to its parent's handle with
// O_NOFOLLOW|O_DIRECTORY, every entry with fstatat(AT_SYMLINK_NOFOLLOW)), and
// hands the entries to the callback on the caller's goroutine in [Walk]'s
// order, so the callback sees the same sequence [Walk] would show it; only
// the system calls behind it run ahead, on other cores.
//
// How it goes. Each directory is a walkNode. A node is read (opened, listed,
// every entry lstat'ed, symlinks read) by whoever claims it first: a worker that
// takes it from the queue ahead of time, or the consumer (the caller's
// goroutine) when it reaches a node nobody has claimed yet, so the consumer
// never waits for a node no one is reading and the walk cannot deadlock. The
// queue hands workers the pending node that comes first in the walk's order, so
// they read what the consumer needs next.
//
// Handles. A node's directory handle is opened by its reader and closed by the
// consumer once it has finished the node's whole subtree (so the handle is open
// while the callback runs for the node's entries, and while the node's children
// are opened relative to it: the consumer finishes a node only after every child
// has been read). Workers take a slot from a window of a fixed size before
// claiming a node and give it back when that node's handle is closed, so they
// never hold more than the window's handles ahead of the consumer; the consumer
// holds at most one handle per level of the directory it is in. When the walk
// ends, early or not, the workers are stopped and waited for, then every handle
// still open is closed.

// walkNode is one directory of a parallel walk.
type walkNode struct {
	parent *walkNode
	name   string // its name in parent
	rel    string // its path from the walk's root ("" for the root)
	depth  int    // 0 for the root

	claimed atomic.Bool   // set by whoever reads it
	ready   chan struct{} // closed when a worker has read it

	// Set by the reader, before ready is closed.
	fd      int         // the open directory, -1 if never opened or closed
	slot    bool        // opened by a worker: holds a window slot until closed
	gone    bool        // no longer a directory when opened: not entered
	entries []Entry     // sorted by name (up to the entry where err was met)
	kids    []*walkNode // the subdirectories to enter, in entries' order
	err     error       // the error met after entries
}

// parWalker is the state of one [WalkParallel].
type parWalker struct {
	rootFd   int
	maxDepth int
	slots    chan struct{} // the window
	done     chan struct{} // closed when the walk ends
	wg       sync.WaitGroup

	mu      sync.Mutex
	cond    sync.Cond
	queue   nodeQueue              // nodes to read ahead, earliest in walk order first
	open    map[*walkNode]struct{} // nodes holding an open handle
	stopped bool
}

// walkWindow is the number of directory handles each worker may hold open ahead
// of the consumer.
const walkWindow = 8

// WalkParallel is [Walk] with workers goroutines reading directories ahead
// of the walk: fn is called on the caller's goroutine, once per entry, in
// [Walk]'s order, with e.Dirfd open during the call, and fs.SkipDir, maxDepth
// and the errors met (returned when the walk reaches them, as [Walk] would)
// mean what they mean there. At most workers*walkWindow directory handles are
// open ahead of the walk, plus one per level of the directory it is in; all are
// closed when it returns. workers < 2 is [Walk] itself.
func WalkParallel(root int, maxDepth, workers int, fn func(e *Entry) error) error {
	if workers < 2 {
		return Walk(root, maxDepth, fn)
	}
	w := &parWalker{
		rootFd:   root,
		maxDepth: maxDepth,
		slots:    make(chan struct{}, workers*walkWindow),
		done:     make(chan struct{}),
		open:     map[*walkNode]struct{}{},
	}
	w.cond.L = &w.mu
	defer w.stop()
	for range workers {
		w.wg.Add(1)
		go w.work()
	}
	return w.consume(&walkNode{fd: -1, ready: make(chan struct{})}, fn)
}

// work reads queued nodes until the walk ends.
func (w *parWalker) work() {
	defer w.wg.Done()
	for {
		select {
		case w.slots <- struct{}{}:
		case <-w.done:
			return
		}
		n := w.next()
		if n == nil {
			return
		}
		if !n.claimed.CompareAndSwap(false, true) {
			<-w.slots // the consumer got there first
			continue
		}
		w.read(n)
		if n.fd >= 0 {
			n.slot = true
		} else {
			<-w.slots
		}
		close(n.ready)
	}
}

// next takes the queued node that comes first in the walk's order, waiting for
// one; nil once the walk has ended.
func (w *parWalker) next() *walkNode {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) == 0 && !w.stopped {
		w.cond.Wait()
	}
	if w.stopped {
		return nil
	}
	return heap.Pop(&w.queue).(*walkNode)
}

// stop ends the walk: it stops the workers, waits for them, and closes every
// handle still open.
func (w *parWalker) stop() {
	w.mu.Lock()
	w.stopped = true
	w.queue = nil
	w.cond.Broadcast()
	w.mu.Unlock()
	close(w.done)
	w.wg.Wait()
	for n := range w.open {
		unix.Close(n.fd)
		n.fd = -1
	}
	w.open = nil
}

// claimOrWait returns once n has been read: by the caller, when nobody had
// claimed it, else by the worker that did.
func (w *parWalker) claimOrWait(n *walkNode) {
	if n.claimed.CompareAndSwap(false, true) {
		w.read(n)
		return
	}
	<-n.ready
}

// consume calls fn for n's entries and walks into its subdirectories, then
// closes n's handle (once every child has been read, so no worker still uses
// it).
func (w *parWalker) consume(n *walkNode, fn func(e *Entry) error) error {
	w.claimOrWait(n)
	if n.gone {
		return nil
	}
	if err := w.consumeEntries(n, fn); err != nil {
		// Not closed here: a worker may still be opening one of n's
		// children relative to it. stop closes it after the workers are gone.
		return err
	}
	w.release(n)
	return nil
}

// consumeEntries is consume's loop over n's entries.
func (w *parWalker) consumeEntries(n *walkNode, fn func(e *Entry) error) error {
	kid := 0
	for i := range n.entries {
		e := &n.entries[i]
		var sub *walkNode
		if w.enters(n, e) {
			sub = n.kids[kid]
			kid++
		}
		err := fn(e)
		if err == fs.SkipDir {
			if sub != nil {
				w.discard(sub)
			}
			continue
		}
		if err != nil {
			return err
		}
		if sub != nil {
			if err := w.consume(sub, fn); err != nil {
				return err
			}
		}
	}
	return n.err
}

// discard drops a subtree fn skipped: a node not read yet is never read, one
// read (or being read) is waited for and its handle closed, after its children.
func (w *parWalker) discard(n *walkNode) {
	if n.claimed.CompareAndSwap(false, true) {
		return
	}
	<-n.ready
	for _, k := range n.kids {
		w.discard(k)
	}
	w.release(n)
}

// enters reports whether the walk enters entry e of n: a directory within the
// depth bound.
func (w *parWalker) enters(n *walkNode, e *Entry) bool {
	return e.St.Mode&unix.S_IFMT == unix.S_IFDIR && (w.maxDepth <= 0 || n.depth+1 < w.maxDepth)
}

// read opens n relative to its parent's handle (the root: the walk's root
// handle), lists it, lstats every entry, reads every symlink, and queues the
// subdirectories to enter. Errors are left in n.err.
func (w *parWalker) read(n *walkNode) {
	fd, err := w.openDir(n)
	if err != nil {
		n.err = err
		return
	}
	if n.gone {
		return
	}
	n.fd = fd
	w.mu.Lock()
	w.open[n] = struct{}{}
	w.mu.Unlock()
	names, err := readDirNames(fd)
	if err != nil {
		n.err = err
		return
	}
	sort.Strings(names)
	n.entries = make([]Entry, 0, len(names))
	for _, name := range names {
		var e Entry
		ok, err := statEntry(&e, fd, n.rel, name)
		if err != nil {
			n.err = err
			break
		}
		if !ok {
			continue
		}
		n.entries = append(n.entries, e)
		if w.enters(n, &e) {
			n.kids = append(n.kids, &walkNode{parent: n, name: name, rel: e.Rel, depth: n.depth + 1, fd: -1, ready: make(chan struct{})})
		}
	}
	w.queueKids(n)
}

// openDir opens n relative to its parent's handle (the root: the walk's root
// handle). A directory replaced meanwhile is not entered: n.gone, no error.
func (w *parWalker) openDir(n *walkNode) (int, error) {
	if n.parent == nil {
		return OpenatRetry(w.rootFd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	fd, err := OpenatRetry(n.parent.fd, n.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOTDIR || err == unix.ELOOP || err == unix.ENOENT {
		n.gone = true // replaced meanwhile: not entered
		return -1, nil
	}
	return fd, err
}

// queueKids queues n's subdirectories for the workers, unless the walk
// stopped.
func (w *parWalker) queueKids(n *walkNode) {
	if len(n.kids) == 0 {
		return
	}
	w.mu.Lock()
	if !w.stopped {
		for _, k := range n.kids {
			heap.Push(&w.queue, k)
		}
		w.cond.Broadcast()
	}
	w.mu.Unlock()
}

// release closes n's handle, if it has one, and gives back its slot; it drops
// n's entries, which the walk is done with.
func (w *parWalker) release(n *walkNode) {
	n.entries, n.kids = nil, nil
	if n.fd < 0 {
		return
	}
	w.mu.Lock()
	delete(w.open, n)
	w.mu.Unlock()
	unix.Close(n.fd)
	n.fd = -1
	if n.slot {
		<-w.slots
	}
}

// dirBufPool holds getdents buffers.
var dirBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readDirNames lists the directory open as fd (but "." and ".."), reading it
// with getdents directly: a walk of many small directories spends much of its
// time per directory, and an os.File would add a system call (to learn whether
// the descriptor is non-blocking) and allocations to each.
func readDirNames(fd int) ([]string, error) {
	bp := dirBufPool.Get().(*[]byte)
	defer dirBufPool.Put(bp)
	var names []string
	for {
		n, err := unix.Getdents(fd, *bp)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent((*bp)[:n], -1, names)
	}
}

// nodeQueue is a heap of nodes, the first in the walk's order on top.
type nodeQueue []*walkNode

func (q nodeQueue) Len() int           { return len(q) }
func (q nodeQueue) Less(i, j int) bool { return walkBefore(q[i].rel, q[j].rel) }
func (q nodeQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *nodeQueue) Push(x any)        { *q = append(*q, x.(*walkNode)) }
func (q *nodeQueue) Pop() any {
	old := *q
	n := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return n
}

// walkBefore reports whether the walk (a pre-order over names sorted bytewise)
// meets path a before path b: bytewise order with the separator sorting before
// every byte a name can hold.
func walkBefore(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return true
		}
		if cb == '/' {
			return false
		}
		return ca < cb
	}
	return len(a) < len(b)
}
