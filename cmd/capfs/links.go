package main

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"time"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/termsafe"
	"github.com/capfs/capfs/vfs"
)

// linkInfo describes where symlink p points and what it reaches, as a call
// through the link would find it: the target as stored (Readlink; an absolute
// target is not shown) and a note: "" when the link reaches something in the
// namespace, "leaves the mount" when following it would leave its mount (an
// absolute target, or ".." above the mount root: such a link is never
// followed), "dangling" when it reaches nothing, or the error's message.
func linkInfo(ctx context.Context, d *dir.Dir, p string) (target string, absolute bool, note string) {
	t, err := d.Readlink(ctx, p)
	switch {
	case err == nil:
		target = t
	case vfs.CodeOf(err) == vfs.CodeOutside:
		absolute = true
	default:
		return "", false, errMessage(err)
	}
	_, err = d.Stat(ctx, p)
	switch vfs.CodeOf(err) {
	case "":
	case vfs.CodeOutside:
		note = "leaves the mount"
	case vfs.CodeNotFound:
		note = "dangling"
	case vfs.CodeTooManyLinks:
		note = "loops"
	case vfs.CodePermission:
		note = "reaches a path the policy refuses"
	default:
		note = errMessage(err)
	}
	if absolute && note == "" {
		note = "leaves the mount"
	}
	return target, absolute, note
}

// linkText is " -> target" with its note, for ls -l, tree and stat.
func linkText(target string, absolute bool, note string) string {
	s := " -> "
	if absolute {
		s += "(absolute target, not shown)"
	} else {
		s += show(target)
	}
	if note != "" {
		s += " [" + show(note) + "]"
	}
	return s
}

// jsonEntry is one entry of a listing in --json output. Fields the policy
// hides are left out, and Hidden is set.
type jsonEntry struct {
	Name     string       `json:"name"`
	Path     string       `json:"path"`
	Type     string       `json:"type,omitempty"`
	Mode     string       `json:"mode,omitempty"`
	Perm     string       `json:"perm,omitempty"`
	Size     *int64       `json:"size,omitempty"`
	ModTime  *time.Time   `json:"mtime,omitempty"`
	Target   *string      `json:"target,omitempty"`
	Absolute bool         `json:"target_absolute,omitempty"`
	Note     string       `json:"link_note,omitempty"`
	Hidden   bool         `json:"hidden,omitempty"`
	Children []*jsonEntry `json:"children,omitempty"`
}

// newJSONEntry fills an entry from info (nil: hidden by the policy) and, for a
// symlink, its link information.
func newJSONEntry(ctx context.Context, d *dir.Dir, full, name string, info fs.FileInfo) *jsonEntry {
	e := &jsonEntry{Name: name, Path: displayPath(full)}
	if info == nil {
		e.Hidden = true
		return e
	}
	size, mt := info.Size(), info.ModTime().UTC()
	e.Type = typeName(info.Mode())
	e.Mode = info.Mode().String()
	e.Perm = "0" + formatOctal(uint32(info.Mode().Perm()))
	e.Size, e.ModTime = &size, &mt
	if info.Mode()&fs.ModeSymlink != 0 {
		t, abs, note := linkInfo(ctx, d, full)
		if !abs {
			e.Target = &t
		}
		e.Absolute, e.Note = abs, note
	}
	return e
}

func formatOctal(v uint32) string {
	const digits = "01234567"
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{digits[v&7]}, b...)
		v >>= 3
	}
	return string(b)
}

// writeJSON writes v as indented JSON and a newline; a name that is not
// UTF-8 in termsafe's escaped form (termsafe.ForJSONValue), not as U+FFFD.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(termsafe.ForJSONValue(v))
}
