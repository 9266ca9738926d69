package treediff

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/capfs/capfs/vfs"
)

// MaxBytes is the largest file [Unified] reads for a text diff. Larger files
// are reported as "Files a/p and b/p differ (too large to diff)".
const MaxBytes = 16 << 20

// binarySniff is how much of a file is searched for a NUL byte.
const binarySniff = 8000

// Unified writes changes, as returned by [Compare] or [Renames] on a and b,
// as "git diff" does. Each change has:
//   - a "diff --git a/p b/p" header;
//   - mode lines ("new file mode", "deleted file mode", "old mode"/"new mode");
//   - "similarity index", "rename from" and "rename to" for a rename;
//   - an "index" line when an id is known;
//   - "--- a/p" and "+++ b/p";
//   - the hunks of [WriteHunks] with git's function-name context.
//
// A type change is written as a deletion followed by an addition, as git does.
// Content with a NUL byte in its first 8000 bytes is "Binary files a/p and b/p
// differ". Files over [MaxBytes] are not diffed. Paths are quoted as [Quote]
// does.
func Unified(ctx context.Context, a, b vfs.Backend, changes []Change, w io.Writer) error {
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return &vfs.Error{Code: vfs.CodeCanceled, Op: "diff", Path: c.Path, Err: err}
		}
		if c.Kind == TypeChanged {
			del, add := c, c
			del.Kind, del.NewMode, del.NewID = Deleted, 0, ""
			add.Kind, add.OldMode, add.OldID = Added, 0, ""
			if err := unifiedOne(ctx, a, b, del, w); err != nil {
				return err
			}
			if err := unifiedOne(ctx, a, b, add, w); err != nil {
				return err
			}
			continue
		}
		if err := unifiedOne(ctx, a, b, c, w); err != nil {
			return err
		}
	}
	return nil
}

// ModeString renders a [Change] mode as git's octal mode.
func ModeString(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "160000"
	case m&fs.ModeSymlink != 0:
		return "120000"
	case m&0o111 != 0:
		return "100755"
	}
	return "100644"
}

func abbrev(id string) string {
	if id == "" {
		return "0000000"
	}
	if len(id) > 7 {
		return id[:7]
	}
	return id
}

// content reads the text a diff shows for one side of a change; big is true
// for a file over MaxBytes.
func content(ctx context.Context, b vfs.Backend, path string, mode fs.FileMode, id string) (data []byte, big bool, err error) {
	if mode.IsDir() {
		return []byte("Subproject commit " + id + "\n"), false, nil
	}
	p, err := vfs.ParseGuest(path)
	if err != nil {
		return nil, false, err
	}
	if mode&fs.ModeSymlink != 0 {
		t, err := b.Readlink(ctx, p)
		return []byte(t), false, err
	}
	f, err := b.OpenFile(ctx, p, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > MaxBytes {
		return nil, true, nil
	}
	return data, false, nil
}

func spaceTab(name string) string {
	if strings.IndexByte(name, ' ') >= 0 {
		return "\t"
	}
	return ""
}

func isBinary(b []byte) bool {
	if len(b) > binarySniff {
		b = b[:binarySniff]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// Quote renders prefix+path as git does (core.quotePath on).
// The result is unchanged unless it holds a control character, '"', '\\', DEL
// or a non-ASCII byte. Then it is a double-quoted C string with octal escapes.
func Quote(prefix, path string) string {
	s := prefix + path
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		writeQuoted(&b, s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// cEscapes are the C escapes git writes; other bytes below 0x20 or from 0x7f
// are octal.
var cEscapes = map[byte]string{'\a': `\a`, '\b': `\b`, '\t': `\t`, '\n': `\n`, '\v': `\v`,
	'\f': `\f`, '\r': `\r`, '"': `\"`, '\\': `\\`}

func writeQuoted(b *strings.Builder, c byte) {
	if e, ok := cEscapes[c]; ok {
		b.WriteString(e)
		return
	}
	if c < 0x20 || c >= 0x7f {
		fmt.Fprintf(b, "\\%03o", c)
		return
	}
	b.WriteByte(c)
}

// header writes the lines before the content: "diff --git", modes, rename
// lines. It reports whether the change shows content at all.
func header(buf *bytes.Buffer, c Change) bool {
	from := c.From()
	fmt.Fprintf(buf, "diff --git %s %s\n", Quote("a/", from), Quote("b/", c.Path))
	oldMode, newMode := ModeString(c.OldMode), ModeString(c.NewMode)
	switch c.Kind {
	case Added:
		fmt.Fprintf(buf, "new file mode %s\n", newMode)
	case Deleted:
		fmt.Fprintf(buf, "deleted file mode %s\n", oldMode)
	default:
		if oldMode != newMode {
			fmt.Fprintf(buf, "old mode %s\nnew mode %s\n", oldMode, newMode)
		}
	}
	switch c.Kind {
	case ModeChanged:
		return false
	case Renamed:
		fmt.Fprintf(buf, "similarity index %d%%\nrename from %s\nrename to %s\n", c.Score, Quote("", from), Quote("", c.Path))
		if c.OldID == c.NewID {
			return false
		}
	}
	if c.OldID != "" || c.NewID != "" {
		fmt.Fprintf(buf, "index %s..%s", abbrev(c.OldID), abbrev(c.NewID))
		if (c.Kind == Modified || c.Kind == Renamed) && oldMode == newMode {
			fmt.Fprintf(buf, " %s", newMode)
		}
		buf.WriteByte('\n')
	}
	return true
}

func unifiedOne(ctx context.Context, a, b vfs.Backend, c Change, w io.Writer) error {
	var buf bytes.Buffer
	if !header(&buf, c) {
		_, err := w.Write(buf.Bytes())
		return err
	}
	var old, cur []byte
	var bigA, bigB bool
	var err error
	if c.Kind != Added {
		if old, bigA, err = content(ctx, a, c.From(), c.OldMode, c.OldID); err != nil {
			return err
		}
	}
	if c.Kind != Deleted {
		if cur, bigB, err = content(ctx, b, c.Path, c.NewMode, c.NewID); err != nil {
			return err
		}
	}
	from, to := Quote("a/", c.From()), Quote("b/", c.Path)
	if c.Kind == Added {
		from = "/dev/null"
	}
	if c.Kind == Deleted {
		to = "/dev/null"
	}
	switch {
	case bigA || bigB:
		fmt.Fprintf(&buf, "Files %s and %s differ (too large to diff)\n", from, to)
	case isBinary(old) || isBinary(cur):
		fmt.Fprintf(&buf, "Binary files %s and %s differ\n", from, to)
	default:
		// Like git, a name with a space ends in a tab, for patch(1).
		fmt.Fprintf(&buf, "--- %s%s\n+++ %s%s\n", from, spaceTab(from), to, spaceTab(to))
		WriteHunks(&buf, SplitLines(string(old)), SplitLines(string(cur)), true)
	}
	_, err = w.Write(buf.Bytes())
	return err
}
