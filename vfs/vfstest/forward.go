package vfstest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/capfs/capfs/internal/hostfd"
	"github.com/capfs/capfs/vfs"
)

// Forwarding says how a wrapper treats the optional interfaces of
// [vfs.Optionals]. Its zero value demands that the wrapper forward every one
// to the backend it wraps. Each map is keyed by interface name ("Locator")
// and names the reason or the code, so every exception is written down.
type Forwarding struct {
	// Withheld are interfaces the wrapper deliberately does not implement.
	Withheld map[string]string
	// Own are interfaces the wrapper answers with its own logic (a Dir's
	// enforced calls): it must answer as the wrapped backend would, but need
	// not call the wrapped backend's method.
	Own map[string]string
	// Refused are interfaces the wrapper implements by refusing every call
	// with this code without consulting the wrapped backend or File (a
	// read-only wrapper's Chowner and its files' AttrFile: read_only).
	Refused map[string]vfs.Code
	// Sub, if not nil, is how the wrapper's Subs treat them, where it differs
	// (a Namespace's Sub into a mount is the mount's Sub).
	Sub *Forwarding
	// NoSub, if set, is why the wrapper serves no Sub (a copy-on-write layer
	// is served whole): the check then skips the Sub level.
	NoSub string
	// Writable, if not nil, is how files opened for writing treat the
	// optional File interfaces, where it differs (a quota's withhold the
	// host descriptor). Only its Withheld, Own and Refused are read.
	Writable *Forwarding
}

// CheckForwards checks that wrap hides none of the optional interfaces of
// [vfs.Optionals], and that the files it opens hide none of
// [vfs.OptionalFiles].
//
// It wraps a [Probe] over base (a fresh, empty, writable backend), which
// implements every one and counts calls. On the result, and on the result's Sub
// of a directory, it asserts each interface through the type assertion a
// caller makes and calls it. The call must succeed and reach the probe, unless
// f says the wrapper withholds, answers or refuses it. A host descriptor must
// be the probe's file's, and a read-only wrapper's must not be open for
// writing. An interface added to [vfs.Optionals] or [vfs.OptionalFiles]
// without a call here fails.
func CheckForwards(t testing.TB, base vfs.Backend, wrap func(vfs.Backend) vfs.Backend, f Forwarding) {
	t.Helper()
	ctx := context.Background()
	seedProbe(t, ctx, base)
	pr := &Probe{Backend: base, calls: &probeCalls{n: map[string]int{}, fds: map[int]bool{}}}
	for _, o := range vfs.Optionals() {
		if !reflect.TypeOf(pr).Implements(o.Type) {
			t.Errorf("the probe does not implement vfs.%s: add it to vfstest.Probe", o.Name)
		}
		if _, ok := optionalCalls[o.Name]; !ok {
			t.Errorf("vfstest has no call for vfs.%s: add one to optionalCalls", o.Name)
		}
	}
	for _, o := range vfs.OptionalFiles() {
		if !reflect.TypeFor[*probeFile]().Implements(o.Type) {
			t.Errorf("the probe's File does not implement %v: add it to vfstest.probeFile", o.Type)
		}
		if _, ok := optionalFileCalls[o.Name]; !ok {
			t.Errorf("vfstest has no call for %v: add one to optionalFileCalls", o.Type)
		}
	}
	w := wrap(pr)
	checkLevel(t, ctx, "wrapped", w, pr, f, vfs.MustParse("d"), vfs.MustParse("d/f"))
	checkFiles(t, ctx, "wrapped", w, pr, f, vfs.MustParse("d/f"))
	if f.NoSub != "" {
		return
	}
	s, err := w.Sub(ctx, vfs.MustParse("d"))
	if err != nil {
		t.Fatalf("Sub(d) of the wrapped probe: %v", err)
	}
	if f.Sub != nil {
		f = *f.Sub
	}
	checkLevel(t, ctx, "its Sub", s, pr, f, vfs.Root, vfs.MustParse("f"))
	checkFiles(t, ctx, "its Sub", s, pr, f, vfs.MustParse("f"))
}

// CheckClaims checks that every optional interface wrap(base) claims works,
// although base implements none. It checks the claims of its Sub of a
// directory too. No call may answer not_supported unless the interface's
// contract allows it. Run it over a backend without optional interfaces, to
// catch a wrapper that claims what only its inner backend can do. A wrapper
// whose Sub answers not_supported has only its own claims checked.
func CheckClaims(t testing.TB, base vfs.Backend, wrap func(vfs.Backend) vfs.Backend) {
	t.Helper()
	ctx := context.Background()
	seedProbe(t, ctx, base)
	w := wrap(plain{base})
	checkClaims(t, ctx, "wrapped", w, vfs.MustParse("d"), vfs.MustParse("d/f"))
	s, err := w.Sub(ctx, vfs.MustParse("d"))
	switch {
	case vfs.CodeOf(err) == vfs.CodeNotSupported:
	case err != nil:
		t.Errorf("Sub(d) of %T: %v", w, err)
	default:
		checkClaims(t, ctx, "its Sub", s, vfs.Root, vfs.MustParse("f"))
	}
}

// checkClaims calls every optional interface w claims on dir or file and
// fails on a not_supported its contract does not allow.
func checkClaims(t testing.TB, ctx context.Context, level string, w vfs.Backend, dir, file vfs.Path) {
	t.Helper()
	for _, o := range vfs.Optionals() {
		if !reflect.TypeOf(w).Implements(o.Type) || o.Unsupported {
			continue
		}
		if err := optionalCalls[o.Name](ctx, w, dir, file); vfs.CodeOf(err) == vfs.CodeNotSupported {
			t.Errorf("%s %T claims vfs.%s over a backend without it but answers %v", level, w, o.Name, err)
		}
	}
}

// plain hides every optional interface of the backend it holds.
type plain struct{ vfs.Backend }

func seedProbe(t testing.TB, ctx context.Context, base vfs.Backend) {
	t.Helper()
	if err := base.Mkdir(ctx, vfs.MustParse("d"), 0o755); err != nil {
		t.Fatalf("seed: %v", err)
	}
	h, err := base.OpenFile(ctx, vfs.MustParse("d/f"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if _, err := h.Write([]byte("probe")); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// checkLevel checks w's optional interfaces, dir and file being a directory
// and a file in it as w names them.
func checkLevel(t testing.TB, ctx context.Context, level string, w vfs.Backend, pr *Probe, f Forwarding, dir, file vfs.Path) {
	t.Helper()
	for _, o := range vfs.Optionals() {
		call, known := optionalCalls[o.Name]
		if !known {
			continue
		}
		ok := reflect.TypeOf(w).Implements(o.Type)
		reason, withheld := f.Withheld[o.Name]
		switch {
		case withheld && ok:
			t.Errorf("%s %T: implements vfs.%s, which Forwarding says it withholds (%s)", level, w, o.Name, reason)
			continue
		case withheld:
			continue
		case !ok:
			t.Errorf("%s %T: drops vfs.%s (%s): a caller's type assertion fails", level, w, o.Name, o.Group)
			continue
		}
		before := pr.calls.get(o.Name)
		err := call(ctx, w, dir, file)
		reached := pr.calls.get(o.Name) > before
		if code, refused := f.Refused[o.Name]; refused {
			if vfs.CodeOf(err) != code || reached {
				t.Errorf("%s %T: vfs.%s answered %v (reached the backend: %v), want a refusal with %s", level, w, o.Name, err, reached, code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %T: vfs.%s failed: %v", level, w, o.Name, err)
			continue
		}
		if _, own := f.Own[o.Name]; !own && !reached {
			t.Errorf("%s %T: vfs.%s did not reach the wrapped backend's method", level, w, o.Name)
		}
	}
}

// checkFiles checks the optional File interfaces (vfs.OptionalFiles) of file
// opened through w: by OpenFile for reading, by OpenFile for writing unless w
// is read-only (a wrapper may wrap writable files apart: a quota's), and,
// where w has it, by ResolveOpen, whose file must also refuse a write as
// OpenFile's read-only file does (same code, same path).
func checkFiles(t testing.TB, ctx context.Context, level string, w vfs.Backend, pr *Probe, f Forwarding, file vfs.Path) {
	t.Helper()
	h, err := w.OpenFile(ctx, file, os.O_RDONLY, 0)
	if err != nil {
		t.Errorf("%s %T: OpenFile(%s): %v", level, w, file, err)
		return
	}
	_, werr := h.Write([]byte("x"))
	ro := w.Features().ReadOnly
	checkFile(t, level+" OpenFile", h, pr, f, ro)
	if r, ok := w.(vfs.OpenResolver); ok {
		h, _, err := r.ResolveOpen(ctx, file, func(vfs.Location) error { return nil })
		if err != nil {
			t.Errorf("%s %T: ResolveOpen(%s): %v", level, w, file, err)
			return
		}
		if _, err := h.Write([]byte("x")); !sameRefusal(err, werr) {
			t.Errorf("%s %T: a write to ResolveOpen's file %T answered %v, to OpenFile's %v", level, w, h, err, werr)
		}
		checkFile(t, level+" ResolveOpen", h, pr, f, ro)
	}
	if !ro {
		h, err := w.OpenFile(ctx, file, os.O_RDWR, 0)
		if err != nil {
			t.Errorf("%s %T: OpenFile(%s, O_RDWR): %v", level, w, file, err)
			return
		}
		if f.Writable != nil {
			f = *f.Writable
		}
		checkFile(t, level+" OpenFile O_RDWR", h, pr, f, false)
	}
}

// sameRefusal reports that a and b are both errors with the same code and path.
func sameRefusal(a, b error) bool {
	var ea, eb *vfs.Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return a != nil && b != nil && vfs.CodeOf(a) == vfs.CodeOf(b)
	}
	return ea.Code == eb.Code && ea.Path == eb.Path
}

// checkFile checks h's optional File interfaces and closes it. ro says h
// was opened through a read-only wrapper: a host descriptor it gives must
// not be open for writing.
func checkFile(t testing.TB, level string, h vfs.File, pr *Probe, f Forwarding, ro bool) {
	t.Helper()
	defer h.Close()
	for _, o := range vfs.OptionalFiles() {
		call, known := optionalFileCalls[o.Name]
		if !known {
			continue
		}
		ok := reflect.TypeOf(h).Implements(o.Type)
		if reason, withheld := f.Withheld[o.Name]; withheld {
			if ok {
				t.Errorf("%s %T: implements %v, which Forwarding says it withholds (%s)", level, h, o.Type, reason)
			}
			continue
		}
		if !ok {
			t.Errorf("%s %T: drops %v (%s): a caller's type assertion fails", level, h, o.Type, o.Group)
			continue
		}
		before := pr.calls.get(o.Name)
		_, own := f.Own[o.Name]
		err := call(h, fileCall{calls: pr.calls, own: own, ro: ro})
		reached := pr.calls.get(o.Name) > before
		if code, refused := f.Refused[o.Name]; refused {
			if vfs.CodeOf(err) != code || reached {
				t.Errorf("%s %T: %v answered %v (reached the wrapped File: %v), want a refusal with %s", level, h, o.Type, err, reached, code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %T: %v: %v", level, h, o.Type, err)
		}
		if !own && !reached {
			t.Errorf("%s %T: %v did not reach the wrapped File's method", level, h, o.Type)
		}
	}
}

// fileCall is what a call of optionalFileCalls knows about the File it
// checks.
type fileCall struct {
	calls *probeCalls // the probe's: which descriptors are its own
	// own says the wrapper answers from a File of its own (a copy-on-write
	// layer's copy), which may have recorded no status at its open (OpenStat
	// false, as the contract allows) and whose descriptor is not the
	// probe's: only a status it gives is checked.
	own bool
	ro  bool // the File was opened through a read-only wrapper
}

// optionalFileCalls calls each optional File interface of h through the type
// assertion a caller makes and checks the answer is the probe's (a regular
// file of 5 bytes; a descriptor the probe's File holds, open for reading
// only where h is read-only).
var optionalFileCalls = map[string]func(h vfs.File, c fileCall) error{
	"TypedFile": func(h vfs.File, c fileCall) error {
		return want(nil, h.(vfs.TypedFile).Type() == 0, "type", vfs.Root)
	},
	"OpenStater": func(h vfs.File, c fileCall) error {
		info, ok := h.(vfs.OpenStater).OpenStat()
		if c.own && !ok {
			return nil
		}
		return want(nil, ok && info.Size == 5 && info.Mode.IsRegular(), "openstat", vfs.Root)
	},
	"hostfd.Filer": func(h vfs.File, c fileCall) error {
		fd, ok := h.(hostfd.Filer).HostFd(hostfd.Token{})
		if c.own {
			return nil
		}
		writable, probes := c.calls.fd(fd)
		if c.ro && ok && writable {
			return vfs.NewError(vfs.CodeConflict, "hostfd", vfs.Root, "a read-only file gave a descriptor open for writing")
		}
		return want(nil, ok && probes, "hostfd", vfs.Root)
	},
}

// optionalCalls calls each optional interface of w, through the type
// assertion a caller makes, on dir or file, and checks the answer is one the
// probe gives.
var optionalCalls = map[string]func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error{
	"StatResolver": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		loc, info, err := w.(vfs.StatResolver).ResolveStat(ctx, file, true)
		return want(err, loc.Found && info.Mode.IsRegular() && info.Size == 5, "ResolveStat", file)
	},
	"OpenResolver": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		h, loc, err := w.(vfs.OpenResolver).ResolveOpen(ctx, file, func(vfs.Location) error { return nil })
		if err == nil {
			err = h.Close()
		}
		return want(err, loc.Found, "ResolveOpen", file)
	},
	"ListResolver": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		ents, _, err := w.(vfs.ListResolver).ResolveReadDir(ctx, dir, func(vfs.Location) error { return nil })
		return want(err, slices.Contains(ents, vfs.DirEntry{Name: "f"}), "ResolveReadDir", dir)
	},
	"DirInfoReader": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		infos, err := w.(vfs.DirInfoReader).ReadDirInfo(ctx, dir)
		return want(err, len(infos) == 1 && infos[0].Name == "f" && infos[0].Err == nil && infos[0].Size == 5, "ReadDirInfo", dir)
	},
	"HostPather": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		w.(vfs.HostPather).HostPath()
		return nil
	},
	"HostLinkResolver": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		_, _, err := w.(vfs.HostLinkResolver).HostLinkTarget(ctx, file)
		return err
	},
	"Locator": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		_, err := w.(vfs.Locator).Locate(ctx)
		return err
	},
	"Chowner": func(ctx context.Context, w vfs.Backend, dir, file vfs.Path) error {
		c := w.(vfs.Chowner)
		if err := c.Chown(ctx, file, -1, -1); err != nil {
			return err
		}
		return c.Lchown(ctx, file, -1, -1)
	},
}

// want is err, or an error when the call succeeded with an answer that is not ok.
func want(err error, ok bool, op string, p vfs.Path) error {
	if err == nil && !ok {
		return vfs.NewError(vfs.CodeConflict, op, p, "not the answer the probe gives")
	}
	return err
}

// Probe is a Backend implementing every optional interface of [vfs.Optionals]
// over the Backend it embeds, counting the calls of each. The fused and
// listing calls answer through the vfs helpers' fallbacks. HostPath reports no
// host path, HostLinkTarget no target, and Chown changes nothing. Locate
// reports where the Probe was taken by Sub, from the first Probe's root. Its
// Files implement every optional File interface of [vfs.OptionalFiles]:
// their host descriptor is the null device's, open with the open's access
// mode.
type Probe struct {
	vfs.Backend
	calls *probeCalls
	at    vfs.Path // where Locate says this Sub's root is
}

type probeCalls struct {
	mu  sync.Mutex
	n   map[string]int
	fds map[int]bool // the probe's Files' open descriptors: open for writing
}

// fd reports whether fd is one of the probe's Files' open descriptors
// (probes), and whether it is open for writing.
func (c *probeCalls) fd(fd int) (writable, probes bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	writable, probes = c.fds[fd]
	return writable, probes
}

func (c *probeCalls) add(name string) {
	c.mu.Lock()
	c.n[name]++
	c.mu.Unlock()
}

func (c *probeCalls) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// Sub returns a Probe over the embedded backend's Sub, counting with p.
func (p *Probe) Sub(ctx context.Context, q vfs.Path) (vfs.Backend, error) {
	s, err := p.Backend.Sub(ctx, q)
	if err != nil {
		return nil, err
	}
	return &Probe{Backend: s, calls: p.calls, at: p.at.Join(q)}, nil
}

// ResolveStat counts a call and answers as [vfs.ResolveStat] does.
func (p *Probe) ResolveStat(ctx context.Context, q vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	p.calls.add("StatResolver")
	return vfs.ResolveStat(ctx, p.Backend, q, follow)
}

// ResolveOpen counts a call and answers as [vfs.ResolveOpen] does, with a File
// of the probe.
func (p *Probe) ResolveOpen(ctx context.Context, q vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	p.calls.add("OpenResolver")
	h, loc, err := vfs.ResolveOpen(ctx, p.Backend, q, decide)
	if err != nil {
		return nil, loc, err
	}
	f, err := p.file(h, os.O_RDONLY)
	return f, loc, err
}

// OpenFile opens q in the embedded backend as a File implementing every
// optional File interface ([vfs.OptionalFiles]).
func (p *Probe) OpenFile(ctx context.Context, q vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	h, err := p.Backend.OpenFile(ctx, q, flag, perm)
	if err != nil {
		return nil, err
	}
	return p.file(h, flag)
}

// file is h, opened with flag, as a File of the probe. Its host descriptor
// is the null device's, open with flag's access mode.
func (p *Probe) file(h vfs.File, flag int) (vfs.File, error) {
	null, err := os.OpenFile(os.DevNull, flag&(os.O_RDONLY|os.O_WRONLY|os.O_RDWR), 0)
	if err != nil {
		h.Close()
		return nil, vfs.Errno("open", vfs.Root, err)
	}
	f := &probeFile{File: h, calls: p.calls, null: null}
	p.calls.mu.Lock()
	p.calls.fds[f.fd()] = flag&(os.O_WRONLY|os.O_RDWR) != 0
	p.calls.mu.Unlock()
	return f, nil
}

// probeFile is a File of a Probe: it answers the optional File interfaces
// from Stat and its null device, counting the calls.
type probeFile struct {
	vfs.File
	calls *probeCalls
	null  *os.File // its host descriptor
}

func (f *probeFile) Type() fs.FileMode {
	f.calls.add("TypedFile")
	info, _ := f.File.Stat()
	return info.Mode.Type()
}

func (f *probeFile) OpenStat() (vfs.Info, bool) {
	f.calls.add("OpenStater")
	info, err := f.File.Stat()
	return info, err == nil
}

// HostFd counts a call and gives the null device's descriptor.
func (f *probeFile) HostFd(hostfd.Token) (int, bool) {
	f.calls.add("hostfd.Filer")
	return f.fd(), true
}

func (f *probeFile) fd() int { return int(f.null.Fd()) }

// Close closes the File and its null device.
func (f *probeFile) Close() error {
	f.calls.mu.Lock()
	delete(f.calls.fds, f.fd())
	f.calls.mu.Unlock()
	f.null.Close()
	return f.File.Close()
}

// ResolveReadDir counts a call and answers as [vfs.ResolveReadDir] does.
func (p *Probe) ResolveReadDir(ctx context.Context, q vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	p.calls.add("ListResolver")
	return vfs.ResolveReadDir(ctx, p.Backend, q, decide)
}

// ReadDirInfo counts a call and answers as [vfs.ReadDirInfo] does.
func (p *Probe) ReadDirInfo(ctx context.Context, q vfs.Path) ([]vfs.DirInfo, error) {
	p.calls.add("DirInfoReader")
	return vfs.ReadDirInfo(ctx, p.Backend, q)
}

// HostPath counts a call and reports no host path.
func (p *Probe) HostPath() (string, bool) {
	p.calls.add("HostPather")
	return "", false
}

// HostLinkTarget counts a call and reports no target.
func (p *Probe) HostLinkTarget(ctx context.Context, q vfs.Path) (vfs.Path, bool, error) {
	p.calls.add("HostLinkResolver")
	return vfs.Path{}, false, nil
}

// Locate counts a call and returns where the Probe was taken by Sub.
func (p *Probe) Locate(ctx context.Context) (vfs.Path, error) {
	p.calls.add("Locator")
	return p.at, nil
}

// Chown counts a call and changes nothing.
func (p *Probe) Chown(ctx context.Context, q vfs.Path, uid, gid int) error {
	p.calls.add("Chowner")
	return nil
}

// Lchown counts a call and changes nothing.
func (p *Probe) Lchown(ctx context.Context, q vfs.Path, uid, gid int) error {
	p.calls.add("Chowner")
	return nil
}
