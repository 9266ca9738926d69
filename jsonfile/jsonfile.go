// Package jsonfile reads and writes JSON documents in a capfs Dir: bounded
// reads, strict decoding on request, stable formatting and atomic replacement.
//
// Each function is one or two ordinary Dir calls (decided, hooked and audited
// like any other). Errors are *vfs.Error values naming the guest's path, with
// Op "ReadJSON" or "WriteJSON"; a document that does not decode or encode is an
// io_error wrapping [ErrInvalid], with the decoder's message, which names the
// offset and the field, never a host path.
package jsonfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// DefaultMaxBytes is Read's size limit when ReadOptions.MaxBytes is 0.
const DefaultMaxBytes int64 = 8 << 20

// ErrInvalid is the cause (errors.Is) of the io_error Read returns for a
// document that is not valid JSON for the value, has unknown fields or
// trailing data under Strict, and of Write's error for a value that cannot be
// encoded.
var ErrInvalid = errors.New("invalid JSON")

// ReadOptions configure Read. The zero value is the default.
type ReadOptions struct {
	// MaxBytes is the largest document read (0: DefaultMaxBytes); a larger
	// file fails with file_too_large before it is decoded.
	MaxBytes int64
	// Strict refuses fields the value does not have (for a struct) and any
	// data after the first JSON value other than white space. Without it,
	// unknown fields are ignored, but trailing data is still refused: a file
	// holding two documents is never read as its first.
	Strict bool
	// UseNumber decodes numbers into an interface{} as json.Number, keeping
	// integers beyond 2^53 exact.
	UseNumber bool
}

// Read decodes file path of d into v, a pointer, with one Dir read. It reads
// at most MaxBytes plus one byte, whatever the file's reported size. Errors:
// the read's *vfs.Error, or file_too_large, or io_error wrapping [ErrInvalid].
func Read(ctx context.Context, d *dir.Dir, path string, v any, opts ReadOptions) error {
	max := opts.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	h, err := d.Open(ctx, path, os.O_RDONLY, 0)
	if err != nil {
		return vfs.Reop(err, "ReadJSON")
	}
	defer h.Close()
	data, err := io.ReadAll(io.LimitReader(h, max+1))
	if err != nil {
		return vfs.Reop(err, "ReadJSON")
	}
	if int64(len(data)) > max {
		return vfs.GuestError(vfs.CodeTooLarge, "ReadJSON", path, "", fmt.Sprintf("larger than %d bytes", max))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if opts.Strict {
		dec.DisallowUnknownFields()
	}
	if opts.UseNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return invalid("ReadJSON", path, err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("ReadJSON", path, "data after the JSON value")
	}
	return nil
}

func invalid(op, path, detail string) error {
	return &vfs.Error{Code: vfs.CodeIO, Op: op, Path: vfs.PrintablePath(path), Err: fmt.Errorf("%w: %s", ErrInvalid, detail)}
}

// WriteOptions configure Write. The zero value is the default.
type WriteOptions struct {
	// Indent is the indentation of each level ("": two spaces); Compact writes
	// one line instead.
	Indent  string
	Compact bool
	// EscapeHTML escapes <, > and & as encoding/json does by default; off by
	// default, so config files stay readable.
	EscapeHTML bool
	// Perm is the mode of a new file (0: 0644); an existing file keeps its own.
	Perm fs.FileMode
	// MaxBytes, if positive, refuses (file_too_large) a document larger than it,
	// before anything is written.
	MaxBytes int64
}

// Write encodes v and replaces file path of d with it atomically.
//
// It is one Dir.WriteFile: a temporary file renamed over path, so readers see
// the old document or the new, never a torn one. The formatting is stable:
// encoding/json's (struct fields in declaration order, map keys sorted),
// indented two spaces unless set otherwise, ending with one newline.
func Write(ctx context.Context, d *dir.Dir, path string, v any, opts WriteOptions) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(opts.EscapeHTML)
	if !opts.Compact {
		indent := opts.Indent
		if indent == "" {
			indent = "  "
		}
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return invalid("WriteJSON", path, err.Error())
	}
	if opts.MaxBytes > 0 && int64(buf.Len()) > opts.MaxBytes {
		return vfs.GuestError(vfs.CodeTooLarge, "WriteJSON", path, "", fmt.Sprintf("the document is %d bytes, more than %d", buf.Len(), opts.MaxBytes))
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o644
	}
	if err := d.WriteFile(ctx, path, buf.Bytes(), perm); err != nil {
		return vfs.Reop(err, "WriteJSON")
	}
	return nil
}
