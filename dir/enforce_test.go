package dir_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// spy wraps a backend and logs every call (its Subs too).
type spy struct {
	vfs.Backend
	mu  *sync.Mutex
	log *[]string
	n   *atomic.Int64
}

func newSpy(b vfs.Backend, log *[]string, mu *sync.Mutex) *spy {
	return &spy{Backend: b, mu: mu, log: log, n: new(atomic.Int64)}
}

func (s *spy) rec(op string) {
	s.n.Add(1)
	s.mu.Lock()
	*s.log = append(*s.log, "backend:"+op)
	s.mu.Unlock()
}

func (s *spy) Stat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	s.rec("stat")
	return s.Backend.Stat(ctx, p)
}
func (s *spy) Lstat(ctx context.Context, p vfs.Path) (vfs.Info, error) {
	s.rec("lstat")
	return s.Backend.Lstat(ctx, p)
}
func (s *spy) ReadDir(ctx context.Context, p vfs.Path) ([]vfs.DirEntry, error) {
	s.rec("readdir")
	return s.Backend.ReadDir(ctx, p)
}
func (s *spy) OpenFile(ctx context.Context, p vfs.Path, flag int, perm fs.FileMode) (vfs.File, error) {
	s.rec("open")
	return s.Backend.OpenFile(ctx, p, flag, perm)
}
func (s *spy) Mkdir(ctx context.Context, p vfs.Path, perm fs.FileMode) error {
	s.rec("mkdir")
	return s.Backend.Mkdir(ctx, p, perm)
}
func (s *spy) Remove(ctx context.Context, p vfs.Path) error {
	s.rec("remove")
	return s.Backend.Remove(ctx, p)
}
func (s *spy) Rename(ctx context.Context, a, b vfs.Path, f vfs.RenameFlags) error {
	s.rec("rename")
	return s.Backend.Rename(ctx, a, b, f)
}
func (s *spy) Symlink(ctx context.Context, t string, p vfs.Path) error {
	s.rec("symlink")
	return s.Backend.Symlink(ctx, t, p)
}
func (s *spy) Readlink(ctx context.Context, p vfs.Path) (string, error) {
	s.rec("readlink")
	return s.Backend.Readlink(ctx, p)
}
func (s *spy) Link(ctx context.Context, a, b vfs.Path) error {
	s.rec("link")
	return s.Backend.Link(ctx, a, b)
}
func (s *spy) Chmod(ctx context.Context, p vfs.Path, m fs.FileMode) error {
	s.rec("chmod")
	return s.Backend.Chmod(ctx, p, m)
}
func (s *spy) Chtimes(ctx context.Context, p vfs.Path, a, m time.Time) error {
	s.rec("chtimes")
	return s.Backend.Chtimes(ctx, p, a, m)
}
func (s *spy) Sub(ctx context.Context, p vfs.Path) (vfs.Backend, error) {
	s.rec("sub")
	b, err := s.Backend.Sub(ctx, p)
	if err != nil {
		return nil, err
	}
	return &spy{Backend: b, mu: s.mu, log: s.log, n: s.n}, nil
}

// logSink is an audit sink that appends to the shared log.
type logSink struct {
	mu  *sync.Mutex
	log *[]string
	evs []audit.Event
}

func (l *logSink) Record(_ context.Context, e audit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.log = append(*l.log, "audit:"+string(e.Outcome))
	l.evs = append(l.evs, e)
}

// fixture is a Dir over a spied memory backend with a logging policy, two
// recording hooks and a logging audit sink, all writing to one log.
type fixture struct {
	mu     sync.Mutex
	log    []string
	spy    *spy
	sink   *logSink
	h1, h2 *recorder
	deny   func(r *policy.Request) policy.Decision // nil: allow
	asker  policy.Asker
	d      *dir.Dir
	ctl    *dir.Control
}

func newFixture(t *testing.T, extra ...dir.Option) *fixture {
	t.Helper()
	f := &fixture{}
	m := memory.New()
	seedBackend(t, m)
	f.spy = newSpy(m, &f.log, &f.mu)
	f.sink = &logSink{mu: &f.mu, log: &f.log}
	f.h1 = &recorder{name: "h1", log: &f.log}
	f.h2 = &recorder{name: "h2", log: &f.log}
	pol := policy.Func(func(ctx context.Context, r *policy.Request) policy.Decision {
		f.mu.Lock()
		f.log = append(f.log, "policy:"+string(r.Op)+":"+r.Path)
		f.mu.Unlock()
		if f.deny != nil {
			return f.deny(r)
		}
		return policy.Decision{Effect: policy.Allow, Rule: "test-allow"}
	})
	opts := []dir.Option{
		dir.WithSubject("agent-7"), dir.WithPolicy(pol), dir.WithHooks(f.h1, f.h2),
		dir.WithAudit(f.sink), dir.WithAsker(policy.AskFunc(func(ctx context.Context, r *policy.Request, d policy.Decision) (bool, error) {
			if f.asker == nil {
				return false, errors.New("no asker in this test")
			}
			return f.asker.Ask(ctx, r, d)
		})),
	}
	f.d, f.ctl = dir.New(f.spy, append(opts, extra...)...)
	return f
}

func (f *fixture) reset() {
	f.mu.Lock()
	f.log = nil
	f.sink.evs = nil
	f.mu.Unlock()
	f.spy.n.Store(0)
}

func (f *fixture) logged() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *fixture) events() []audit.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sink.evs)
}

// compact drops the backend's individual calls, keeping one "backend" marker for
// the run of them.
func compact(log []string) []string {
	var out []string
	for _, l := range log {
		if strings.HasPrefix(l, "backend:") {
			if len(out) > 0 && out[len(out)-1] == "backend" {
				continue
			}
			l = "backend"
		}
		out = append(out, l)
	}
	return out
}

func TestEnforcementOrder(t *testing.T) {
	f := newFixture(t)
	f.reset()
	must(t, f.d.WriteFile(bg, "dir/b.txt", []byte("x"), 0o644))
	want := []string{
		"policy:write:dir/b.txt",
		"h1.before:write:dir/b.txt",
		"h2.before:write:dir/b.txt",
		"backend",
		"h2.after:write",
		"h1.after:write",
		"audit:ok",
	}
	if got := compact(f.logged()); !slices.Equal(got, want) {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
}

func TestEnforcementOrderRefusals(t *testing.T) {
	t.Run("revoked beats everything", func(t *testing.T) {
		f := newFixture(t)
		ro := f.d.ReadOnly()
		f.ctl.Revoke()
		f.reset()
		// Invalid path, outside path, read-only write: all report revoked.
		_, err := f.d.Stat(bg, "a\x00b")
		wantCode(t, err, vfs.CodeRevoked)
		_, err = f.d.Stat(bg, "../x")
		wantCode(t, err, vfs.CodeRevoked)
		wantCode(t, ro.WriteFile(bg, "a.txt", nil, 0o644), vfs.CodeRevoked)
		if got := f.logged(); !slices.Equal(got, []string{"audit:denied", "audit:denied", "audit:denied"}) {
			t.Fatalf("log = %q", got)
		}
		for _, e := range f.events() {
			if e.Code != "revoked" || e.Rule != "revoked" {
				t.Fatalf("event %+v", e)
			}
		}
	})
	t.Run("path before read-only", func(t *testing.T) {
		f := newFixture(t)
		ro := f.d.ReadOnly()
		f.reset()
		wantCode(t, ro.WriteFile(bg, "../x", nil, 0o644), vfs.CodeOutside)
		wantCode(t, ro.WriteFile(bg, "a\\b", nil, 0o644), vfs.CodeInvalidPath)
		if got := f.logged(); !slices.Equal(got, []string{"audit:failed", "audit:failed"}) {
			t.Fatalf("log = %q", got)
		}
		ev := f.events()[0]
		if ev.Path != "" || ev.GuestPath != "../x" || ev.Code != "path_outside_sandbox" {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("read-only before policy", func(t *testing.T) {
		f := newFixture(t)
		ro := f.d.ReadOnly()
		f.reset()
		wantCode(t, ro.WriteFile(bg, "a.txt", nil, 0o644), vfs.CodeReadOnly)
		if got := f.logged(); !slices.Equal(got, []string{"audit:denied"}) {
			t.Fatalf("log = %q", got)
		}
		if e := f.events()[0]; e.Rule != "read-only" || e.Code != "read_only" || e.Path != "a.txt" {
			t.Fatalf("event %+v", e)
		}
	})
	t.Run("policy deny: no hook, no backend", func(t *testing.T) {
		f := newFixture(t)
		f.deny = func(r *policy.Request) policy.Decision {
			return policy.Decision{Effect: policy.Deny, Rule: "deny:test", Reason: "tests say no"}
		}
		f.reset()
		err := f.d.WriteFile(bg, "a.txt", []byte("evil"), 0o644)
		wantCode(t, err, vfs.CodePermission)
		if !strings.Contains(err.Error(), "tests say no") {
			t.Fatalf("reason missing: %v", err)
		}
		if got := f.logged(); !slices.Equal(got, []string{"policy:write:a.txt", "audit:denied"}) {
			t.Fatalf("log = %q", got)
		}
		if e := f.events()[0]; e.Rule != "deny:test" || e.Outcome != audit.Denied {
			t.Fatalf("event %+v", e)
		}
		f.deny = nil
		if readString(t, f.d, "a.txt") != "alpha" {
			t.Fatal("denied write changed the file")
		}
	})
	t.Run("hook refusal", func(t *testing.T) {
		f := newFixture(t)
		veto := errors.New("h2 vetoes")
		f.h2.refuse = veto
		f.reset()
		err := f.d.Remove(bg, "a.txt")
		wantCode(t, err, vfs.CodePermission)
		if !errors.Is(err, veto) {
			t.Fatal("the hook's error must be the cause")
		}
		want := []string{"policy:remove:a.txt", "h1.before:remove:a.txt", "h2.before:remove:a.txt", "h1.after:remove", "audit:denied"}
		if got := f.logged(); !slices.Equal(got, want) {
			t.Fatalf("log:\n got %q\nwant %q", got, want)
		}
		if f.spy.n.Load() != 0 {
			t.Fatal("backend touched after a hook refused")
		}
		if e := f.events()[0]; e.Rule != "hook:h2" {
			t.Fatalf("event %+v", e)
		}
		if f.h1.afters[len(f.h1.afters)-1] == nil {
			t.Fatal("h1.After must see the refusal")
		}
		f.h2.refuse = &vfs.Error{Code: vfs.CodeQuota}
		wantCode(t, f.d.Remove(bg, "a.txt"), vfs.CodeQuota)
		f.h2.refuse = nil
		if ok, _ := f.d.Exists(bg, "a.txt"); !ok {
			t.Fatal("refused Remove removed")
		}
	})
	t.Run("after hooks see the error", func(t *testing.T) {
		f := newFixture(t)
		f.reset()
		_, err := f.d.ReadFile(bg, "missing")
		wantCode(t, err, vfs.CodeNotFound)
		if got := vfs.CodeOf(f.h1.afters[0]); got != vfs.CodeNotFound {
			t.Fatalf("After got %v", f.h1.afters[0])
		}
		if e := f.events()[0]; e.Outcome != audit.Failed || e.Code != "not_found" {
			t.Fatalf("event %+v", e)
		}
	})
}

func TestAsk(t *testing.T) {
	f := newFixture(t)
	f.deny = func(r *policy.Request) policy.Decision {
		if strings.HasSuffix(r.Path, ".env") {
			return policy.Decision{Effect: policy.Ask, Rule: "ask:env"}
		}
		return policy.Decision{Effect: policy.Allow}
	}
	var asked []string
	answer := func(ok bool, err error) {
		f.asker = policy.AskFunc(func(_ context.Context, r *policy.Request, d policy.Decision) (bool, error) {
			asked = append(asked, r.Path+"|"+d.Rule)
			return ok, err
		})
	}
	answer(true, nil)
	if readString(t, f.d, "other/.env") != "SECRET=1\n" {
		t.Fatal("approved read")
	}
	answer(false, nil)
	_, err := f.d.ReadFile(bg, "other/.env")
	wantCode(t, err, vfs.CodePermission)
	answer(true, errors.New("prompt failed"))
	_, err = f.d.ReadFile(bg, "other/.env")
	wantCode(t, err, vfs.CodePermission)
	if !slices.Equal(asked, []string{"other/.env|ask:env", "other/.env|ask:env", "other/.env|ask:env"}) {
		t.Fatalf("asked %q", asked)
	}
	ev := f.events()
	if ev[len(ev)-1].Rule != "ask:env" || ev[len(ev)-1].Outcome != audit.Denied {
		t.Fatalf("event %+v", ev[len(ev)-1])
	}

	// Without an Asker, Ask denies.
	m := memory.New()
	seedBackend(t, m)
	d, _ := dir.New(m, dir.WithPolicy(policy.Func(func(context.Context, *policy.Request) policy.Decision {
		return policy.Decision{Effect: policy.Ask}
	})))
	_, err = d.ReadFile(bg, "a.txt")
	wantCode(t, err, vfs.CodePermission)
}

func TestOneAuditEventPerCall(t *testing.T) {
	ring := audit.NewRing(1000)
	root, ctl, _ := newTree(t, dir.WithAudit(ring), dir.WithSubject("s1"))
	sub, err := root.Sub(bg, "dir") // 1
	must(t, err)
	calls := []func() error{
		func() error { _, err := root.List(bg, ""); return err },
		func() error { _, err := root.ReadFile(bg, "missing"); return err },
		func() error { _, err := root.Stat(bg, "../x"); return err },
		func() error { return root.ReadOnly().WriteFile(bg, "a.txt", nil, 0o644) },
		func() error { return root.WriteFile(bg, "w.txt", []byte("w"), 0o644) },
		func() error { return root.Copy(bg, "dir", "dir2") },
		func() error { return root.Move(bg, "dir2", "dir3") },
		func() error { return root.RemoveAll(bg, "dir3") },
		func() error { _, err := root.Glob(bg, "**/*.go"); return err },
		func() error {
			return root.Walk(bg, "", func(string, fs.DirEntry, error) error { return nil })
		},
		func() error { _, err := sub.ReadFile(bg, "b.txt"); return err },
		func() error { f, err := sub.OpenFile(bg, "b.txt"); _ = f; return err },
		func() error { _, err := root.FS().Open("a.txt"); return err },
		func() error { _, err := root.Backend().Stat(bg, vfs.MustParse("a.txt")); return err },
		func() error { _, err := fs.ReadFile(root.FS(), "a.txt"); return err },
	}
	for _, c := range calls {
		_ = c()
	}
	ctl.Revoke()
	_, _ = root.List(bg, "")
	want := 1 + len(calls) + 1
	evs := ring.Events()
	if len(evs) != want {
		for _, e := range evs {
			t.Logf("%+v", e)
		}
		t.Fatalf("%d events, want %d", len(evs), want)
	}
	ids := map[string]bool{}
	for _, e := range evs {
		if ids[e.RequestID] || e.RequestID == "" {
			t.Fatalf("request id %q repeated or empty", e.RequestID)
		}
		ids[e.RequestID] = true
		if e.Subject != "s1" {
			t.Fatalf("subject %q", e.Subject)
		}
	}
	byGuest := map[string]audit.Event{}
	for _, e := range evs {
		byGuest[e.Op+" "+e.GuestPath] = e
	}
	if e := byGuest["read b.txt"]; e.Path != "dir/b.txt" || e.Outcome != audit.OK {
		t.Fatalf("Sub read event %+v: Path must be from the tree root", e)
	}
	if e := byGuest["copy dir"]; e.Dest != "dir2" || e.Outcome != audit.OK {
		t.Fatalf("copy event %+v", e)
	}
	if e := byGuest["write a.txt"]; e.Outcome != audit.Denied || e.Code != "read_only" {
		t.Fatalf("read-only event %+v", e)
	}
	if e := byGuest["read missing"]; e.Outcome != audit.Failed || e.Code != "not_found" {
		t.Fatalf("missing event %+v", e)
	}
	if evs[len(evs)-1].Code != "revoked" {
		t.Fatalf("last event %+v", evs[len(evs)-1])
	}
}

func TestPolicySeesTreePaths(t *testing.T) {
	var mu sync.Mutex
	var reqs []policy.Request
	pol := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		mu.Lock()
		reqs = append(reqs, *r)
		mu.Unlock()
		return policy.Decision{Effect: policy.Allow}
	})
	root, _, _ := newTree(t, dir.WithPolicy(pol))
	sub, err := root.Sub(bg, "dir/sub")
	must(t, err)
	deep, err := sub.OpenDir(bg, "deep")
	must(t, err)
	reqs = nil
	_, _ = deep.ReadFile(bg, "/d.go")
	must(t, sub.Symlink(bg, "deep/d.go", "ln"))
	must(t, sub.Move(bg, "ln", "deep/ln2"))
	f, err := deep.OpenFile(bg, "e.txt")
	must(t, err)
	must(t, f.WriteText(bg, "E"))
	want := []policy.Request{
		{Op: policy.OpRead, Path: "dir/sub/deep/d.go", GuestPath: "/d.go"},
		{Op: policy.OpSymlink, Path: "dir/sub/ln", Dest: "dir/sub/deep/d.go", GuestPath: "ln"},
		{Op: policy.OpRename, Path: "dir/sub/ln", Dest: "dir/sub/deep/ln2", GuestPath: "ln"},
		{Op: policy.OpSub, Path: "dir/sub/deep/e.txt", GuestPath: "e.txt"},
		{Op: policy.OpWrite, Path: "dir/sub/deep/e.txt", GuestPath: "e.txt", Size: 1},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests: %+v", len(reqs), reqs)
	}
	for i, w := range want {
		g := reqs[i]
		if w.Size == 0 {
			w.Size = -1 // unknown, for everything but writes of known length
		}
		if g.Op != w.Op || g.Path != w.Path || g.Dest != w.Dest || g.GuestPath != w.GuestPath || g.Size != w.Size {
			t.Errorf("request %d = %+v, want %+v", i, g, w)
		}
		if g.ID == "" || g.Subject != "" {
			t.Errorf("request %d id/subject: %+v", i, g)
		}
	}
}

// denyEnv is a policy that denies anything under other/.env, like the default
// secret patterns.
var denyEnv = policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
	if r.Path == "other/.env" || r.Dest == "other/.env" || strings.HasSuffix(r.Dest, "/.env") {
		return policy.Decision{Effect: policy.Deny, Rule: "deny:**/.env"}
	}
	return policy.Decision{Effect: policy.Allow}
})

func TestCompositeCallsCheckInnerPaths(t *testing.T) {
	root, _, m := newTree(t, dir.WithPolicy(denyEnv))
	host, _ := dir.New(m)

	// RemoveAll of a directory holding a denied path removes nothing.
	err := root.RemoveAll(bg, "other")
	wantCode(t, err, vfs.CodePermission)
	if err.(*vfs.Error).Path != "other/.env" {
		t.Fatalf("error names %q", err.(*vfs.Error).Path)
	}
	wantList(t, host, "other", ".env", "x.md")

	// Copy and Move of it are refused before anything changes.
	wantCode(t, root.Copy(bg, "other", "copy"), vfs.CodePermission)
	if ok, _ := host.Exists(bg, "copy"); ok {
		t.Fatal("refused Copy created the destination")
	}
	wantCode(t, root.Move(bg, "other", "moved"), vfs.CodePermission)
	wantList(t, host, "other", ".env", "x.md")

	// Walk and Glob leave it out.
	var walked []string
	must(t, root.Walk(bg, "other", func(p string, d fs.DirEntry, err error) error {
		walked = append(walked, p)
		return err
	}))
	if !slices.Equal(walked, []string{"other", "other/x.md"}) {
		t.Fatalf("walked %q", walked)
	}
	got, err := root.Glob(bg, "other/*")
	must(t, err)
	if !slices.Equal(got, []string{"other/x.md"}) {
		t.Fatalf("glob %q", got)
	}
	_, err = root.Glob(bg, "other/.env") // a literal pattern is decided as that path
	wantCode(t, err, vfs.CodePermission)
	got, err = root.Glob(bg, "other/.e?v")
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("glob reaching a denied path = %q", got)
	}
	// A Sub sees the same policy with tree paths.
	sub, err := root.Sub(bg, "other")
	must(t, err)
	_, err = sub.ReadFile(bg, ".env")
	wantCode(t, err, vfs.CodePermission)
	// Moving a directory so that a file lands on a denied name is refused too.
	must(t, root.MkdirAll(bg, "stage"))
	must(t, root.WriteFile(bg, "stage/.env", []byte("x"), 0o644))
	wantCode(t, root.Move(bg, "stage", "other2"), vfs.CodePermission)
}

func TestDeniedOpsChangeNothing(t *testing.T) {
	f := newFixture(t)
	f.deny = func(r *policy.Request) policy.Decision {
		return policy.Decision{Effect: policy.Deny, Rule: "no"}
	}
	f.reset()
	for name, err := range writeAttempts(f.d) {
		if vfs.CodeOf(err) != vfs.CodePermission {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := f.spy.n.Load(); n != 0 {
		t.Fatalf("backend touched %d times by denied calls", n)
	}
	h, err := f.d.Open(bg, "a.txt", os.O_RDONLY, 0)
	if h != nil || vfs.CodeOf(err) != vfs.CodePermission {
		t.Fatalf("Open = %v, %v", h, err)
	}
}

// mutatingHook rewrites the request it is shown; the audit trail must not follow.
type mutatingHook struct{}

func (mutatingHook) Before(_ context.Context, r *policy.Request) error {
	r.Path = "elsewhere"
	return nil
}
func (mutatingHook) After(context.Context, *policy.Request, error) {}

func TestAuditSurvivesHooksAndPanics(t *testing.T) {
	ring := audit.NewRing(10)
	d, _, _ := newTree(t, dir.WithAudit(ring), dir.WithHooks(mutatingHook{}))
	_, err := d.ReadFile(bg, "a.txt")
	must(t, err)
	if e := ring.Events()[0]; e.Path != "a.txt" {
		t.Fatalf("audit path %q follows a hook's rewrite", e.Path)
	}

	ring2 := audit.NewRing(10)
	boom := policy.Func(func(context.Context, *policy.Request) policy.Decision { panic("policy bug") })
	d2, _, _ := newTree(t, dir.WithAudit(ring2), dir.WithPolicy(boom))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic must propagate")
			}
		}()
		_, _ = d2.ReadFile(bg, "a.txt")
	}()
	evs := ring2.Events()
	if len(evs) != 1 || evs[0].Outcome != audit.Failed || evs[0].Code != "panic" {
		t.Fatalf("events after a panic: %+v", evs)
	}
}
