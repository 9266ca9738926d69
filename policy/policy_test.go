package policy

import (
	"context"
	"errors"
	"testing"
)

func TestOpWrites(t *testing.T) {
	writes := map[Op]bool{
		OpStat: false, OpList: false, OpRead: false, OpReadlink: false, OpSub: false,
		OpWrite: true, OpCreate: true, OpMkdir: true, OpRemove: true, OpRename: true,
		OpCopy: true, OpSymlink: true, OpLink: true, OpChmod: true, OpChtimes: true, OpChown: true,
	}
	for op, want := range writes {
		if got := op.Writes(); got != want {
			t.Errorf("%s.Writes() = %v, want %v", op, got, want)
		}
	}
}

func TestEffectString(t *testing.T) {
	for e, want := range map[Effect]string{Allow: "allow", Deny: "deny", Ask: "ask", Effect(9): "Effect(9)"} {
		if got := e.String(); got != want {
			t.Errorf("Effect(%d).String() = %q, want %q", int(e), got, want)
		}
	}
}

func TestAdapters(t *testing.T) {
	ctx := context.Background()
	r := &Request{Op: OpRead, Path: "a"}
	if d := AllowAll.Decide(ctx, r); d.Effect != Allow || d.Rule == "" {
		t.Errorf("AllowAll decided %+v", d)
	}
	deny := Func(func(_ context.Context, r *Request) Decision {
		return Decision{Effect: Deny, Rule: "test", Reason: r.Path}
	})
	if d := deny.Decide(ctx, r); d.Effect != Deny || d.Reason != "a" {
		t.Errorf("Func decided %+v", d)
	}
	boom := errors.New("boom")
	ask := AskFunc(func(context.Context, *Request, Decision) (bool, error) { return false, boom })
	if ok, err := ask.Ask(ctx, r, Decision{Effect: Ask}); ok || err != boom {
		t.Errorf("AskFunc returned %v, %v", ok, err)
	}
}
