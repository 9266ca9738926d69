package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capfs/capfs/vfs"
)

type readIn struct {
	Path   string `json:"path" jsonschema:"the file to read, relative to the root"`
	Offset int    `json:"offset,omitempty" jsonschema:"1-based number of the first line to return (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return (default 2000)"`
}

type readManyIn struct {
	Paths []string `json:"paths" jsonschema:"the files to read, relative to the root (at most 100)"`
}

// maxReadMany bounds read_many's list of paths.
const maxReadMany = 100

// sniffLen is how much of a file is looked at to decide whether it is binary.
const sniffLen = 8000

func (s *server) read(ctx context.Context, in readIn) (string, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return "", toolError(vfs.CodeInvalidPath, "read", in.Path, "offset and limit must not be negative")
	}
	var b bytes.Buffer
	err := s.readLines(ctx, &b, "read", in.Path, in.Offset, in.Limit, s.opts.MaxReadBytes)
	return b.String(), err
}

// readLines appends to out the numbered lines [offset, offset+limit) of path, as
// `cat -n` shows them, cutting lines longer than the line width. It fails with
// file_too_large, naming a smaller limit, when the lines would take more than
// budget bytes.
func (s *server) readLines(ctx context.Context, out *bytes.Buffer, op, path string, offset, limit, budget int) error {
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = s.opts.ReadLines
	}
	h, err := s.root.Open(ctx, path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return toolError(vfs.CodeIsDir, op, path, "is a directory: use list or tree")
	}
	br := bufio.NewReaderSize(h, 64<<10)
	if head, _ := br.Peek(sniffLen); bytes.IndexByte(head, 0) >= 0 {
		return toolError(vfs.CodeNotSupported, op, path, "binary file (%d bytes): only text files can be read", fi.Size())
	}
	start := out.Len()
	lineNo, shown := 0, 0
	var line []byte
	for {
		var cut int
		line, cut, err = readLine(br, line[:0], s.opts.LineWidth)
		if err == io.EOF && len(line) == 0 && cut == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return err
		}
		lineNo++
		if lineNo%4096 == 0 {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
		}
		if lineNo >= offset {
			if shown == limit {
				fmt.Fprintf(out, "(more lines follow: continue with offset=%d)\n", lineNo)
				return nil
			}
			before := out.Len()
			writeNumbered(out, lineNo, line, cut)
			if out.Len()-start > budget {
				fitted := shown
				out.Truncate(before)
				if fitted == 0 {
					fitted = 1
				}
				return toolError(vfs.CodeTooLarge, op, path,
					"lines %d-%d take more than the %d-byte read limit; read fewer lines at a time: offset=%d limit=%d",
					offset, lineNo, budget, offset, fitted)
			}
			shown++
		}
		if err == io.EOF {
			break
		}
	}
	switch {
	case lineNo == 0:
		out.WriteString("(empty file)\n")
	case shown == 0:
		fmt.Fprintf(out, "(no lines at offset %d: the file has %d lines)\n", offset, lineNo)
	}
	return nil
}

// readLine reads one line (without its newline) into buf, keeping at most width
// bytes of it (cut at a rune boundary); cut is how many bytes were dropped. err is
// io.EOF for a last line without a newline (or no line at all).
func readLine(br *bufio.Reader, buf []byte, width int) (line []byte, cut int, err error) {
	for {
		frag, e := br.ReadSlice('\n')
		frag = bytes.TrimSuffix(frag, []byte("\n"))
		if room := width - len(buf); room > 0 {
			if len(frag) <= room {
				buf = append(buf, frag...)
			} else {
				buf = append(buf, frag[:room]...)
				cut += len(frag) - room
			}
		} else {
			cut += len(frag)
		}
		switch {
		case e == nil:
			return trimRune(buf, &cut), cut, nil
		case errors.Is(e, bufio.ErrBufferFull):
			continue
		default:
			return trimRune(buf, &cut), cut, e
		}
	}
}

// trimRune drops a partial UTF-8 sequence left at the end of a cut line.
func trimRune(b []byte, cut *int) []byte {
	if *cut == 0 {
		return bytes.TrimSuffix(b, []byte("\r"))
	}
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
		*cut++
	}
	return b
}

func writeNumbered(out *bytes.Buffer, n int, line []byte, cut int) {
	num := strconv.Itoa(n)
	for i := len(num); i < 6; i++ {
		out.WriteByte(' ')
	}
	out.WriteString(num)
	out.WriteByte('\t')
	out.Write(line)
	if cut > 0 {
		fmt.Fprintf(out, " …[line cut: %d more bytes]", cut)
	}
	out.WriteByte('\n')
}

func (s *server) readMany(ctx context.Context, in readManyIn) (string, error) {
	if len(in.Paths) == 0 {
		return "", toolError(vfs.CodeInvalidPath, "read_many", "", "paths is empty")
	}
	if len(in.Paths) > maxReadMany {
		return "", toolError(vfs.CodeInvalidPath, "read_many", "", "%d paths; at most %d per call", len(in.Paths), maxReadMany)
	}
	var b strings.Builder
	failed := 0
	var firstErr error
	for i, p := range in.Paths {
		left := s.opts.MaxReadBytes - b.Len()
		if left <= 0 {
			fmt.Fprintf(&b, "(read limit of %d bytes reached: %d files not read, starting with %q; read them separately)\n",
				s.opts.MaxReadBytes, len(in.Paths)-i, p)
			break
		}
		fmt.Fprintf(&b, "==> %s <==\n", esc(p))
		var one bytes.Buffer
		if err := s.readLines(ctx, &one, "read_many", p, 1, 0, left); err != nil {
			if vfs.CodeOf(err) == vfs.CodeRevoked {
				return "", err
			}
			failed++
			if firstErr == nil {
				firstErr = err
			}
			b.WriteString(errorText(err))
			b.WriteByte('\n')
		} else {
			b.WriteString(one.String())
		}
		b.WriteByte('\n')
	}
	if failed == len(in.Paths) {
		return "", firstErr
	}
	return b.String(), nil
}
