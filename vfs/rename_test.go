package vfs

import (
	"errors"
	"testing"
)

func TestCheckRenameFlags(t *testing.T) {
	from, to := MustParse("a"), MustParse("b")
	for _, fl := range []RenameFlags{0, RenameNoReplace, RenameExchange} {
		if err := CheckRenameFlags(from, to, fl); err != nil {
			t.Errorf("flags %d: %v", fl, err)
		}
	}
	for _, fl := range []RenameFlags{RenameNoReplace | RenameExchange, 1 << 5} {
		err := CheckRenameFlags(from, to, fl)
		if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeInvalidPath || e.Path != "a" || e.Dest != "b" {
			t.Errorf("flags %d: %v, want invalid_path a -> b", fl, err)
		}
	}
}

func TestCheckRename(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	full := func() (bool, error) { return false, nil }
	boom := errors.New("boom")
	base := func() RenameEnds {
		return RenameEnds{From: MustParse("a"), To: MustParse("b"), SrcFound: true,
			SrcAbove: no, DstAbove: no, DstEmpty: func() (bool, error) { return true, nil }}
	}
	cases := []struct {
		name string
		edit func(e *RenameEnds)
		act  RenameAction
		code Code
	}{
		{"move", func(e *RenameEnds) {}, RenameMove, ""},
		{"missing source", func(e *RenameEnds) { e.SrcFound = false }, 0, CodeNotFound},
		{"root source", func(e *RenameEnds) { e.SrcRoot = true }, 0, CodeInvalidPath},
		{"root destination", func(e *RenameEnds) { e.DstFound, e.DstRoot, e.DstDir = true, true, true }, 0, CodeInvalidPath},
		{"file to dir/", func(e *RenameEnds) { e.To = MustParse("b/") }, 0, CodeNotDir},
		{"dir into itself", func(e *RenameEnds) { e.SrcDir, e.SrcAbove = true, yes }, 0, CodeInvalidPath},
		{"no-replace", func(e *RenameEnds) { e.DstFound, e.Flags = true, RenameNoReplace }, 0, CodeExists},
		{"same entry", func(e *RenameEnds) { e.DstFound, e.SameEntry = true, true }, RenameNone, ""},
		{"hard link", func(e *RenameEnds) { e.DstFound, e.SameFile = true, yes }, RenameNone, ""},
		{"replace", func(e *RenameEnds) { e.DstFound = true }, RenameReplace, ""},
		{"dir over file", func(e *RenameEnds) { e.DstFound, e.SrcDir = true, true }, 0, CodeNotDir},
		{"file over dir", func(e *RenameEnds) { e.DstFound, e.DstDir = true, true }, 0, CodeIsDir},
		{"dir over full dir", func(e *RenameEnds) { e.DstFound, e.SrcDir, e.DstDir, e.DstEmpty = true, true, true, full }, 0, CodeNotEmpty},
		{"dir over its descendant", func(e *RenameEnds) { e.DstFound, e.SrcDir, e.DstDir, e.SrcAbove = true, true, true, yes }, 0, CodeInvalidPath},
		{"exchange", func(e *RenameEnds) { e.DstFound, e.Flags = true, RenameExchange }, RenameSwap, ""},
		{"exchange missing", func(e *RenameEnds) { e.Flags = RenameExchange }, 0, CodeNotFound},
		{"exchange same", func(e *RenameEnds) { e.DstFound, e.SameEntry, e.Flags = true, true, RenameExchange }, RenameNone, ""},
		{"exchange dir with its ancestor", func(e *RenameEnds) {
			e.DstFound, e.DstDir, e.DstAbove, e.Flags = true, true, yes, RenameExchange
		}, 0, CodeInvalidPath},
	}
	for _, c := range cases {
		e := base()
		c.edit(&e)
		act, err := CheckRename(&e)
		if CodeOf(err) != c.code || (err == nil && act != c.act) {
			t.Errorf("%s: %v, %v; want %v, %q", c.name, act, err, c.act, c.code)
		}
		if ve, ok := errors.AsType[*Error](err); ok && (ve.Op != "rename" || ve.Path != "a" || ve.Dest != e.To.String()) {
			t.Errorf("%s: error %v not addressed to rename a -> %s", c.name, err, e.To)
		}
	}
	e := base()
	e.Ready = func() error { return boom }
	if _, err := CheckRename(&e); !errors.Is(err, boom) {
		t.Errorf("Ready's error: got %v", err)
	}
}
