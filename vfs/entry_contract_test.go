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
