package dir

import (
	"context"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// FS returns an io/fs view of d: it implements fs.FS, fs.ReadDirFS, fs.StatFS,
// fs.ReadFileFS, fs.SubFS, fs.GlobFS and fs.ReadLinkFS, and passes
// testing/fstest.TestFS. Names follow io/fs rules (fs.ValidPath: unrooted, no "." or
// ".." elements, no trailing slash, and UTF-8: a name that is not, which the Dir's
// own methods address, is refused here); an invalid name fails with an *fs.PathError
// whose Err is fs.ErrInvalid. Every call is an enforced, audited call on d (with
// context.Background()); other errors are *vfs.Error values, which match the io/fs
// sentinels with errors.Is. Open returns a *Handle. Glob has path.Match syntax, as
// fs.Glob; use Dir.Glob for "**".
func (d *Dir) FS() fs.FS { return &fsView{d: d} }

type fsView struct{ d *Dir }

var (
	_ fs.ReadDirFS   = (*fsView)(nil)
	_ fs.StatFS      = (*fsView)(nil)
	_ fs.ReadFileFS  = (*fsView)(nil)
	_ fs.SubFS       = (*fsView)(nil)
	_ fs.GlobFS      = (*fsView)(nil)
	_ fs.ReadLinkFS  = (*fsView)(nil)
	_ fs.ReadDirFile = (*Handle)(nil)
)

func invalidName(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
}

// refuse is the io/fs view's answer to a name io/fs does not accept ("../x",
// "/etc", "a//b"): fs.ErrInvalid, as fs.ValidPath requires, and like every
// refusal, one audit event (outcome denied, code invalid_path).
func (v *fsView) refuse(op policy.Op, method, name string) error {
	e := v.d.s.env
	if e.audited {
		e.audit.Record(context.Background(), audit.Event{
			Time: time.Now(), RequestID: newRequestID(), Subject: e.subject, Op: string(op),
			GuestPath: auditGuestPath(name), Outcome: audit.Denied, Code: string(vfs.CodeInvalidPath), Rule: "invalid-name",
		})
	}
	return invalidName(method, name)
}

func (v *fsView) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, v.refuse(policy.OpRead, "open", name)
	}
	h, err := v.d.Open(context.Background(), name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (v *fsView) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, v.refuse(policy.OpList, "readdir", name)
	}
	return v.d.ReadDir(context.Background(), name)
}

func (v *fsView) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, v.refuse(policy.OpRead, "readfile", name)
	}
	return v.d.ReadFile(context.Background(), name)
}

func (v *fsView) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, v.refuse(policy.OpStat, "stat", name)
	}
	return v.d.Stat(context.Background(), name)
}

func (v *fsView) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, v.refuse(policy.OpStat, "lstat", name)
	}
	return v.d.Lstat(context.Background(), name)
}

func (v *fsView) ReadLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", v.refuse(policy.OpReadlink, "readlink", name)
	}
	return v.d.Readlink(context.Background(), name)
}

func (v *fsView) Sub(dir string) (fs.FS, error) {
	if !fs.ValidPath(dir) {
		return nil, v.refuse(policy.OpSub, "sub", dir)
	}
	if dir == "." {
		return v, nil
	}
	sub, err := v.d.Sub(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	return sub.FS(), nil
}

func (v *fsView) Glob(pattern string) ([]string, error) {
	var out []string
	c := &call{sp: specGlob, path: pattern}
	c.prepare = func() error {
		if _, err := path.Match(pattern, ""); err != nil {
			e := errAt(vfs.CodeInvalidPath, "Glob", pattern, "", "malformed glob pattern")
			e.Err = err
			return e
		}
		lit := vfs.Root
		if dir, _ := path.Split(pattern); dir != "" && !hasMeta(dir) && fs.ValidPath(dir[:len(dir)-1]) {
			lit, _ = vfs.ParseGuest(dir)
		}
		c.p = lit
		return nil
	}
	err := v.d.do(context.Background(), c, func(ctx context.Context) error {
		g := &innerFS{s: &v.d.s, ctx: ctx, c: c}
		matches, err := matchGlob(g, pattern)
		if g.fatal != nil {
			return g.fatal
		}
		if err != nil {
			return err
		}
		slices.Sort(matches)
		out = slices.Compact(matches)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Backend returns d as a vfs.Backend, with all of d's checks: every call is one
// enforced, audited call on d (revocation, read-only, policy, hooks, audit), and
// symlinks it creates must stay inside d, as with Dir.Symlink. Use it to mount a
// capability into another vfs.Namespace or to run the vfstest suite over a Dir.
// Paths are relative to d's root; errors are addressed to them. Features reports
// ReadOnly when d is read-only or locked at the time of the call. Files it opens are
// Handles, with their per-call checks. The perm given to OpenFile and Mkdir keeps
// only the permission bits and sticky; setuid and setgid are dropped (Chmod refuses
// them with fs_permission_denied, as Dir.Chmod does).
func (d *Dir) Backend() vfs.Backend { return &backendView{d: d} }

type backendView struct {
	d *Dir
	// verbatimLinks stores symlink targets as given, as the SPI itself does, instead
	// of applying Dir.Symlink's rule. Only tests set it (export_test.go), to run the
	// full conformance suite, whose seeds include escaping links, over the view.
	verbatimLinks bool
}

var (
	_ vfs.Backend      = (*backendView)(nil)
	_ vfs.StatResolver = (*backendView)(nil)
)

func (v *backendView) do(ctx context.Context, sp *spec, p vfs.Path, fn func(ctx context.Context, p vfs.Path) error) error {
	c := call{sp: sp, path: p.String(), p: p}
	return v.d.s.run(ctx, &c, func(ctx context.Context) error { return fn(ctx, c.rp) })
}

// call2 is the call of a two-path method of sp (neither end followed).
func call2(sp *spec, p, q vfs.Path) call {
	return call{sp: sp, path: p.String(), dest: q.String(), p: p, q: q}
}

func (v *backendView) Features() vfs.Features {
	f := v.d.s.b.Features()
	if v.d.s.ro || !v.d.s.gate.writable() {
		f.ReadOnly = true
	}
	return f
}

func (v *backendView) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, specViewStat, p)
}

// stat is Stat (specViewStat) or Lstat (specViewLstat): the status the
// resolution that decided the call found, where it found one, else the
// backend's.
func (v *backendView) stat(ctx context.Context, sp *spec, p vfs.Path) (vfs.Info, error) {
	info, _, err := v.statAt(ctx, sp, p)
	return info, err
}

// statAt is stat, with the path the call acted on: p's canonical location,
// marked Resolved, where the Dir resolves its calls (a policy or hooks to
// serve), else p as given.
func (v *backendView) statAt(ctx context.Context, sp *spec, p vfs.Path) (vfs.Info, vfs.Path, error) {
	var info vfs.Info
	fol := sp.fol
	c := call{sp: sp, path: p.String(), p: p}
	err := v.d.s.run(ctx, &c, func(ctx context.Context) error {
		got, known, err := c.resolvedStat(fol == followFinal)
		if known {
			info = got
			return err
		}
		if fol == followFinal {
			info, err = v.d.s.b.Stat(ctx, c.rp)
		} else {
			info, err = v.d.s.b.Lstat(ctx, c.rp)
		}
		return err
	})
	if err == nil {
		info.Name = baseOrDot(p)
	}
	return info, c.rp, err
}

func (v *backendView) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	return v.stat(ctx, specViewLstat, p)
}

func (v *backendView) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	var ents []vfs.DirEntry
	err := v.do(ctx, specViewReadDir, p, func(ctx context.Context, rp vfs.Path) error {
		var err error
		ents, err = v.d.s.b.ReadDir(ctx, rp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ents, nil
}

// ReadDirInfo lists p with every entry's status (vfs.DirInfoReader), in one
// pass where the backend can, decided as ReadDir and an Lstat of each entry
// through this view would be: the listing as a readdir (audited as one call),
// each entry as a stat of its path as listed and of its canonical path (the
// directory's and the name: a status does not follow the entry). An entry the
// policy refuses keeps its name and type, as ReadDir shows them, and carries
// the refusal its Lstat would give (fs_permission_denied naming it) in Err; each
// such refusal is audited as a denied stat.
func (v *backendView) ReadDirInfo(ctx context.Context, p vfs.Path) ([]vfs.DirInfo, error) {
	var infos []vfs.DirInfo
	s := v.d.s
	c := call{sp: specViewDirInfo, path: p.String(), p: p}
	err := s.run(ctx, &c, func(ctx context.Context) error {
		var err error
		infos, err = vfs.ReadDirInfo(ctx, s.b, c.rp)
		if err != nil || !s.env.customPolicy || c.req == nil {
			return err
		}
		dir, canonDir := c.p.WithoutDirMark(), c.rp.WithoutDirMark()
		for i := range infos {
			if infos[i].Err != nil {
				continue
			}
			lex, err := dir.Child(infos[i].Name)
			if err != nil {
				return err
			}
			canon, err := canonDir.Child(infos[i].Name)
			if err != nil {
				return err
			}
			if d, ok := s.allowEntry(ctx, &c, policy.OpStat, lex, canon); !ok {
				s.auditEntryRefusal(ctx, &c, policy.OpStat, lex, canon, d)
				infos[i] = vfs.DirInfo{
					Info: vfs.Info{Name: infos[i].Name, Mode: infos[i].Mode.Type()},
					Err:  errAt(vfs.CodePermission, "lstat", lex.String(), "", denyReason(d)),
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

func (v *backendView) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	var h *Handle
	c := call{sp: specViewOpen.of(flag), path: p.String(), p: p}
	err := v.d.s.run(ctx, &c, func(ctx context.Context) error {
		var err error
		h, err = v.d.s.openAs(ctx, &c, p.String(), flag, perm)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fileOf(h), nil
}

func (v *backendView) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	return v.do(ctx, specViewMkdir, p, func(ctx context.Context, rp vfs.Path) error {
		return v.d.s.b.Mkdir(ctx, rp, createPerm(perm))
	})
}

func (v *backendView) Remove(ctx context.Context, p vfs.Path) error {
	return v.do(ctx, specViewRemove, p, func(ctx context.Context, rp vfs.Path) error {
		return v.d.s.b.Remove(ctx, rp)
	})
}

func (v *backendView) Rename(ctx context.Context, from, to vfs.Path, flags vfs.RenameFlags) error {
	c := call2(specViewRename, from, to)
	return v.d.s.run(ctx, &c, func(ctx context.Context) error {
		if v.d.s.env.customPolicy {
			if err := v.d.s.checkSubtree(ctx, &c, "rename", c.rp, c.rq, policy.OpRename); err != nil {
				return err
			}
			if flags&vfs.RenameExchange != 0 {
				if err := v.d.s.checkSubtree(ctx, &c, "rename", c.rq, c.rp, policy.OpRename); err != nil {
					return err
				}
			}
		}
		return v.d.s.b.Rename(ctx, c.rp, c.rq, flags)
	})
}

func (v *backendView) Symlink(ctx context.Context, target string, p vfs.Path) error {
	c := &call{sp: specViewSymlink, path: p.String(), dest: target, p: p}
	if v.verbatimLinks {
		c.sp, c.dest = specViewSymlinkVerbatim, ""
	}
	return v.d.s.run(ctx, c, func(ctx context.Context) error {
		if !v.verbatimLinks {
			if err := v.d.s.dataLinkLands(ctx, c, target); err != nil {
				return err
			}
		}
		return v.d.s.b.Symlink(ctx, target, c.rp)
	})
}

func (v *backendView) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	var t string
	err := v.do(ctx, specViewReadlink, p, func(ctx context.Context, rp vfs.Path) error {
		var err error
		t, err = v.d.s.b.Readlink(ctx, rp)
		return err
	})
	return t, err
}

func (v *backendView) Link(ctx context.Context, oldp, newp vfs.Path) error {
	c := call2(specViewLink, oldp, newp)
	return v.d.s.run(ctx, &c, func(ctx context.Context) error {
		return v.d.s.b.Link(ctx, c.rp, c.rq)
	})
}

func (v *backendView) Chmod(ctx context.Context, p vfs.Path, mode fs.FileMode) error {
	return v.do(ctx, specViewChmod, p, func(ctx context.Context, rp vfs.Path) error {
		m, err := chmodMode(mode)
		if err != nil {
			return vfs.NewError(vfs.CodePermission, "chmod", p, err.Error())
		}
		return v.d.s.b.Chmod(ctx, rp, m)
	})
}

func (v *backendView) Chtimes(ctx context.Context, p vfs.Path, atime, mtime time.Time) error {
	return v.do(ctx, specViewChtimes, p, func(ctx context.Context, rp vfs.Path) error {
		return v.d.s.b.Chtimes(ctx, rp, atime, mtime)
	})
}

func (v *backendView) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	var out vfs.Backend
	err := v.do(ctx, specViewSub, p, func(ctx context.Context, rp vfs.Path) error {
		sub, err := v.d.s.b.Sub(ctx, rp)
		if err != nil {
			return err
		}
		out = &backendView{d: v.d.derive(ctx, sub, rp), verbatimLinks: v.verbatimLinks}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// baseOrDot is p's name as a Stat of it reports it.
func baseOrDot(p vfs.Path) string {
	if p.IsRoot() {
		return "."
	}
	return p.Base()
}

// handleFile presents a Handle as a vfs.File.
type handleFile struct{ *Handle }

func (f handleFile) Stat() (vfs.Info, error) { return f.Handle.stat() }

// OpenStat is the Handle's OpenStat as a vfs.Info (vfs.OpenStater).
func (f handleFile) OpenStat() (vfs.Info, bool) { return f.Handle.openStat() }

// Type forwards to the backend's File (vfs.TypedFile; [fileOf] claims it
// only where that file has it).
func (f handleFile) Type() fs.FileMode { return f.f.(vfs.TypedFile).Type() }

// fileOf presents h as a vfs.File with exactly the optional File interfaces
// the backend's file has ([vfs.WrapFile]).
func fileOf(h *Handle) vfs.File { return vfs.WrapFile(handleFile{h}, h.f) }

// ResolveStat resolves p in d and stats what it reaches (vfs.StatResolver):
// where d resolves its calls canonically, one enforced call, decided and
// audited as Stat (follow) or Lstat of p, whose location is the one the
// decision was made on. Otherwise, and for an absent entry (whose resolution
// may not say which name was missing), Resolve and then a status of what it
// reached.
func (v *backendView) ResolveStat(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, vfs.Info, error) {
	sp := specViewLstat
	if follow {
		sp = specViewStat
	}
	info, rp, err := v.statAt(ctx, sp, p)
	if err == nil && rp.IsResolved() {
		return vfs.Location{Path: rp.WithoutDirMark(), Found: true, Type: info.Mode.Type()}, info, nil
	}
	if err != nil && vfs.CodeOf(err) != vfs.CodeNotFound {
		return vfs.Location{}, vfs.Info{}, err
	}
	loc, err := v.Resolve(ctx, p, follow)
	if err != nil || !loc.Found {
		return loc, vfs.Info{}, err
	}
	info, err = v.stat(ctx, sp, loc.Path)
	if err != nil {
		return vfs.Location{}, vfs.Info{}, err
	}
	return loc, info, nil
}

// Resolve resolves p in d as one enforced call (decided as a stat of p: it reveals
// what a stat would).
func (v *backendView) Resolve(ctx context.Context, p vfs.Path, follow bool) (vfs.Location, error) {
	var out vfs.Location
	err := v.do(ctx, specViewResolve, p, func(ctx context.Context, _ vfs.Path) error {
		loc, err := v.d.s.b.Resolve(ctx, p, follow)
		out = loc
		return err
	})
	return out, err
}

// The view keeps the optional interfaces of vfs.Optionals, each as enforced
// calls on d: StatResolver and DirInfoReader above, Chowner in chown.go,
// ListResolver, OpenResolver and HostLinkResolver here. It withholds two:
// HostPather, since binding the host directory would bypass d's policy, audit
// and revocation; and Locator, since it answers a path from the origin's root,
// above d's, which a capability does not reveal.
var (
	_ vfs.ListResolver     = (*backendView)(nil)
	_ vfs.OpenResolver     = (*backendView)(nil)
	_ vfs.HostLinkResolver = (*backendView)(nil)
)

// ResolveReadDir lists p as ReadDir does, one enforced readdir call, and
// through the backend's fused call (vfs.ResolveReadDir) on the location the
// Dir decided on, so that decide rules on what is listed. An error of decide
// is returned unchanged.
func (v *backendView) ResolveReadDir(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) ([]vfs.DirEntry, vfs.Location, error) {
	var (
		ents []vfs.DirEntry
		loc  vfs.Location
		derr error
	)
	err := v.do(ctx, specViewReadDir, p, func(ctx context.Context, rp vfs.Path) error {
		var err error
		ents, loc, err = vfs.ResolveReadDir(ctx, v.d.s.b, rp, func(l vfs.Location) error {
			derr = decide(l)
			return derr
		})
		return err
	})
	if derr != nil {
		return nil, loc, derr
	}
	if err != nil {
		return nil, vfs.Location{}, err
	}
	return ents, loc, nil
}

// ResolveOpen is vfs.ResolveOpen's fallback over the view's own enforced
// Resolve and OpenFile, so the File is a Handle with its per-call checks; the
// backend's fused open serves the view's OpenFile where d fuses opens.
func (v *backendView) ResolveOpen(ctx context.Context, p vfs.Path, decide func(vfs.Location) error) (vfs.File, vfs.Location, error) {
	return vfs.ResolveOpen(ctx, struct{ vfs.Backend }{v}, p, decide)
}

// HostLinkTarget reports where host link p leads in d (vfs.HostLinkResolver),
// one enforced call decided as a readlink of p: the backend's answer, a path
// beneath d's root, or ok false where the backend has no host links.
func (v *backendView) HostLinkTarget(ctx context.Context, p vfs.Path) (vfs.Path, bool, error) {
	var (
		rel vfs.Path
		ok  bool
	)
	err := v.do(ctx, specViewReadlink, p, func(ctx context.Context, rp vfs.Path) error {
		h, has := v.d.s.b.(vfs.HostLinkResolver)
		if !has {
			return nil
		}
		var err error
		rel, ok, err = h.HostLinkTarget(ctx, rp)
		return err
	})
	if err != nil {
		return vfs.Path{}, false, err
	}
	return rel, ok, nil
}
