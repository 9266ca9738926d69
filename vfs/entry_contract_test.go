package vfs

import (
	"errors"
	"testing"
)

func TestCheckCreate(t *testing.T) {
	p := MustParse("d/x")
	if err := CheckCreate("mkdir", p, false, "x"); err != nil {
		t.Errorf("valid: %v", err)
	}
	if c := CodeOf(CheckCreate("mkdir", p, true, "x")); c != CodeNotFound {
		t.Errorf("gone parent: %q, want not_found", c)
	}
	if c := CodeOf(CheckCreate("mkdir", p, false, "..")); c != CodeInvalidPath {
		t.Errorf("bad name: %q, want invalid_path", c)
	}
}

func TestCheckRemove(t *testing.T) {
	p := MustParse("d")
	boom := errors.New("boom")
	full := func(n int) (bool, error) { return n > 0, nil }
	cases := []struct {
		name string
		r    Resolution[int]
		full func(int) (bool, error)
		code Code
	}{
		{"file", Resolution[int]{Name: "d", Found: true}, full, ""},
		{"missing", Resolution[int]{Name: "d"}, full, CodeNotFound},
		{"root", Resolution[int]{Found: true}, full, CodeInvalidPath},
		{"full dir", Resolution[int]{Name: "d", Node: 1, Found: true}, full, CodeNotEmpty},
	}
	for _, c := range cases {
		err := CheckRemove("remove", p, c.r, c.full)
		if CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %q", c.name, err, c.code)
		}
	}
	err := CheckRemove("remove", p, Resolution[int]{Name: "d", Found: true}, func(int) (bool, error) { return false, boom })
	if !errors.Is(err, boom) {
		t.Errorf("full's error: got %v", err)
	}
}

func TestCheckSymlinkTarget(t *testing.T) {
	p := MustParse("l")
	long := make([]byte, MaxPathLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for target, code := range map[string]Code{"a/b": "", "": CodeInvalidPath, "a\x00b": CodeInvalidPath, string(long): CodeInvalidPath} {
		if got := CodeOf(CheckSymlinkTarget("symlink", p, target)); got != code {
			t.Errorf("target %.10q: %q, want %q", target, got, code)
		}
	}
}

func TestCheckMkdir(t *testing.T) {
	p := MustParse("d")
	for _, c := range []struct {
		found, gone bool
		code        Code
	}{{false, false, ""}, {true, false, CodeExists}, {false, true, CodeNotFound}} {
		if got := CodeOf(CheckMkdir(p, c.found, c.gone, "d")); got != c.code {
			t.Errorf("found %v gone %v: %q, want %q", c.found, c.gone, got, c.code)
		}
	}
}

// TestLinkTarget: a target leaving the tree (absolute, or climbing above the
// root) is data, not an error; text no link may hold is invalid_path, absolute
// or not; an inside target names its place.
func TestLinkTarget(t *testing.T) {
	long := "/" + string(make([]byte, MaxPathLen))
	for _, c := range []struct {
		link, target string
		want         string // the place, "leaves", or an error code
	}{
		{"d/l", "x", "d/x"},
		{"d/l", "../x", "x"},
		{"d/l", "/etc/passwd", "leaves"},
		{"l", "../x", "leaves"},
		{"d/l", "x/../../../y", "leaves"},
		{"d/l", "", string(CodeInvalidPath)},
		{"d/l", `a\b`, string(CodeInvalidPath)},
		{"d/l", `/a\b`, string(CodeInvalidPath)},
		{"d/l", "/a\x00", string(CodeInvalidPath)},
		{"d/l", long, string(CodeInvalidPath)},
	} {
		q, leaves, err := LinkTarget(MustParse(c.link), c.target)
		got := q.String()
		switch {
		case err != nil:
			got = string(CodeOf(err))
		case leaves:
			got = "leaves"
		}
		if got != c.want || (leaves && err != nil) {
			t.Errorf("LinkTarget(%s, %q) = %q, %v, %v; want %s", c.link, c.target, q, leaves, err, c.want)
		}
	}
}
