package authority_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/authority"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
)

func ExampleAuthority_Grant() {
	ctx := context.Background()
	trail := audit.NewRing(16)
	clock := func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	a := authority.New(authority.WithAudit(trail), authority.WithClock(clock))
	if err := a.Register("workspace:conv1", memory.New()); err != nil {
		panic(err)
	}

	ws, g, err := a.Grant(ctx, authority.GrantRequest{
		Subject: authority.Subject{Kind: authority.KindAgentRun, ID: "conv1/run7"},
		Root:    "workspace:conv1",
		Access:  []authority.Access{authority.Write, authority.Read},
		Reason:  "apply model edit",
		Source:  authority.SourceConversation,
		TTL:     time.Hour,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(ws.MkdirAll(ctx, "notes"), ws.WriteFile(ctx, "notes/today.md", []byte("hello"), 0o644))
	_, err = ws.List(ctx, "notes") // no List access
	fmt.Println(vfs.CodeOf(err))
	ev := trail.Events()[2]
	fmt.Println(ev.Subject, ev.Outcome, ev.Rule == "grant:"+g.ID+":access")

	// The record, as a sandbox wrapper would read it.
	rec, _ := json.Marshal(struct {
		Subject authority.Subject
		Root    string
		Access  []authority.Access
		Expires time.Time
	}{g.Subject, g.Root, g.Access, g.Expires})
	fmt.Println(string(rec))

	fmt.Println(a.Revoke(g.ID), len(a.Grants()))
	_, err = ws.ReadFile(ctx, "notes/today.md")
	fmt.Println(vfs.CodeOf(err))
	// Output:
	// <nil> <nil>
	// fs_permission_denied
	// agent-run:conv1/run7 denied true
	// {"Subject":{"kind":"agent-run","id":"conv1/run7"},"Root":"workspace:conv1","Access":["read","write"],"Expires":"2025-03-01T13:00:00Z"}
	// <nil> 0
	// revoked
}
