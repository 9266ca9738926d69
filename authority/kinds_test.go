package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/archive/archivetest"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func TestRootKindDefaults(t *testing.T) {
	a := New()
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindWorkspace, ID: "conv1"}, newTree(t)))
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindExtensionStorage, ID: "ext.search", Owner: "ext.search"}, newTree(t)))
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindSecret, ID: "creds"}, newTree(t)))
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindKnowledge, ID: "kb"}, newTree(t)))

	// Workspace: read-only by default.
	d, g, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "workspace:conv1", Reason: "index", Source: SourceConversation})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Access, ReadOnlyAccess()) || g.Kind != KindWorkspace || !d.IsReadOnly() {
		t.Fatalf("workspace default grant: %+v", g)
	}
	// Extension storage: its own extension only.
	if _, _, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "extension-storage:ext.search", Reason: "x", Source: SourceCore}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("an agent got extension storage: %v", err)
	}
	if _, _, err := a.Grant(ctx, GrantRequest{Subject: Subject{Kind: KindExtension, ID: "ext.other"}, Root: "extension-storage:ext.search", Reason: "x", Source: SourceManifest}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("another extension got extension storage: %v", err)
	}
	_, g, err = a.Grant(ctx, GrantRequest{Subject: other, Root: "extension-storage:ext.search", Reason: "cache", Source: SourceManifest})
	if err != nil || !g.Writable() {
		t.Fatalf("own storage: %+v %v", g, err)
	}
	// Secret: explicit, approved, never listed or watched, never listed by ListRoots.
	for _, req := range []GrantRequest{
		{Subject: agent, Root: "secret:creds", Reason: "x", Source: SourceUserApproval},                                  // no access list
		{Subject: agent, Root: "secret:creds", Reason: "x", Source: SourceConversation, Access: []Access{Read}},          // wrong source
		{Subject: agent, Root: "secret:creds", Reason: "x", Source: SourceUserApproval, Access: []Access{Read, List}},    // list
		{Subject: agent, Root: "secret:creds", Reason: "x", Source: SourceUserApproval, Access: []Access{Read, Archive}}, // archive
	} {
		if _, _, err := a.Grant(ctx, req); err == nil {
			t.Fatalf("secret grant %+v accepted", req)
		}
	}
	if _, _, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "secret:creds", Reason: "x", Source: SourceUserApproval, Access: []Access{Read}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range a.ListRoots(agent) {
		if r.Kind == KindSecret {
			t.Fatalf("ListRoots lists the secret root: %+v", r)
		}
		if r.Kind == KindExtensionStorage {
			t.Fatalf("ListRoots lists another's storage to an agent: %+v", r)
		}
	}
	if len(a.ListRoots(other)) != 3 { // workspace, its storage, knowledge
		t.Fatalf("ListRoots(other) = %+v", a.ListRoots(other))
	}
	// Knowledge: explicit only.
	if _, _, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "knowledge:kb", Reason: "x", Source: SourceUserApproval}); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("knowledge without access list: %v", err)
	}
	if len(DefaultKindSpecs()) != 7 {
		t.Fatal("seven kinds")
	}
	if spec, _ := Spec(KindSecret); spec.Sandbox || spec.Listed {
		t.Fatal("secret spec")
	}
}

// Extraction needs the Archive access on top of Write.
func TestArchiveAccess(t *testing.T) {
	a, _ := setup(t)
	data := archivetest.Tar(archivetest.Ent{Name: "new/x.txt", Body: "x"})
	for _, access := range [][]Access{{List, Metadata, Read, Write}, {List, Metadata, Read, Write, Archive}} {
		d, _ := grantOK(t, a, request(access...))
		res, err := archive.ExtractToDir(ctx, d, bytes.NewReader(data), int64(len(data)), "docs", archive.Options{})
		has := slices.Contains(access, Archive)
		if has && (err != nil || len(res.Extracted) != 1) {
			t.Fatalf("with archive access: %v %+v", err, res)
		}
		if !has && vfs.CodeOf(err) != vfs.CodePermission {
			t.Fatalf("without archive access: %v", err)
		}
	}
}

func TestStorePersistsAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grants.json")
	clock := newFakeClock()
	tree := newTree(t)
	a, err := Open(path, WithClock(clock.Now))
	must(t, err)
	must(t, a.Register("ws", tree))
	_, live, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "ws", Path: "src", Access: ReadOnlyAccess(), Reason: "r", Source: SourceCore})
	must(t, err)
	_, revoked, err := a.Grant(ctx, request(Read))
	must(t, err)
	_, expiring, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "ws", Access: []Access{Read}, Reason: "r", Source: SourceCore, TTL: time.Hour})
	must(t, err)
	must(t, a.Revoke(revoked.ID))

	// The host dies; two hours later it starts again.
	clock.Advance(2 * time.Hour)
	b, err := Open(path, WithClock(clock.Now))
	must(t, err)
	must(t, b.Register("ws", tree))
	all := b.ListAll()
	if len(all) != 3 {
		t.Fatalf("records: %+v", all)
	}
	status := map[string]Status{}
	for _, g := range all {
		status[g.ID] = g.Status
	}
	if status[live.ID] != Active || status[revoked.ID] != Revoked || status[expiring.ID] != Expired {
		t.Fatalf("statuses after restart: %v", status)
	}
	for _, id := range []string{revoked.ID, expiring.ID} {
		if _, _, err := b.Restore(ctx, id); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("Restore(%s) of an ended grant: %v", id, err)
		}
	}
	d, g, err := b.Restore(ctx, live.ID)
	must(t, err)
	if g.ID != live.ID || g.Path != "src" {
		t.Fatalf("restored %+v", g)
	}
	if _, err := d.ReadFile(ctx, "main.go"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Restore(ctx, live.ID); err == nil {
		t.Fatal("restored twice")
	}
	must(t, b.Revoke(live.ID))
	if _, err := d.ReadFile(ctx, "main.go"); vfs.CodeOf(err) != vfs.CodeRevoked {
		t.Fatalf("after revoke: %v", err)
	}
	// And that revocation survives another restart.
	c, err := Open(path, WithClock(clock.Now))
	must(t, err)
	if g, _ := c.Lookup(live.ID); g.Status != Revoked {
		t.Fatalf("after second restart: %+v", g)
	}
}

// Watch needs the Watch access, and a watch ends when its grant is revoked.
func TestWatchAccess(t *testing.T) {
	feed := dir.NewChangeFeed()
	a2 := New(WithDirOptions(dir.WithHooks(feed)))
	must(t, a2.Register("ws", memory.New()))
	d, _ := grantOK(t, a2, GrantRequest{Subject: agent, Root: "ws", Access: []Access{List, Metadata, Read, Write}, Reason: "r", Source: SourceCore})
	if _, err := d.Watch(ctx, dir.WatchOptions{}); vfs.CodeOf(err) != vfs.CodePermission {
		t.Fatalf("watch without the access: %v", err)
	}
	d, g := grantOK(t, a2, GrantRequest{Subject: agent, Root: "ws", Access: []Access{List, Metadata, Read, Write, Watch}, Reason: "r", Source: SourceCore})
	w, err := d.Watch(ctx, dir.WatchOptions{})
	must(t, err)
	must(t, d.WriteFile(ctx, "x", nil, 0o644))
	if ev := <-w.Events(); ev.Path != "x" {
		t.Fatalf("event %+v", ev)
	}
	must(t, a2.Revoke(g.ID))
	for range w.Events() {
	}
	if vfs.CodeOf(w.Err()) != vfs.CodeRevoked {
		t.Fatalf("watch ended with %v", w.Err())
	}
}

func TestGrantSetRoundTrip(t *testing.T) {
	a := New()
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindWorkspace, ID: "w"}, newTree(t)))
	must(t, a.RegisterRoot(RootDescriptor{Kind: KindSecret, ID: "s"}, newTree(t)))
	_, g, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "workspace:w", Reason: "r", Source: SourceCore})
	must(t, err)
	_, _, err = a.Grant(ctx, GrantRequest{Subject: agent, Root: "secret:s", Access: []Access{Read}, Reason: "r", Source: SourceCore})
	must(t, err)
	b, err := json.Marshal(a.GrantSetFor(agent))
	must(t, err)
	set, err := ParseGrantSet(b)
	must(t, err)
	if len(set.Grants) != 1 || set.Grants[0].ID != g.ID || set.Grants[0].Kind != KindWorkspace {
		t.Fatalf("set %+v", set)
	}
	for _, bad := range []string{
		strings.Replace(string(b), `"version":1`, `"version":2`, 1),
		strings.Replace(string(b), `"status":"active"`, `"status":"revoked"`, 1),
		strings.Replace(string(b), `"root_kind":"workspace"`, `"root_kind":"secret"`, 1),
		string(b) + "{}",
		strings.Replace(string(b), `"version":1`, `"version":1,"extra":true`, 1),
	} {
		if _, err := ParseGrantSet([]byte(bad)); !errors.Is(err, fs.ErrInvalid) {
			t.Fatalf("accepted %s", bad)
		}
	}
}

// A watch ends when its grant expires, even with no event to decide.
func TestWatchEndsAtExpiry(t *testing.T) {
	clock := newFakeClock()
	feed := dir.NewChangeFeed()
	a := New(WithClock(clock.Now), WithDirOptions(dir.WithHooks(feed)))
	must(t, a.Register("ws", memory.New()))
	d, g, err := a.Grant(ctx, GrantRequest{Subject: agent, Root: "ws", Access: []Access{List, Metadata, Watch}, Reason: "r", Source: SourceCore, TTL: time.Minute})
	must(t, err)
	w, err := d.Watch(ctx, dir.WatchOptions{})
	must(t, err)
	clock.Advance(2 * time.Minute)
	for range w.Events() {
	}
	if vfs.CodeOf(w.Err()) != vfs.CodeRevoked {
		t.Fatalf("watch ended with %v", w.Err())
	}
	if rec, _ := a.Lookup(g.ID); rec.Status != Expired {
		t.Fatalf("grant %+v", rec)
	}
}
