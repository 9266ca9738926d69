package dir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/capfs/capfs/vfs"
)

// DefaultMaxJSONBytes is ReadJSON's size limit when JSONReadOptions.MaxBytes is 0.
const DefaultMaxJSONBytes int64 = 8 << 20

// ErrJSON is the cause (errors.Is) of the io_error ReadJSON returns for a
// document that is not valid JSON for the value, has unknown fields or
// trailing data under Strict, and of WriteJSON's error for a value that cannot
// be encoded.
var ErrJSON = errors.New("invalid JSON")

// JSONReadOptions configure ReadJSON. The zero value is the default.
type JSONReadOptions struct {
	// MaxBytes is the largest document read (0: DefaultMaxJSONBytes); a larger
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

// ReadJSON reads file path (one Dir read: decided, hooked and audited as a
// Read) and decodes it into v, a pointer. It reads at most MaxBytes plus one
// byte, whatever the file's reported size. Errors: the read's *vfs.Error, or
// file_too_large, or io_error wrapping ErrJSON (with the decoder's message,
// which names the offset and the field, never a host path).
func (d *Dir) ReadJSON(ctx context.Context, path string, v any, opts JSONReadOptions) error {
	max := opts.MaxBytes
	if max <= 0 {
		max = DefaultMaxJSONBytes
	}
	h, err := d.Open(ctx, path, os.O_RDONLY, 0)
	if err != nil {
		return reop(err, "ReadJSON")
	}
	defer h.Close()
	data, err := io.ReadAll(io.LimitReader(h, max+1))
	if err != nil {
		return reop(err, "ReadJSON")
	}
	if int64(len(data)) > max {
		return errAt(vfs.CodeTooLarge, "ReadJSON", path, "", fmt.Sprintf("larger than %d bytes", max))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if opts.Strict {
		dec.DisallowUnknownFields()
	}
	if opts.UseNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return &vfs.Error{Code: vfs.CodeIO, Op: "ReadJSON", Path: printable(path), Err: fmt.Errorf("%w: %v", ErrJSON, err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &vfs.Error{Code: vfs.CodeIO, Op: "ReadJSON", Path: printable(path), Err: fmt.Errorf("%w: data after the JSON value", ErrJSON)}
	}
	return nil
}

// JSONWriteOptions configure WriteJSON. The zero value is the default.
type JSONWriteOptions struct {
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

// WriteJSON encodes v and replaces file path with it atomically (WriteFile: a
// temporary file renamed over it, so readers see the old document or the new,
// never a torn one). The formatting is stable: encoding/json's (struct fields
// in declaration order, map keys sorted), indented two spaces unless set
// otherwise, ending with one newline.
func (d *Dir) WriteJSON(ctx context.Context, path string, v any, opts JSONWriteOptions) error {
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
		return &vfs.Error{Code: vfs.CodeIO, Op: "WriteJSON", Path: printable(path), Err: fmt.Errorf("%w: %v", ErrJSON, err)}
	}
	if opts.MaxBytes > 0 && int64(buf.Len()) > opts.MaxBytes {
		return errAt(vfs.CodeTooLarge, "WriteJSON", path, "", fmt.Sprintf("the document is %d bytes, more than %d", buf.Len(), opts.MaxBytes))
	}
	perm := opts.Perm
	if perm == 0 {
		perm = filePerm
	}
	if err := d.WriteFile(ctx, path, buf.Bytes(), perm); err != nil {
		return reop(err, "WriteJSON")
	}
	return nil
}
