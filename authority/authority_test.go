package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

var (
	ctx   = context.Background()
	agent = Subject{Kind: KindAgentRun, ID: "conv1/run7"}
	other = Subject{Kind: KindExtension, ID: "ext.search"}
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newTree returns a memory backend holding:
//
//	secret.txt
//	docs/readme.md
//	src/main.go
//	src/sub/x.txt
//	src/up -> ../secret.txt
func newTree(t *testing.T) vfs.Backend {
	t.Helper()
	b := memory.New()
	d, _ := dir.New(b)
	must(t, d.MkdirAll(ctx, "src/sub"))
	must(t, d.MkdirAll(ctx, "docs"))
	must(t, d.WriteFile(ctx, "secret.txt", []byte("s3cret"), 0o644))
	must(t, d.WriteFile(ctx, "docs/readme.md", []byte("# hi"), 0o644))
	must(t, d.WriteFile(ctx, "src/main.go", []byte("package main"), 0o644))
	must(t, d.WriteFile(ctx, "src/sub/x.txt", []byte("x"), 0o644))
	must(t, d.Symlink(ctx, "../secret.txt", "src/up"))
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// setup returns an authority with root "ws" registered and an audit ring.
func setup(t *testing.T, opts ...Option) (*Authority, *audit.Ring) {
	t.Helper()
	ring := audit.NewRing(1000)
	a := New(append([]Option{WithAudit(ring)}, opts...)...)
	must(t, a.Register("ws", newTree(t)))
	return a, ring
}

func request(access ...Access) GrantRequest {
	return GrantRequest{Subject: agent, Root: "ws", Access: access, Reason: "test", Source: SourceCore}
}

func grantOK(t *testing.T, a *Authority, req GrantRequest) (*dir.Dir, Grant) {
	t.Helper()
	d, g, err := a.Grant(ctx, req)
	if err != nil {
		t.Fatalf("Grant(%+v): %v", req, err)
	}
	return d, g
}

func wantCode(t *testing.T, what string, err error, code vfs.Code) {
	t.Helper()
	if vfs.CodeOf(err) != code {
		t.Fatalf("%s: error %v (code %q), want %q", what, err, vfs.CodeOf(err), code)
	}
}

func lastEvent(t *testing.T, r *audit.Ring) audit.Event {
	t.Helper()
	evs := r.Events()
	if len(evs) == 0 {
		t.Fatal("no audit events")
	}
	return evs[len(evs)-1]
}

// op is one guest call and the accesses it needs.
type op struct {
	name   string
	writes bool // a policy op that changes the tree (refused as read_only on a read-only Dir)
	needs  []Access
	call   func(d *dir.Dir) error
}

var ops = []op{
	{"Stat", false, []Access{Metadata}, func(d *dir.Dir) error { _, err := d.Stat(ctx, "src/main.go"); return err }},
	{"Lstat", false, []Access{Metadata}, func(d *dir.Dir) error { _, err := d.Lstat(ctx, "src/up"); return err }},
	{"Exists", false, []Access{Metadata}, func(d *dir.Dir) error { _, err := d.Exists(ctx, "src/main.go"); return err }},
	{"List", false, []Access{List}, func(d *dir.Dir) error { _, err := d.List(ctx, "src"); return err }},
	{"ReadDir", false, []Access{List}, func(d *dir.Dir) error { _, err := d.ReadDir(ctx, "src"); return err }},
	{"Walk", false, []Access{List}, func(d *dir.Dir) error {
		return d.Walk(ctx, ".", func(string, fs.DirEntry, error) error { return nil })
	}},
	{"Glob", false, []Access{List}, func(d *dir.Dir) error { _, err := d.Glob(ctx, "**/*.go"); return err }},
	{"ReadFile", false, []Access{Read}, func(d *dir.Dir) error { _, err := d.ReadFile(ctx, "src/main.go"); return err }},
	{"Readlink", false, []Access{Read}, func(d *dir.Dir) error { _, err := d.Readlink(ctx, "src/up"); return err }},
	{"OpenRead", false, []Access{Read}, func(d *dir.Dir) error {
		h, err := d.Open(ctx, "src/main.go", os.O_RDONLY, 0)
		if err == nil {
			err = h.Close()
		}
		return err
	}},
	{"WriteFile", true, []Access{Write}, func(d *dir.Dir) error { return d.WriteFile(ctx, "src/new.go", []byte("n"), 0o644) }},
	{"Append", true, []Access{Write}, func(d *dir.Dir) error { return d.Append(ctx, "src/main.go", []byte("\n")) }},
	{"CreateFile", true, []Access{Write}, func(d *dir.Dir) error { _, err := d.CreateFile(ctx, "src/created"); return err }},
	{"CreateDir", true, []Access{Write}, func(d *dir.Dir) error { _, err := d.CreateDir(ctx, "newdir"); return err }},
	{"MkdirAll", true, []Access{Write}, func(d *dir.Dir) error { return d.MkdirAll(ctx, "a/b/c") }},
	{"Symlink", true, []Access{Write}, func(d *dir.Dir) error { return d.Symlink(ctx, "main.go", "src/ln") }},
	{"Link", true, []Access{Write}, func(d *dir.Dir) error { return d.Link(ctx, "src/main.go", "src/hard") }},
	{"Chmod", true, []Access{Write}, func(d *dir.Dir) error { return d.Chmod(ctx, "src/main.go", 0o600) }},
	{"Chtimes", true, []Access{Write}, func(d *dir.Dir) error {
		return d.Chtimes(ctx, "src/main.go", time.Unix(1, 0), time.Unix(2, 0))
	}},
	{"Copy", true, []Access{Write, Read}, func(d *dir.Dir) error { return d.Copy(ctx, "docs/readme.md", "docs/copy.md") }},
	{"Remove", true, []Access{Delete}, func(d *dir.Dir) error { return d.Remove(ctx, "docs/readme.md") }},
	{"RemoveAll", true, []Access{Delete}, func(d *dir.Dir) error { return d.RemoveAll(ctx, "src") }},
	{"Move", true, []Access{Move}, func(d *dir.Dir) error { return d.Move(ctx, "docs/readme.md", "docs/moved.md") }},
	{"Sub", false, nil, func(d *dir.Dir) error { _, err := d.Sub(ctx, "src"); return err }},
	{"OpenFile", false, nil, func(d *dir.Dir) error { _, err := d.OpenFile(ctx, "src/main.go"); return err }},
}

func TestAccessListIsEnforcedPerOperation(t *testing.T) {
	grants := [][]Access{{Read}, {Write}, {Delete}, {List}, {Move}, {Metadata}, ReadOnlyAccess(), FullAccess(), {Write, Read}}
	for _, access := range grants {
		for _, o := range ops {
			t.Run(fmt.Sprintf("%v/%s", access, o.name), func(t *testing.T) {
				a, ring := setup(t)
				d, g := grantOK(t, a, request(access...))
				err := o.call(d)
				allowed := true
				for _, n := range o.needs {
					allowed = allowed && slices.Contains(access, n)
				}
				if allowed {
					if err != nil {
						t.Fatalf("grant %v: %s failed: %v", access, o.name, err)
					}
					if ev := lastEvent(t, ring); ev.Outcome != audit.OK || ev.Rule != "grant:"+g.ID {
						t.Fatalf("allowed call's event: %+v", ev)
					}
					return
				}
				if o.writes && !g.Writable() {
					wantCode(t, o.name, err, vfs.CodeReadOnly)
					return
				}
				wantCode(t, o.name, err, vfs.CodePermission)
				if !errors.Is(err, fs.ErrPermission) {
					t.Fatalf("%v does not match fs.ErrPermission", err)
				}
				ev := lastEvent(t, ring)
				if ev.Code != string(vfs.CodePermission) || ev.Subject != agent.String() || ev.Grant != g.ID {
					t.Fatalf("refusal's event: %+v", ev)
				}
				if o.name == "Copy" {
					// Refused on its source, an inner decision: the dir layer records
					// the call's own (allowing) rule, with outcome failed.
					return
				}
				if ev.Outcome != audit.Denied || ev.Rule != "grant:"+g.ID+":access" {
					t.Fatalf("refusal's event: %+v", ev)
				}
			})
		}
	}
}

func TestRefusedCallsChangeNothing(t *testing.T) {
	a, _ := setup(t)
	d, _ := grantOK(t, a, request(Write, List, Read)) // writable, but no Delete or Move
	wantCode(t, "RemoveAll", d.RemoveAll(ctx, "src"), vfs.CodePermission)
	wantCode(t, "Move", d.Move(ctx, "src/main.go", "main.go"), vfs.CodePermission)
	got, err := d.ReadFile(ctx, "src/main.go")
	if err != nil || string(got) != "package main" {
		t.Fatalf("after refused calls: %q, %v", got, err)
	}
	// RemoveAll of a directory needs Delete for every path inside, not just the top.
	d2, _ := grantOK(t, a, request(Delete, Read))
	if err := d2.RemoveAll(ctx, "src/sub"); err != nil {
		t.Fatalf("RemoveAll with Delete: %v", err)
	}
	if _, err := d.ReadFile(ctx, "src/sub/x.txt"); vfs.CodeOf(err) != vfs.CodeNotFound {
		t.Fatalf("src/sub/x.txt after RemoveAll: %v", err)
	}
}

func TestRequiredCoversEveryOperation(t *testing.T) {
	want := map[policy.Op]Access{
		policy.OpStat: Metadata, policy.OpList: List, policy.OpRead: Read, policy.OpReadlink: Read,
		policy.OpWrite: Write, policy.OpCreate: Write, policy.OpMkdir: Write, policy.OpCopy: Write,
		policy.OpSymlink: Write, policy.OpLink: Write, policy.OpChmod: Write, policy.OpChtimes: Write, policy.OpChown: Write,
		policy.OpRemove: Delete, policy.OpRename: Move, policy.OpSub: "",
	}
	for o, w := range want {
		if got, ok := Required(o); !ok || got != w {
			t.Errorf("Required(%s) = %q, %v; want %q", o, got, ok, w)
		}
	}
	if _, ok := Required("frobnicate"); ok {
		t.Error("Required knows an operation that does not exist")
	}
	// A grant refuses an operation it does not know, whatever its access.
	a, _ := setup(t)
	_, g := grantOK(t, a, request(FullAccess()...))
	a.mu.Lock()
	st := a.grants[g.ID]
	a.mu.Unlock()
	d := (&grantPolicy{g: st}).Decide(ctx, &policy.Request{Op: "frobnicate"})
	if d.Effect != policy.Deny || d.Rule != "grant:"+g.ID+":access" {
		t.Fatalf("unknown op: %+v", d)
	}
}

func TestExpiryWithFakeClock(t *testing.T) {
	clk := newFakeClock()
	a, ring := setup(t, WithClock(clk.Now))
	req := request(FullAccess()...)
	req.TTL = 10 * time.Minute
	d, g := grantOK(t, a, req)
	if !g.Expires.Equal(clk.Now().Add(10*time.Minute)) || g.Status != Active {
		t.Fatalf("record: %+v", g)
	}
	h, err := d.Open(ctx, "src/main.go", os.O_RDONLY, 0)
	must(t, err)
	defer h.Close()

	clk.Advance(10*time.Minute - time.Nanosecond)
	if _, err := d.ReadFile(ctx, "src/main.go"); err != nil {
		t.Fatalf("a nanosecond before expiry: %v", err)
	}
	if rec, _ := a.Lookup(g.ID); rec.Status != Active {
		t.Fatalf("status before expiry: %s", rec.Status)
	}

	clk.Advance(time.Nanosecond) // exactly at expiry
	_, err = d.ReadFile(ctx, "src/main.go")
	wantCode(t, "ReadFile at expiry", err, vfs.CodePermission)
	if ev := lastEvent(t, ring); ev.Rule != "grant:"+g.ID+":expired" || ev.Outcome != audit.Denied || ev.Grant != g.ID {
		t.Fatalf("expiry event: %+v", ev)
	}
	rec, err := a.Lookup(g.ID)
	if err != nil || rec.Status != Expired || !rec.Ended.Equal(clk.Now()) {
		t.Fatalf("record after expiry: %+v, %v", rec, err)
	}
	// The grant is revoked now: later calls, and the Handle opened before, say so.
	_, err = d.Stat(ctx, "src/main.go")
	wantCode(t, "Stat after expiry", err, vfs.CodeRevoked)
	_, err = h.Read(make([]byte, 4))
	wantCode(t, "Handle.Read after expiry", err, vfs.CodeRevoked)
	if len(a.Grants()) != 0 {
		t.Fatalf("Grants() lists an expired grant: %+v", a.Grants())
	}
	if all := a.ListAll(); len(all) != 1 || all[0].Status != Expired {
		t.Fatalf("ListAll() = %+v", all)
	}
	// Revoking an expired grant keeps it expired.
	must(t, a.Revoke(g.ID))
	if rec, _ := a.Lookup(g.ID); rec.Status != Expired {
		t.Fatalf("Revoke changed an expired grant to %s", rec.Status)
	}
}

func TestSweepStopsHandlesOfExpiredGrants(t *testing.T) {
	clk := newFakeClock()
	a, _ := setup(t, WithClock(clk.Now))
	req := request(Read)
	req.Expires = clk.Now().Add(time.Hour)
	d, g := grantOK(t, a, req)
	keep, _ := grantOK(t, a, request(Read))
	h, err := d.Open(ctx, "src/main.go", os.O_RDONLY, 0)
	must(t, err)
	defer h.Close()
	if n := a.Sweep(); n != 0 {
		t.Fatalf("Sweep before expiry ended %d grants", n)
	}
	clk.Advance(time.Hour)
	if _, err := h.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("without a sweep or a call, the Handle still works under a fake clock: %v", err)
	}
	if n := a.Sweep(); n != 1 {
		t.Fatalf("Sweep ended %d grants, want 1", n)
	}
	_, err = h.ReadAt(make([]byte, 1), 0)
	wantCode(t, "Handle after Sweep", err, vfs.CodeRevoked)
	if rec, _ := a.Lookup(g.ID); rec.Status != Expired {
		t.Fatalf("swept grant is %s", rec.Status)
	}
	if _, err := keep.ReadFile(ctx, "src/main.go"); err != nil {
		t.Fatalf("a grant without expiry stopped: %v", err)
	}
}

func TestExpiryTimerWithRealClock(t *testing.T) {
	a, _ := setup(t)
	req := request(Read)
	req.TTL = 20 * time.Millisecond
	d, g := grantOK(t, a, req)
	h, err := d.Open(ctx, "src/main.go", os.O_RDONLY, 0)
	must(t, err)
	defer h.Close()
	// Nothing calls the Dir: only the timer can revoke the Handle. Wait for it
	// (bounded, generously: this asserts that it happens, not when).
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.ReadAt(make([]byte, 1), 0)
		if vfs.CodeOf(err) == vfs.CodeRevoked {
			break
		}
		if err != nil {
			t.Fatalf("Handle failed with %v before revocation", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the expiry timer never revoked the grant")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rec, _ := a.Lookup(g.ID); rec.Status != Expired {
		t.Fatalf("status after the timer: %s", rec.Status)
	}
}

func TestRevoke(t *testing.T) {
	a, ring := setup(t)
	d, g := grantOK(t, a, request(Read, Write))
	f, err := d.OpenFile(ctx, "src/main.go")
	must(t, err)
	must(t, a.Revoke(g.ID))
	_, err = d.ReadFile(ctx, "src/main.go")
	wantCode(t, "ReadFile after Revoke", err, vfs.CodeRevoked)
	_, err = f.ReadBytes(ctx)
	wantCode(t, "File.ReadBytes after Revoke", err, vfs.CodeRevoked)
	if ev := lastEvent(t, ring); ev.Outcome != audit.Denied || ev.Grant != g.ID || ev.Subject != agent.String() {
		t.Fatalf("event after Revoke: %+v", ev)
	}
	rec, err := a.Lookup(g.ID)
	if err != nil || rec.Status != Revoked || rec.Ended.IsZero() {
		t.Fatalf("record after Revoke: %+v, %v", rec, err)
	}
	must(t, a.Revoke(g.ID)) // idempotent
	if err := a.Revoke("no-such-grant"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Revoke of an unknown id: %v", err)
	}
}

func TestRevokeSubject(t *testing.T) {
	a, _ := setup(t)
	d1, _ := grantOK(t, a, request(Read))
	d2, _ := grantOK(t, a, request(Read, List))
	_, g3 := grantOK(t, a, request(Read))
	must(t, a.Revoke(g3.ID))
	req := request(Read)
	req.Subject = other
	d4, g4 := grantOK(t, a, req)

	if n := a.RevokeSubject(agent); n != 2 {
		t.Fatalf("RevokeSubject revoked %d, want 2", n)
	}
	for i, d := range []*dir.Dir{d1, d2} {
		_, err := d.ReadFile(ctx, "src/main.go")
		wantCode(t, fmt.Sprint("grant ", i+1), err, vfs.CodeRevoked)
	}
	if _, err := d4.ReadFile(ctx, "src/main.go"); err != nil {
		t.Fatalf("another subject's grant stopped: %v", err)
	}
	if gs := a.Grants(); len(gs) != 1 || gs[0].ID != g4.ID {
		t.Fatalf("Grants() = %+v, want only %s", gs, g4.ID)
	}
	if gs := a.SubjectGrants(other); len(gs) != 1 || gs[0].ID != g4.ID {
		t.Fatalf("SubjectGrants(other) = %+v", gs)
	}
	if gs := a.SubjectGrants(agent); len(gs) != 0 {
		t.Fatalf("SubjectGrants(agent) = %+v", gs)
	}
	if n := a.RevokeSubject(agent); n != 0 {
		t.Fatalf("second RevokeSubject revoked %d", n)
	}
}

func TestListingsAndRecords(t *testing.T) {
	clk := newFakeClock()
	a, _ := setup(t, WithClock(clk.Now))
	var ids []string
	for i := range 5 {
		req := request(Move, Read, List, Read) // duplicates and any order
		req.Reason = fmt.Sprint("reason ", i)
		_, g := grantOK(t, a, req)
		ids = append(ids, g.ID)
		clk.Advance(time.Second)
	}
	gs := a.Grants()
	if len(gs) != 5 {
		t.Fatalf("%d grants listed", len(gs))
	}
	for i, g := range gs {
		if g.ID != ids[i] || g.Reason != fmt.Sprint("reason ", i) {
			t.Fatalf("grant %d is %s (%s), want %s: not in grant order", i, g.ID, g.Reason, ids[i])
		}
		if !slices.Equal(g.Access, []Access{List, Read, Move}) {
			t.Fatalf("access %v, want canonical [list read move]", g.Access)
		}
		if g.Root != "ws" || g.Path != "." || g.Source != SourceCore || g.Subject != agent || g.Status != Active {
			t.Fatalf("record %+v", g)
		}
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("ids are not in grant order: %v", ids)
	}
	// Records are copies.
	gs[0].Access[0] = Write
	gs[0].Status = Revoked
	if rec, _ := a.Lookup(ids[0]); rec.Access[0] != List || rec.Status != Active {
		t.Fatalf("changing a listed record changed the authority's: %+v", rec)
	}
	must(t, a.Revoke(ids[1]))
	must(t, a.Revoke(ids[3]))
	if n := len(a.Grants()); n != 3 {
		t.Fatalf("%d active grants, want 3", n)
	}
	all := a.ListAll()
	if len(all) != 5 || all[1].Status != Revoked || all[3].Status != Revoked || all[2].Status != Active {
		t.Fatalf("ListAll() = %+v", all)
	}
	if n := a.Prune(); n != 2 {
		t.Fatalf("Prune forgot %d, want 2", n)
	}
	if _, err := a.Lookup(ids[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lookup of a pruned grant: %v", err)
	}
	if n := len(a.ListAll()); n != 3 {
		t.Fatalf("ListAll after Prune: %d", n)
	}
}

func TestGrantRecordJSON(t *testing.T) {
	clk := newFakeClock()
	a, _ := setup(t, WithClock(clk.Now))
	req := request(Write, Read)
	req.Path = "/src/"
	req.Reason = "apply model edit"
	req.Source = SourceUserApproval
	req.TTL = time.Hour
	_, g := grantOK(t, a, req)
	data, err := json.Marshal(g)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(data, &m))
	want := map[string]any{
		"id":       g.ID,
		"subject":  map[string]any{"kind": "agent-run", "id": "conv1/run7"},
		"root":     "ws",
		"path":     "src",
		"resolved": "src",
		"access":   []any{"read", "write"},
		"reason":   "apply model edit",
		"source":   "user-approval",
		"created":  "2025-03-01T12:00:00Z",
		"expires":  "2025-03-01T13:00:00Z",
		"status":   "active",
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("JSON %s\nwant %v", data, want)
	}
	var back Grant
	must(t, json.Unmarshal(data, &back))
	if back.ID != g.ID || back.Subject != g.Subject || !slices.Equal(back.Access, g.Access) ||
		!back.Created.Equal(g.Created) || !back.Expires.Equal(g.Expires) || back.Status != g.Status ||
		!back.Ended.IsZero() || !back.Writable() || !back.Has(Read) || back.Has(Delete) {
		t.Fatalf("round trip: %+v, want %+v", back, g)
	}
	// No expiry, no end: the fields are left out.
	_, g2 := grantOK(t, a, request(Read))
	data, err = json.Marshal(g2)
	must(t, err)
	m = nil
	must(t, json.Unmarshal(data, &m))
	if _, ok := m["expires"]; ok {
		t.Fatalf("zero expiry serialized: %s", data)
	}
	if _, ok := m["ended"]; ok {
		t.Fatalf("zero end serialized: %s", data)
	}
	if g2.Writable() {
		t.Fatal("a read grant is Writable")
	}
}

func TestSubPathGrantStaysInside(t *testing.T) {
	seen := make(chan string, 100)
	host := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		seen <- r.Path
		return policy.Decision{Effect: policy.Allow, Rule: "host"}
	})
	a, ring := setup(t, WithPolicy(host))
	req := request(FullAccess()...)
	req.Path = "src"
	d, g := grantOK(t, a, req)
	if g.Path != "src" || g.Resolved != "src" {
		t.Fatalf("record path %q, resolved %q", g.Path, g.Resolved)
	}
	// The grant itself was decided by the host policy, where it leads.
	if p := <-seen; p != "src" {
		t.Fatalf("host policy saw %q at grant time, want src", p)
	}
	got, err := d.ReadFile(ctx, "main.go")
	if err != nil || string(got) != "package main" {
		t.Fatalf("ReadFile(main.go) = %q, %v", got, err)
	}
	// Paths the host policy and the audit trail see are from the registered root.
	if p := <-seen; p != "src/main.go" {
		t.Fatalf("host policy saw %q, want src/main.go", p)
	}
	if ev := lastEvent(t, ring); ev.Path != "src/main.go" || ev.GuestPath != "main.go" || ev.Rule != "host" {
		t.Fatalf("event %+v", ev)
	}
	_, err = d.ReadFile(ctx, "../secret.txt")
	wantCode(t, "../secret.txt", err, vfs.CodeOutside)
	_, err = d.ReadFile(ctx, "/secret.txt") // "/" is the grant's root, src
	wantCode(t, "/secret.txt", err, vfs.CodeNotFound)
	_, err = d.ReadFile(ctx, "up") // src/up -> ../secret.txt leaves the grant's root
	wantCode(t, "symlink out", err, vfs.CodeOutside)
	wantCode(t, "Move out", d.Move(ctx, "main.go", "../main.go"), vfs.CodeOutside)
	wantCode(t, "Symlink out", d.Symlink(ctx, "../secret.txt", "ln"), vfs.CodeOutside)
	if _, err := d.Sub(ctx, ".."); vfs.CodeOf(err) != vfs.CodeOutside {
		t.Fatalf("Sub(..): %v", err)
	}
	// A rename of the granted directory does not redirect the grant (it is pinned).
	full, _ := grantOK(t, a, request(FullAccess()...))
	must(t, full.Move(ctx, "src", "moved"))
	must(t, full.MkdirAll(ctx, "src"))
	must(t, full.WriteFile(ctx, "src/main.go", []byte("decoy"), 0o644))
	if got, err := d.ReadFile(ctx, "main.go"); err != nil || string(got) != "package main" {
		t.Fatalf("after renaming src: %q, %v", got, err)
	}
}

func TestGrantPathErrors(t *testing.T) {
	a, _ := setup(t)
	for path, code := range map[string]vfs.Code{
		"missing":     vfs.CodeNotFound,
		"src/main.go": vfs.CodeNotDir,
		"../x":        vfs.CodeOutside,
		"a\x00b":      vfs.CodeInvalidPath,
	} {
		req := request(Read)
		req.Path = path
		_, _, err := a.Grant(ctx, req)
		wantCode(t, fmt.Sprintf("Grant over %q", path), err, code)
		var ve *vfs.Error
		if !errors.As(err, &ve) || ve.Op != "Grant" {
			t.Fatalf("Grant over %q: %#v, want a *vfs.Error with op Grant", path, err)
		}
	}
	if n := len(a.ListAll()); n != 0 {
		t.Fatalf("failed grants were recorded: %d", n)
	}
}

func TestGrantRequestValidation(t *testing.T) {
	clk := newFakeClock()
	a, _ := setup(t, WithClock(clk.Now))
	cases := map[string]func(r *GrantRequest){
		"no subject kind":   func(r *GrantRequest) { r.Subject.Kind = "" },
		"bad subject kind":  func(r *GrantRequest) { r.Subject.Kind = "Agent Run" },
		"no subject id":     func(r *GrantRequest) { r.Subject.ID = "" },
		"control in id":     func(r *GrantRequest) { r.Subject.ID = "a\nb" },
		"no access":         func(r *GrantRequest) { r.Access = nil },
		"unknown access":    func(r *GrantRequest) { r.Access = []Access{Read, "execute"} },
		"no reason":         func(r *GrantRequest) { r.Reason = " " },
		"no source":         func(r *GrantRequest) { r.Source = "" },
		"unknown source":    func(r *GrantRequest) { r.Source = "vibes" },
		"negative TTL":      func(r *GrantRequest) { r.TTL = -time.Second },
		"TTL and Expires":   func(r *GrantRequest) { r.TTL = time.Second; r.Expires = clk.Now().Add(time.Hour) },
		"expiry in past":    func(r *GrantRequest) { r.Expires = clk.Now().Add(-time.Second) },
		"expiry is now":     func(r *GrantRequest) { r.Expires = clk.Now() },
		"unknown root":      func(r *GrantRequest) { r.Root = "nope" },
		"unregistered root": func(r *GrantRequest) { r.Root = "" },
	}
	for name, mutate := range cases {
		req := request(Read)
		mutate(&req)
		_, _, err := a.Grant(ctx, req)
		want := fs.ErrInvalid
		if name == "unknown root" || name == "unregistered root" {
			want = fs.ErrNotExist
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want an error wrapping %v", name, err, want)
		}
	}
	if n := len(a.ListAll()); n != 0 {
		t.Fatalf("invalid requests were recorded: %d", n)
	}
}

func TestRegisterAndUnregister(t *testing.T) {
	a := New()
	must(t, a.Register("workspace:conv1", newTree(t)))
	must(t, a.Register("artifact:a1", memory.New()))
	if err := a.Register("workspace:conv1", memory.New()); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Register: %v", err)
	}
	for _, bad := range []string{"", "a\x00b", string(make([]byte, 300))} {
		if err := a.Register(bad, memory.New()); !errors.Is(err, fs.ErrInvalid) {
			t.Fatalf("Register(%q): %v", bad, err)
		}
	}
	if err := a.Register("nil", nil); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("Register of a nil backend: %v", err)
	}
	if got := a.Roots(); !slices.Equal(got, []string{"artifact:a1", "workspace:conv1"}) {
		t.Fatalf("Roots() = %v", got)
	}
	req := request(Read)
	req.Root = "workspace:conv1"
	d1, _ := grantOK(t, a, req)
	d2, g2 := grantOK(t, a, req)
	must(t, a.Revoke(g2.ID))
	req.Root = "artifact:a1"
	req.Access = []Access{List}
	d3, _ := grantOK(t, a, req)

	n, err := a.Unregister("workspace:conv1")
	if err != nil || n != 1 {
		t.Fatalf("Unregister = %d, %v; want 1 revoked", n, err)
	}
	for _, d := range []*dir.Dir{d1, d2} {
		_, err := d.ReadFile(ctx, "src/main.go")
		wantCode(t, "after Unregister", err, vfs.CodeRevoked)
	}
	if _, err := d3.List(ctx, "."); err != nil {
		t.Fatalf("a grant over another root stopped: %v", err)
	}
	req.Root = "workspace:conv1"
	if _, _, err := a.Grant(ctx, req); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Grant over an unregistered root: %v", err)
	}
	if _, err := a.Unregister("workspace:conv1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second Unregister: %v", err)
	}
}

func TestHostPolicyComposition(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	host := policy.Func(func(_ context.Context, r *policy.Request) policy.Decision {
		mu.Lock()
		asked = append(asked, string(r.Op)+" "+r.Path+" "+r.Subject)
		mu.Unlock()
		switch r.Path {
		case "secret.txt":
			return policy.Decision{Effect: policy.Deny, Rule: "deny:secret"}
		case "docs/readme.md":
			return policy.Decision{Effect: policy.Ask, Rule: "ask:docs"}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "host-allow"}
	})
	approve := policy.AskFunc(func(context.Context, *policy.Request, policy.Decision) (bool, error) { return true, nil })
	a, ring := setup(t, WithPolicy(host), WithAsker(approve))
	d, g := grantOK(t, a, request(Read))

	_, err := d.ReadFile(ctx, "secret.txt")
	wantCode(t, "host-denied read", err, vfs.CodePermission)
	if ev := lastEvent(t, ring); ev.Rule != "deny:secret" || ev.Grant != g.ID {
		t.Fatalf("host denial's event: %+v", ev)
	}
	if _, err := d.ReadFile(ctx, "docs/readme.md"); err != nil {
		t.Fatalf("asked and approved: %v", err)
	}
	if _, err := d.ReadFile(ctx, "src/main.go"); err != nil {
		t.Fatalf("host-allowed read: %v", err)
	}
	if ev := lastEvent(t, ring); ev.Rule != "host-allow" {
		t.Fatalf("host allow's event: %+v", ev)
	}
	// Outside the access list, the host policy is never consulted.
	mu.Lock()
	before := len(asked)
	mu.Unlock()
	_, err = d.List(ctx, "src")
	wantCode(t, "List without List access", err, vfs.CodePermission)
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != before {
		t.Fatalf("the host policy was asked about a call the grant refuses: %v", asked[before:])
	}
	if asked[0] != "read secret.txt agent-run:conv1/run7" {
		t.Fatalf("host policy saw %q", asked[0])
	}
}

type countingHook struct {
	mu     sync.Mutex
	before int
}

func (h *countingHook) Before(context.Context, *policy.Request) error {
	h.mu.Lock()
	h.before++
	h.mu.Unlock()
	return nil
}
func (h *countingHook) After(context.Context, *policy.Request, error) {}

func TestDirOptionsCannotOverrideTheGrant(t *testing.T) {
	hook := &countingHook{}
	a, ring := setup(t, WithDirOptions(
		dir.WithHooks(hook),
		dir.WithSubject("impostor"),
		dir.WithPolicy(policy.AllowAll),
		dir.WithAudit(audit.Discard),
	))
	d, g := grantOK(t, a, request(Read))
	if _, err := d.ReadFile(ctx, "src/main.go"); err != nil {
		t.Fatal(err)
	}
	_, err := d.List(ctx, "src")
	wantCode(t, "List without List access", err, vfs.CodePermission)
	if hook.before != 1 {
		t.Fatalf("hook ran %d times, want 1", hook.before)
	}
	evs := ring.Events()
	if len(evs) != 2 || evs[0].Subject != agent.String() || evs[1].Rule != "grant:"+g.ID+":access" {
		t.Fatalf("events %+v", evs)
	}
}

func TestEveryCallIsAuditedOnceWithSubjectAndGrant(t *testing.T) {
	a, ring := setup(t)
	d, g := grantOK(t, a, request(ReadOnlyAccess()...))
	calls := 0
	for _, o := range ops {
		_ = o.call(d)
		calls++
	}
	evs := ring.Events()
	if len(evs) != calls {
		t.Fatalf("%d events for %d calls", len(evs), calls)
	}
	for _, ev := range evs {
		if ev.Subject != agent.String() || ev.Grant != g.ID || ev.RequestID == "" {
			t.Fatalf("event %+v", ev)
		}
	}
}

func TestConcurrentGrantsAndRevokes(t *testing.T) {
	a, _ := setup(t)
	const workers, rounds = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := Subject{Kind: KindAgentRun, ID: fmt.Sprint("run", w)}
			for i := range rounds {
				req := request(Read, List, Write)
				req.Subject = s
				d, g, err := a.Grant(ctx, req)
				if err != nil {
					errs <- err
					return
				}
				if _, err := d.ReadFile(ctx, "src/main.go"); err != nil {
					errs <- fmt.Errorf("active grant: %w", err)
				}
				_ = d.WriteFile(ctx, fmt.Sprintf("src/w%d-%d", w, i), []byte("x"), 0o644)
				_ = a.Grants()
				if i%2 == 0 {
					err = a.Revoke(g.ID)
				} else {
					a.RevokeSubject(s)
				}
				if err != nil {
					errs <- err
				}
				if _, err := d.ReadFile(ctx, "src/main.go"); vfs.CodeOf(err) != vfs.CodeRevoked {
					errs <- fmt.Errorf("after revocation: %v", err)
				}
			}
		}()
	}
	// A user of one long-lived grant races the churn.
	long, lg := grantOK(t, a, request(Read))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			if _, err := long.ReadFile(ctx, "src/main.go"); err != nil {
				errs <- fmt.Errorf("long-lived grant: %w", err)
			}
			_ = a.ListAll()
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if gs := a.Grants(); len(gs) != 1 || gs[0].ID != lg.ID {
		t.Fatalf("active grants after the churn: %+v", gs)
	}
	if n := len(a.ListAll()); n != workers*rounds+1 {
		t.Fatalf("%d records, want %d", n, workers*rounds+1)
	}
}

func TestSubjects(t *testing.T) {
	if agent.String() != "agent-run:conv1/run7" {
		t.Fatalf("String() = %q", agent.String())
	}
	for _, s := range []string{"agent-run:conv1/run7", "core:indexer", "extension:a:b"} {
		sub, err := ParseSubject(s)
		if err != nil || sub.String() != s {
			t.Fatalf("ParseSubject(%q) = %+v, %v", s, sub, err)
		}
	}
	if sub, _ := ParseSubject("extension:a:b"); sub.Kind != "extension" || sub.ID != "a:b" {
		t.Fatalf("ParseSubject splits at the first colon: %+v", sub)
	}
	for _, s := range []string{"", "nocolon", ":id", "kind:", "Kind:x", "9kind:x", "kind:a\x00b", "kind:\u0085"} {
		if _, err := ParseSubject(s); !errors.Is(err, fs.ErrInvalid) {
			t.Fatalf("ParseSubject(%q) accepted", s)
		}
	}
	for _, x := range FullAccess() {
		if !x.Valid() {
			t.Fatalf("%q not valid", x)
		}
	}
	if Access("execute").Valid() || Access("").Valid() || Source("").Valid() {
		t.Fatal("an unsupported access or source is valid")
	}
}

func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{"agent-run:conv1/run7", "core:x", "a:", ":b", "Kind:x", "k:a\x00", "extension:a:b", "k:\u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sub, err := ParseSubject(s)
		if err != nil {
			if !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("ParseSubject(%q): error %v does not wrap fs.ErrInvalid", s, err)
			}
			return
		}
		if sub.String() != s || sub.Validate() != nil {
			t.Fatalf("ParseSubject(%q) = %+v: does not round-trip", s, sub)
		}
		back, err := ParseSubject(sub.String())
		if err != nil || back != sub {
			t.Fatalf("reparse of %q: %+v, %v", sub.String(), back, err)
		}
	})
}
