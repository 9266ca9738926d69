package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// FuzzParseGuest checks the properties every parsed guest path has, whatever the
// input: no panic; a result holds no "..", ".", empty segment, NUL or backslash and
// is relative; parsing its String again gives the same Path; it exists exactly when
// the input is well-formed and path.Clean of the input (leading slashes trimmed)
// stays beneath the root, and then equals that cleaned path; it is never longer than
// the input.
func FuzzParseGuest(f *testing.F) {
	for _, s := range []string{
		"a", "a/b", "/", "//x", "/etc/passwd", ".", "./", "..", "../", "a/../../x",
		"../ROOT/x", "b///././c//.//d/./", "a/../a/b/../../a/b/t", "a\x00b", `a\..\..\x`,
		"", "file/", "file/.", "file/..", strings.Repeat("a/../", 100) + "x",
		strings.Repeat("n", 256), strings.Repeat("n", 255), "a/./", "...", "a/.../b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := vfs.ParseGuest(s)
		if err != nil {
			checkParseError(t, s, err)
			return
		}
		for _, seg := range strings.Split(s, "/") {
			if seg != ".." && len(seg) > vfs.MaxNameLen {
				t.Fatalf("ParseGuest accepted a %d-byte component", len(seg))
			}
		}
		if len(s) > vfs.MaxPathLen {
			t.Fatalf("ParseGuest accepted a %d-byte path", len(s))
		}
		raw := p.Raw()
		if raw != "" {
			if strings.HasPrefix(raw, "/") || strings.HasSuffix(raw, "/") {
				t.Fatalf("ParseGuest(%q) = %q: leading or trailing slash", s, raw)
			}
			for _, seg := range strings.Split(raw, "/") {
				if seg == "" || seg == "." || seg == ".." {
					t.Fatalf("ParseGuest(%q) = %q: segment %q", s, raw, seg)
				}
				if len(seg) > vfs.MaxNameLen {
					t.Fatalf("ParseGuest(%q): segment of %d bytes", s, len(seg))
				}
			}
		}
		if strings.ContainsAny(raw, "\x00\\") {
			t.Fatalf("ParseGuest(%q) = %q: NUL or backslash", s, raw)
		}
		if len(raw) > len(s) || len(raw) > vfs.MaxPathLen {
			t.Fatalf("ParseGuest(%q) = %q: longer than its input", s, raw)
		}
		if p.IsRoot() != (raw == "") || (p.String() == ".") != p.IsRoot() {
			t.Fatalf("ParseGuest(%q): IsRoot=%v String=%q Raw=%q disagree", s, p.IsRoot(), p.String(), raw)
		}
		// Idempotent.
		q, err := vfs.ParseGuest(p.String())
		if err != nil || q != p.WithoutDirMark() {
			t.Fatalf("ParseGuest(%q) = %q, but reparsing gives %#v, %v", s, p, q, err)
		}
		// Agrees with path.Clean, which must not climb.
		want := path.Clean(strings.TrimLeft(s, "/"))
		if strings.TrimLeft(s, "/") == "" {
			want = "."
		}
		if want == ".." || strings.HasPrefix(want, "../") {
			t.Fatalf("ParseGuest(%q) = %q, but path.Clean climbs: %q", s, p, want)
		}
		if p.String() != want {
			t.Fatalf("ParseGuest(%q) = %q, path.Clean gives %q", s, p, want)
		}
		// The directory mark: set exactly when the guest wrote a trailing slash (or
		// a final "." or ".."), never on the root.
		wantDir := !p.IsRoot() && (strings.HasSuffix(s, "/") || strings.HasSuffix(s, "/.") || strings.HasSuffix(s, "/.."))
		if p.MustBeDir() != wantDir {
			t.Fatalf("ParseGuest(%q).MustBeDir() = %v, want %v", s, p.MustBeDir(), wantDir)
		}
	})
}

// checkParseError checks that a rejected input deserved it, with the right code.
func checkParseError(t *testing.T, s string, err error) {
	t.Helper()
	var e *vfs.Error
	if !errors.As(err, &e) || e.Op != "parse" {
		t.Fatalf("ParseGuest(%q): error %v is not an *Error with Op parse", s, err)
	}
	malformed := s == "" || len(s) > vfs.MaxPathLen || strings.ContainsAny(s, "\x00\\")
	longSeg := false
	for _, seg := range strings.Split(s, "/") {
		if seg != ".." && len(seg) > vfs.MaxNameLen {
			longSeg = true
		}
	}
	clean := path.Clean(strings.TrimLeft(s, "/"))
	climbs := clean == ".." || strings.HasPrefix(clean, "../")
	switch e.Code {
	case vfs.CodeInvalidPath:
		if !malformed && !longSeg {
			t.Fatalf("ParseGuest(%q): invalid_path for a well-formed path", s)
		}
		if !errors.Is(err, fs.ErrInvalid) {
			t.Fatalf("ParseGuest(%q): invalid_path does not match fs.ErrInvalid", s)
		}
	case vfs.CodeOutside:
		if malformed || !climbs {
			t.Fatalf("ParseGuest(%q): path_outside_sandbox, but path.Clean gives %q", s, clean)
		}
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("ParseGuest(%q): path_outside_sandbox does not match fs.ErrPermission", s)
		}
	default:
		t.Fatalf("ParseGuest(%q): unexpected code %q", s, e.Code)
	}
	if len(e.Path) > 4*vfs.MaxPathLen || strings.IndexByte(e.Error(), 0) >= 0 {
		t.Fatalf("ParseGuest(%q): error text unbounded or holds a NUL: %q", s, e.Error())
	}
}

func TestParseGuestTable(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		mustDir bool
		code    vfs.Code
	}{
		{in: "a", want: "a"},
		{in: "/", want: "."},
		{in: "//x", want: "x"},
		{in: "/etc/passwd", want: "etc/passwd"},
		{in: ".", want: "."},
		{in: "./", want: "."},
		{in: "b///././c//.//d/./", want: "b/c/d", mustDir: true},
		{in: "a/../a/b/../../a/b/t", want: "a/b/t"},
		{in: "file/", want: "file", mustDir: true},
		{in: "file/.", want: "file", mustDir: true},
		{in: "a/b/..", want: "a", mustDir: true},
		{in: "a/..", want: "."},
		{in: "...", want: "..."},
		{in: strings.Repeat("n", vfs.MaxNameLen), want: strings.Repeat("n", vfs.MaxNameLen)},
		{in: strings.Repeat("a/../", 800) + "x", want: "x"},
		{in: "", code: vfs.CodeInvalidPath},
		{in: "..", code: vfs.CodeOutside},
		{in: "../", code: vfs.CodeOutside},
		{in: "/..", code: vfs.CodeOutside},
		{in: "a/../../x", code: vfs.CodeOutside},
		{in: "../ROOT/x", code: vfs.CodeOutside},
		{in: "../app-secret/f", code: vfs.CodeOutside},
		{in: "a\x00b", code: vfs.CodeInvalidPath},
		{in: `a\..\..\x`, code: vfs.CodeInvalidPath},
		{in: strings.Repeat("n", vfs.MaxNameLen+1), code: vfs.CodeInvalidPath},
		{in: "a/" + strings.Repeat("n", vfs.MaxNameLen+1) + "/../b", code: vfs.CodeInvalidPath},
		{in: strings.Repeat("a/", vfs.MaxPathLen/2+1), code: vfs.CodeInvalidPath},
	}
	for _, tt := range tests {
		p, err := vfs.ParseGuest(tt.in)
		name := tt.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		if tt.code != "" {
			if vfs.CodeOf(err) != tt.code {
				t.Errorf("ParseGuest(%q) = %q, %v; want code %s", name, p, err, tt.code)
			}
			continue
		}
		if err != nil || p.String() != tt.want || p.MustBeDir() != tt.mustDir {
			t.Errorf("ParseGuest(%q) = %q (mustDir %v), %v; want %q (mustDir %v)", name, p, p.MustBeDir(), err, tt.want, tt.mustDir)
		}
	}
	// The error for a NUL byte shows it escaped, so the text is never cut short.
	_, err := vfs.ParseGuest("a\x00b")
	if err == nil || strings.IndexByte(err.Error(), 0) >= 0 || !strings.Contains(err.Error(), `a\x00b`) {
		t.Errorf("ParseGuest with NUL: error %q should show the NUL escaped", err)
	}
}

func TestPathMethods(t *testing.T) {
	p := vfs.MustParse
	if !p("ab/c").HasPrefix(p("ab")) || p("abc").HasPrefix(p("ab")) || p("abc/d").HasPrefix(p("ab")) {
		t.Error("HasPrefix must compare whole components (ab vs abc)")
	}
	if !p("ab").HasPrefix(p("ab")) || !p("ab").HasPrefix(vfs.Root) || !vfs.Root.HasPrefix(vfs.Root) || vfs.Root.HasPrefix(p("a")) {
		t.Error("HasPrefix: a path is its own prefix, the root prefixes everything and nothing else prefixes the root")
	}
	if p("a").HasPrefix(p("a/b")) {
		t.Error("a descendant is not a prefix of its ancestor")
	}
	if r, ok := p("a/b/c").TrimPrefix(p("a")); !ok || r.String() != "b/c" {
		t.Errorf("TrimPrefix(a/b/c, a) = %q, %v", r, ok)
	}
	if r, ok := p("a/b").TrimPrefix(p("a/b")); !ok || !r.IsRoot() {
		t.Errorf("TrimPrefix(a/b, a/b) = %q, %v; want root", r, ok)
	}
	if r, ok := p("abc/d").TrimPrefix(p("ab")); ok || r.String() != "abc/d" {
		t.Errorf("TrimPrefix(abc/d, ab) = %q, %v; want unchanged, false", r, ok)
	}
	if r, ok := p("x/y/").TrimPrefix(p("x")); !ok || r.String() != "y" || !r.MustBeDir() {
		t.Errorf("TrimPrefix keeps the directory mark: %q mustDir=%v", r, r.MustBeDir())
	}
	if r, ok := p("x").TrimPrefix(vfs.Root); !ok || r.String() != "x" {
		t.Errorf("TrimPrefix(x, root) = %q, %v", r, ok)
	}
	for _, tt := range []struct{ in, dir, base string }{
		{"a/b/c", "a/b", "c"}, {"a", ".", "a"}, {".", ".", ""},
	} {
		q := p(tt.in)
		if q.Dir().String() != tt.dir || q.Base() != tt.base {
			t.Errorf("%q: Dir=%q Base=%q; want %q %q", tt.in, q.Dir(), q.Base(), tt.dir, tt.base)
		}
	}
	if p("a/b/").Dir().MustBeDir() {
		t.Error("Dir must not inherit the directory mark")
	}
	if p("a/b").Depth() != 2 || vfs.Root.Depth() != 0 || len(p("a/b/c").Elems()) != 3 || vfs.Root.Elems() != nil {
		t.Error("Depth/Elems")
	}
	if j := p("a").Join(p("b/c/")); j.String() != "a/b/c" || !j.MustBeDir() {
		t.Errorf("Join = %q mustDir=%v", j, j.MustBeDir())
	}
	if j := vfs.Root.Join(p("b")); j.String() != "b" {
		t.Errorf("Root.Join(b) = %q", j)
	}
	if j := p("a/").Join(vfs.Root); j.String() != "a" || !j.MustBeDir() {
		t.Errorf("a/.Join(root) = %q mustDir=%v", j, j.MustBeDir())
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00", strings.Repeat("x", vfs.MaxNameLen+1)} {
		if _, err := p("a").Child(bad); vfs.CodeOf(err) != vfs.CodeInvalidPath {
			t.Errorf("Child(%q): %v; want invalid_path", bad, err)
		}
		if vfs.ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
	for _, good := range []string{"x", "...", ".hidden", "a b", "ünï", strings.Repeat("x", vfs.MaxNameLen)} {
		c, err := p("a").Child(good)
		if err != nil || c.String() != "a/"+good || c.Base() != good {
			t.Errorf("Child(%q) = %q, %v", good, c, err)
		}
		if r, err := vfs.Root.Child(good); err != nil || r.String() != good {
			t.Errorf("Root.Child(%q) = %q, %v", good, r, err)
		}
	}
	if !p("a/").Equal(p("a")) || p("a").Equal(p("b")) || p("a/").WithoutDirMark().MustBeDir() {
		t.Error("Equal ignores the directory mark; WithoutDirMark drops it")
	}
	if vfs.Root.String() != "." || vfs.Root.Raw() != "" || !vfs.Root.IsRoot() {
		t.Error("root spelling")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustParse(\"..\") did not panic")
			}
		}()
		vfs.MustParse("..")
	}()
}

func TestErrorMatching(t *testing.T) {
	sentinels := map[vfs.Code][]error{
		vfs.CodeOutside:      {fs.ErrPermission},
		vfs.CodeInvalidPath:  {fs.ErrInvalid},
		vfs.CodePermission:   {fs.ErrPermission},
		vfs.CodeReadOnly:     {fs.ErrPermission},
		vfs.CodeRevoked:      {fs.ErrPermission},
		vfs.CodeNotFound:     {fs.ErrNotExist},
		vfs.CodeExists:       {fs.ErrExist},
		vfs.CodeNotDir:       {fs.ErrInvalid},
		vfs.CodeIsDir:        {fs.ErrInvalid},
		vfs.CodeNotEmpty:     {fs.ErrExist},
		vfs.CodeTooLarge:     nil,
		vfs.CodeQuota:        nil,
		vfs.CodeTooManyLinks: {fs.ErrInvalid},
		vfs.CodeNotRegular:   {fs.ErrInvalid},
		vfs.CodeCrossMount:   nil,
		vfs.CodeConflict:     nil,
		vfs.CodeClosed:       {fs.ErrClosed},
		vfs.CodeNotSupported: {errors.ErrUnsupported},
		vfs.CodeIO:           nil,
	}
	all := []error{fs.ErrPermission, fs.ErrInvalid, fs.ErrNotExist, fs.ErrExist, fs.ErrClosed, errors.ErrUnsupported}
	for code, want := range sentinels {
		err := error(vfs.NewError(code, "op", vfs.MustParse("a/b"), ""))
		for _, s := range all {
			got := errors.Is(err, s)
			exp := false
			for _, w := range want {
				exp = exp || w == s
			}
			if got != exp {
				t.Errorf("errors.Is(%s, %v) = %v, want %v", code, s, got, exp)
			}
		}
		if !errors.Is(err, &vfs.Error{Code: code}) || errors.Is(err, &vfs.Error{Code: "other"}) {
			t.Errorf("%s: matching by code", code)
		}
		if vfs.CodeOf(fmtWrap(err)) != code {
			t.Errorf("CodeOf through a wrapper lost %s", code)
		}
	}
	if !errors.Is(fmtWrap(vfs.NewError(vfs.CodeNotFound, "stat", vfs.Root, "")), vfs.ErrNotFound) {
		t.Error("errors.Is(wrapped not_found, vfs.ErrNotFound)")
	}
	if vfs.CodeOf(errors.New("plain")) != "" || vfs.CodeOf(nil) != "" {
		t.Error("CodeOf of a non-*Error must be empty")
	}

	e := vfs.NewError(vfs.CodeExists, "rename", vfs.MustParse("a"), "detail")
	if s := e.Error(); s != "rename a: already_exists: detail" || e.Message() != "detail" {
		t.Errorf("Error() = %q", s)
	}
	r := vfs.Readdress(e, "move", "guest/a", "guest/b")
	var re *vfs.Error
	if !errors.As(r, &re) || re.Op != "move" || re.Path != "guest/a" || re.Dest != "guest/b" || re.Code != vfs.CodeExists {
		t.Errorf("Readdress = %#v", r)
	}
	if e.Op != "rename" || e.Path != "a" || e.Dest != "" {
		t.Error("Readdress modified its argument")
	}
	if s := r.Error(); s != "move guest/a -> guest/b: already_exists: detail" {
		t.Errorf("readdressed Error() = %q", s)
	}
	if r := vfs.Readdress(e, "", "x", ""); r.(*vfs.Error).Op != "rename" {
		t.Error("Readdress with empty op must keep the op")
	}
	plain := errors.New("plain")
	if vfs.Readdress(plain, "op", "p", "") != plain {
		t.Error("Readdress of a non-*Error must return it unchanged")
	}
}

func fmtWrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestErrnoDropsHostPaths(t *testing.T) {
	host := t.TempDir()
	p := vfs.MustParse("guest/f")
	if vfs.Errno("stat", p, nil) != nil {
		t.Error("Errno(nil) != nil")
	}
	_, statErr := os.Stat(host + "/missing")
	linkErr := os.Link(host+"/missing", host+"/other")
	mkErr := os.Mkdir(host, 0o755)
	tests := []struct {
		err  error
		code vfs.Code
		is   error
	}{
		{statErr, vfs.CodeNotFound, fs.ErrNotExist},
		{linkErr, vfs.CodeNotFound, fs.ErrNotExist},
		{mkErr, vfs.CodeExists, fs.ErrExist},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: syscall.ENOTDIR}, vfs.CodeNotDir, fs.ErrInvalid},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: syscall.ELOOP}, vfs.CodeTooManyLinks, fs.ErrInvalid},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: syscall.EACCES}, vfs.CodePermission, fs.ErrPermission},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: syscall.ENOTEMPTY}, vfs.CodeNotEmpty, fs.ErrExist},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: syscall.EROFS}, vfs.CodeReadOnly, fs.ErrPermission},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: syscall.EXDEV}, vfs.CodeCrossMount, nil},
		{&fs.PathError{Op: "open", Path: host + "/x", Err: errors.New("weird " + host)}, vfs.CodeIO, nil},
		{&os.LinkError{Op: "rename", Old: host + "/a", New: host + "/b", Err: syscall.EISDIR}, vfs.CodeIsDir, fs.ErrInvalid},
		{&fs.PathError{Op: "open", Path: host, Err: fs.ErrNotExist}, vfs.CodeNotFound, fs.ErrNotExist},
		{errors.New("unknown " + host), vfs.CodeIO, nil},
	}
	for i, tt := range tests {
		if tt.err == nil {
			t.Errorf("case %d: the host call unexpectedly succeeded", i)
			continue
		}
		got := vfs.Errno("op", p, tt.err)
		var e *vfs.Error
		if !errors.As(got, &e) || e.Code != tt.code || e.Op != "op" || e.Path != "guest/f" {
			t.Errorf("case %d: Errno(%v) = %#v; want code %s", i, tt.err, got, tt.code)
			continue
		}
		if strings.Contains(got.Error(), host) || strings.Contains(got.Error(), "/tmp/") {
			t.Errorf("case %d: Errno kept a host path: %q", i, got)
		}
		for c := error(e); c != nil; c = errors.Unwrap(c) {
			if strings.Contains(c.Error(), host) {
				t.Errorf("case %d: the cause chain holds a host path: %q", i, c)
			}
		}
		if tt.is != nil && !errors.Is(got, tt.is) {
			t.Errorf("case %d: errors.Is(%v, %v) = false", i, got, tt.is)
		}
	}
	// An *Error is re-addressed, not re-wrapped.
	in := vfs.NewError(vfs.CodeNotEmpty, "remove", vfs.MustParse("inner"), "")
	got := vfs.Errno("rmdir", p, fmtWrap(in))
	if e, ok := got.(*vfs.Error); !ok || e.Code != vfs.CodeNotEmpty || e.Op != "rmdir" || e.Path != "guest/f" {
		t.Errorf("Errno(*Error) = %#v", got)
	}
}
