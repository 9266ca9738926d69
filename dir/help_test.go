package dir_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// methodsOf lists the exported methods of v's type.
func methodsOf(v any) []string {
	t := reflect.TypeOf(v)
	var out []string
	for i := 0; i < t.NumMethod(); i++ {
		out = append(out, t.Method(i).Name)
	}
	return out
}

// TestHelpNamesEveryMethod keeps the Help texts in step with the code: every
// exported method appears as "Name(" in its type's Help.
func TestHelpNamesEveryMethod(t *testing.T) {
	d, ctl, _ := newTree(t)
	f, err := d.OpenFile(bg, "a.txt")
	must(t, err)
	h, err := d.Open(bg, "a.txt", 0, 0)
	must(t, err)
	defer h.Close()
	for _, tc := range []struct {
		name string
		v    any
		help string
		min  int
	}{
		{"Dir", d, d.Help(), 30},
		{"File", f, f.Help(), 11},
		{"Control", ctl, ctl.Help(), 7},
	} {
		ms := methodsOf(tc.v)
		if len(ms) < tc.min {
			t.Fatalf("%s has %d methods, expected at least %d: %v", tc.name, len(ms), tc.min, ms)
		}
		for _, m := range ms {
			if !strings.Contains(tc.help, m+"(") {
				t.Errorf("%s.Help() does not describe %s", tc.name, m)
			}
		}
	}
	// The Handle's methods are described in Dir's Help (under Open).
	for _, m := range methodsOf(h) {
		if !strings.Contains(d.Help(), m) {
			t.Errorf("Dir.Help() does not mention Handle.%s", m)
		}
	}
	// Every error code a guest can see is listed.
	for _, c := range []vfs.Code{vfs.CodeOutside, vfs.CodeInvalidPath, vfs.CodePermission, vfs.CodeReadOnly,
		vfs.CodeRevoked, vfs.CodeNotFound, vfs.CodeExists, vfs.CodeNotDir, vfs.CodeIsDir, vfs.CodeNotEmpty,
		vfs.CodeTooLarge, vfs.CodeQuota, vfs.CodeTooManyLinks, vfs.CodeNotRegular, vfs.CodeCrossMount} {
		if !strings.Contains(d.Help(), string(c)) {
			t.Errorf("Dir.Help() does not list code %s", c)
		}
	}
}

func TestHelpStatus(t *testing.T) {
	d, ctl, _ := newTree(t, dir.WithMaxReadBytes(1<<20))
	f, err := d.OpenFile(bg, "a.txt")
	must(t, err)
	for _, tc := range []struct{ got, want string }{
		{d.Help(), "This Dir is writable."},
		{d.Help(), "1 MiB"},
		{d.ReadOnly().Help(), "This Dir is read-only"},
		{f.Help(), `"a.txt"`},
		{f.ReadOnly().Help(), "This File is read-only"},
	} {
		if !strings.Contains(tc.got, tc.want) {
			t.Errorf("help lacks %q", tc.want)
		}
	}
	ctl.SetWritable(false)
	if !strings.Contains(d.Help(), "locked") || !strings.Contains(f.Help(), "locked") {
		t.Error("help does not report the write lock")
	}
	ctl.Revoke()
	if !strings.Contains(d.Help(), "revoked") || !strings.Contains(f.Help(), "revoked") {
		t.Error("help does not report revocation")
	}
}
