package physical

import (
	"context"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/capfs/capfs/vfs"
)

// walkResult is where a portable walk ended: the directory dir that holds (or
// would hold) the final entry leaf. leaf is "." when the final object is dir
// itself. found says the final entry exists, and st is then its status; obj is an
// O_PATH handle of it when the walk was asked for one, -1 otherwise. mustDir says
// a trailing slash demands a directory.
type walkResult struct {
	dir     int
	ownDir  bool
	leaf    string
	found   bool
	obj     int
	st      unix.Stat_t
	mustDir bool
	canon   string // with walkOpts.canon: the canonical path reached, "" for the root
}

// walkOpts says how a portable walk treats its path. follow: follow a final
// symlink (a trailing slash always does). needObj: the result holds an O_PATH
// handle of the final entry. noSym: follow no symlink at all (a Resolved path);
// where one would be followed the walk fails with errResolvedLink. canon: record
// the canonical path reached in walkResult.canon.
type walkOpts struct {
	follow, needObj, noSym, canon bool
}

func (w *walkResult) close() {
	if w.obj >= 0 {
		unix.Close(w.obj)
		w.obj = -1
	}
	if w.ownDir {
		unix.Close(w.dir)
		w.ownDir = false
	}
}

// lookupPortable is lookup for the portable resolver: a walk, then one openat of
// the final name with O_NOFOLLOW relative to the directory the walk reached. If the
// name changed into a symlink meanwhile (ELOOP), the lookup starts over, a bounded
// number of times.
func (f *FS) lookupPortable(ctx context.Context, root int, s string, flags int, mode uint32, o walkOpts) (int, error) {
	opath := flags&unix.O_PATH != 0
	o.needObj = opath
	for range maxRaces {
		w, err := f.walk(ctx, root, s, o)
		if err == errRaced {
			continue
		}
		if err != nil {
			return -1, err
		}
		if opath {
			// Metadata handle: the walk already holds one.
			if !w.found {
				w.close()
				return -1, unix.ENOENT
			}
			if flags&unix.O_DIRECTORY != 0 && w.st.Mode&unix.S_IFMT != unix.S_IFDIR {
				w.close()
				return -1, unix.ENOTDIR
			}
			fd := w.obj
			w.obj = -1
			w.close()
			return fd, nil
		}
		fd, err := f.openWalked(&w, flags, mode)
		if err == unix.ELOOP {
			continue // the name became a symlink since the walk: start over
		}
		return fd, err
	}
	return -1, errRaced
}

// openWalked opens the final entry of a walk with flags, never following it, and
// closes w.
func (f *FS) openWalked(w *walkResult, flags int, mode uint32) (int, error) {
	defer w.close()
	switch {
	case !w.found && flags&unix.O_CREAT == 0:
		return -1, unix.ENOENT
	case !w.found && w.mustDir:
		return -1, unix.EISDIR
	case w.found && w.st.Mode&unix.S_IFMT == unix.S_IFLNK:
		// Only reached with follow false: O_CREAT|O_EXCL on an existing link.
		return -1, unix.EEXIST
	}
	fl := flags | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if w.mustDir {
		fl |= unix.O_DIRECTORY
	}
	return openatRetry(w.dir, w.leaf, fl, mode)
}

// statPortable fills st with the status of s, following a final symlink if
// follow (none at all if noSym).
func (f *FS) statPortable(ctx context.Context, root int, s string, follow, noSym bool, st *unix.Stat_t) error {
	for range maxRaces {
		w, err := f.walk(ctx, root, s, walkOpts{follow: follow, noSym: noSym})
		if err == errRaced {
			continue
		}
		if err != nil {
			return err
		}
		w.close()
		if !w.found {
			return unix.ENOENT
		}
		*st = w.st
		return nil
	}
	return errRaced
}

func openatRetry(dir int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// walk resolves s beneath root component by component, the way vfs.Resolve does
// for virtual backends and openat2(RESOLVE_BENEATH) does in the kernel: each
// directory is opened with O_PATH|O_NOFOLLOW|O_DIRECTORY relative to the directory
// handle reached so far, and anything else examined with fstatat without following
// it; symlinks (intermediate ones always, the final one if follow or a trailing
// slash) are read with readlinkat relative to that handle and their targets spliced
// into the rest of the path; ".." pops back to the handle the walk came from, so a
// directory moved elsewhere mid-walk cannot lead it out. An absolute target, ".."
// above root, more than vfs.MaxSymlinks links, and (WithOneFilesystem) a change of
// device fail. o says what else the walk does (see walkOpts). On success the caller
// owns w and must close it.
func (f *FS) walk(ctx context.Context, root int, s string, o walkOpts) (w walkResult, err error) {
	var buf [fdWindow + 2]frame
	stack := append(buf[:0], frame{fd: root})
	defer func() { closeStack(stack, w, err) }()
	p := pwalk{f: f, o: o, rest: s}
	for steps := 1; ; steps++ {
		p.rest = trimDots(p.rest)
		if p.rest == "" {
			// The final object is the directory on top of the stack.
			if err := unix.Fstat(top(stack), &p.st); err != nil {
				return walkResult{}, err
			}
			res, _, err := p.finish(stack, ".", false)
			return res, err
		}
		if steps&63 == 0 {
			if err := ctx.Err(); err != nil {
				return walkResult{}, err
			}
		}
		seg, slash, last, trailing := p.next()
		if seg == ".." {
			if stack, err = pop(stack); err != nil {
				return walkResult{}, err
			}
			continue
		}
		if !last {
			// Most intermediate components are directories: one open tells.
			fd, err := p.enter(top(stack), seg)
			if err != nil {
				return walkResult{}, err
			}
			if fd >= 0 {
				stack = push(stack, fd, seg)
				continue
			}
			// A symlink, or something that is not a directory: see below.
		}
		res, done, err := p.final(stack, seg, slash, last, trailing)
		if err != nil {
			return walkResult{}, err
		}
		if done {
			return res, nil
		}
	}
}

// pwalk is one portable walk: the rest of the path to resolve, the
// symlinks followed, and the status of the entry last examined. The stack of
// directories reached (the root at the bottom) stays walk's own, in a
// buffer on its stack.
type pwalk struct {
	f     *FS
	o     walkOpts
	rest  string
	links int
	st    unix.Stat_t
}

// top is the handle of the directory a walk reached.
func top(stack []frame) int { return stack[len(stack)-1].fd }

// closeStack closes every handle of stack not handed to the walk's result
// w (err: the walk's).
func closeStack(stack []frame, w walkResult, err error) {
	for i := 1; i < len(stack); i++ {
		if fd := stack[i].fd; fd >= 0 && !(err == nil && w.ownDir && fd == w.dir) {
			unix.Close(fd)
		}
	}
}

// trimDots drops the "/" and "." segments at the start of rest.
func trimDots(rest string) string {
	for rest != "" && (rest[0] == '/' || (rest[0] == '.' && (len(rest) == 1 || rest[1] == '/'))) {
		rest = rest[1:]
	}
	return rest
}

// next takes the next component off the rest: whether a slash followed it,
// whether it is the last real one, and whether a slash trails it.
func (p *pwalk) next() (seg string, slash, last, trailing bool) {
	seg, p.rest, slash = strings.Cut(p.rest, "/")
	last, trailing = endOf(p.rest)
	return seg, slash, last, trailing || (last && slash)
}

// pop goes back to the directory the walk came from: never above the root,
// and reopening it by name when its handle was closed (fdWindow).
func pop(stack []frame) ([]frame, error) {
	if len(stack) == 1 {
		return stack, errAbove
	}
	unix.Close(top(stack))
	stack = stack[:len(stack)-1]
	if top(stack) >= 0 {
		return stack, nil
	}
	fd, err := reopen(stack)
	if err != nil {
		return stack, err
	}
	stack[len(stack)-1].fd = fd
	return stack, nil
}

// push pushes directory seg, open as fd; beyond fdWindow handles the oldest
// one that is not the root's is closed.
func push(stack []frame, fd int, seg string) []frame {
	stack = append(stack, frame{fd: fd, name: seg})
	if i := len(stack) - 1 - fdWindow; i > 0 && stack[i].fd >= 0 {
		unix.Close(stack[i].fd)
		stack[i].fd = -1
	}
	return stack
}

// enter opens seg in dir as a directory, never following it, and returns
// its handle, or -1 when it is not a directory (a symlink, say); with
// WithOneFilesystem another device is errXdev.
func (p *pwalk) enter(dir int, seg string) (int, error) {
	fd, err := openatRetry(dir, seg, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == unix.ENOTDIR {
		return -1, nil
	}
	if err != nil {
		return -1, err // not_found for a missing directory
	}
	if !p.f.cfg.oneFS {
		return fd, nil
	}
	if err := unix.Fstat(fd, &p.st); err != nil || p.st.Dev != p.f.dev {
		unix.Close(fd)
		if err == nil {
			err = errXdev
		}
		return -1, err
	}
	return fd, nil
}

// final goes on from seg, which is not a directory on the way: a missing
// final name is the result (not found), a symlink is spliced in or is the
// result, anything else ends the walk (done).
func (p *pwalk) final(stack []frame, seg string, slash, last, trailing bool) (walkResult, bool, error) {
	found, err := p.stat(top(stack), seg)
	if err != nil {
		return walkResult{}, true, err
	}
	if !found {
		if !last {
			return walkResult{}, true, errRaced // it was there a moment ago
		}
		if !vfs.ValidName(seg) {
			return walkResult{}, true, &lookupErr{vfs.CodeInvalidPath, "invalid name in symlink target"}
		}
		return p.result(stack, seg, -1, false, trailing), true, nil
	}
	switch p.st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		if last && !p.o.follow && !trailing {
			return p.finish(stack, seg, false)
		}
		return walkResult{}, false, p.splice(top(stack), seg, slash)
	case unix.S_IFDIR:
		if !last {
			return walkResult{}, true, errRaced // was not a directory a moment ago
		}
		return p.finish(stack, seg, trailing)
	}
	if trailing || !last {
		return walkResult{}, true, unix.ENOTDIR
	}
	return p.finish(stack, seg, false)
}

// stat examines seg in dir without following it, into p.st, and reports
// whether it is there; with WithOneFilesystem another device is errXdev.
func (p *pwalk) stat(dir int, seg string) (bool, error) {
	err := unix.Fstatat(dir, seg, &p.st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if p.f.cfg.oneFS && p.st.Dev != p.f.dev {
		return false, errXdev
	}
	return true, nil
}

// splice reads symlink seg in dir and puts its target before the rest
// (keeping a trailing slash: the target must then be a directory). An
// absolute or empty target, too many links, and a walk that may not follow
// links fail.
func (p *pwalk) splice(dir int, seg string, slash bool) error {
	if p.o.noSym {
		return errResolvedLink
	}
	if p.f.cfg.symlinks == SymlinksReject {
		return errNoSym
	}
	if p.links++; p.links > vfs.MaxSymlinks {
		return errLoop
	}
	target, err := readlinkFd(dir, seg)
	switch {
	case err == unix.EINVAL || err == unix.ENOENT:
		return errRaced // no longer a symlink
	case err != nil:
		return err
	case target == "":
		return unix.ENOENT
	case target[0] == '/':
		return errAbs
	}
	if p.rest == "" && !slash {
		p.rest = target
	} else {
		p.rest = target + "/" + p.rest
	}
	return nil
}

// finish ends the walk at leaf, examined as p.st.
func (p *pwalk) finish(stack []frame, leaf string, mustDir bool) (walkResult, bool, error) {
	obj, err := p.object(top(stack), leaf)
	if err != nil {
		return walkResult{}, true, err
	}
	return p.result(stack, leaf, obj, true, mustDir), true, nil
}

// object opens the final entry leaf of dir, already examined as p.st, when
// the walk asks for it (needObj), and checks that it still is what was
// examined.
func (p *pwalk) object(dir int, leaf string) (int, error) {
	if !p.o.needObj {
		return -1, nil
	}
	obj, err := openatRetry(dir, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return -1, errRaced
		}
		return -1, err
	}
	var now unix.Stat_t
	if err := unix.Fstat(obj, &now); err != nil {
		unix.Close(obj)
		return -1, err
	}
	if now.Dev != p.st.Dev || now.Ino != p.st.Ino {
		unix.Close(obj)
		return -1, errRaced
	}
	p.st = now
	return obj, nil
}

// result is the walk's result at leaf (found: as p.st), with the canonical
// path when the walk asks for it.
func (p *pwalk) result(stack []frame, leaf string, obj int, found, mustDir bool) walkResult {
	r := walkResult{dir: top(stack), ownDir: len(stack) > 1, leaf: leaf, obj: obj, mustDir: mustDir}
	if found {
		r.found, r.st = true, p.st
	}
	if p.o.canon {
		var b strings.Builder
		for _, fr := range stack[1:] {
			b.WriteString(fr.name)
			b.WriteByte('/')
		}
		if leaf != "." {
			b.WriteString(leaf)
		}
		r.canon = strings.TrimSuffix(b.String(), "/")
	}
	return r
}

// frame is one directory of a portable walk's stack.
type frame struct {
	fd   int // -1 once closed to stay within fdWindow
	name string
}

// reopen opens the directory on top of stack, whose handle was closed, by walking
// the recorded names down from the nearest ancestor still open, without following
// any symlink: the result is beneath that ancestor, hence beneath the root. If a
// name no longer is a directory the walk reports a race.
func reopen(stack []frame) (int, error) {
	j := len(stack) - 1
	for j > 0 && stack[j].fd < 0 {
		j--
	}
	cur, own := stack[j].fd, false
	for i := j + 1; i < len(stack); i++ {
		fd, err := openatRetry(cur, stack[i].name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if own {
			unix.Close(cur)
		}
		if err != nil {
			if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
				return -1, errRaced
			}
			return -1, err
		}
		cur, own = fd, true
	}
	return cur, nil
}

// endOf reports whether rest holds no further real component (only "/" and "."
// segments), and whether it is non-empty, meaning a slash followed the component.
func endOf(rest string) (last, trailing bool) {
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c == '/' {
			continue
		}
		if c == '.' && (i+1 == len(rest) || rest[i+1] == '/') {
			continue
		}
		return false, false
	}
	return true, rest != ""
}
