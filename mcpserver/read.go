package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

type tailIn struct {
	Path  string `json:"path" jsonschema:"the file to read the end of"`
	Lines int    `json:"lines,omitempty" jsonschema:"how many of the last lines to return (default 20)"`
}

type mediaIn struct {
	Path string `json:"path" jsonschema:"the image or audio file to read"`
}

// readOut is read's and tail's structured result.
type readOut struct {
	Path       string `json:"path"`
	Kind       string `json:"kind" jsonschema:"text, image or audio"`
	StartLine  int    `json:"start_line,omitempty" jsonschema:"number of the first line returned"`
	EndLine    int    `json:"end_line,omitempty" jsonschema:"number of the last line returned"`
	TotalLines int    `json:"total_lines,omitempty" jsonschema:"lines in the file, when the read reached its end"`
	More       bool   `json:"more,omitempty" jsonschema:"more lines follow: continue with offset end_line+1"`
	LineEnding string `json:"line_ending,omitempty" jsonschema:"the line endings of the lines returned: lf, crlf, mixed or none (a single line without one)"`
	Encoding   string `json:"encoding,omitempty" jsonschema:"utf-8: the only text encoding read returns (other files are refused)"`
	Content    string `json:"content,omitempty" jsonschema:"the lines returned, each ending with \\n (line ends normalized; see line_ending), without numbers"`
	MIMEType   string `json:"mime_type,omitempty" jsonschema:"the MIME type of an image or audio file"`
	Size       int64  `json:"size,omitempty" jsonschema:"the size in bytes of an image or audio file"`

	media []byte
}

func (r readOut) extraContent() []mcp.Content {
	switch r.Kind {
	case "image":
		return []mcp.Content{&mcp.ImageContent{MIMEType: r.MIMEType, Data: r.media}}
	case "audio":
		return []mcp.Content{&mcp.AudioContent{MIMEType: r.MIMEType, Data: r.media}}
	}
	return nil
}

type readManyOut struct {
	Files []readManyFile `json:"files"`
}

type readManyFile struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Error   string `json:"error,omitempty" jsonschema:"the error code when the file could not be read"`
	Skipped bool   `json:"skipped,omitempty" jsonschema:"not read: the read limit was reached"`
}

// maxReadMany bounds read_many's list of paths.
const maxReadMany = 100

// sniffLen is how much of a file is looked at to decide whether it is binary.
const sniffLen = 8000

func (s *server) read(ctx context.Context, in readIn) (readOut, string, error) {
	if in.Offset < 0 {
		return readOut{}, "", argErrorf("argument \"offset\" must be a line number from 1, got %d", in.Offset)
	}
	if in.Limit < 0 {
		return readOut{}, "", argErrorf("argument \"limit\" must be a positive number of lines, got %d", in.Limit)
	}
	var b bytes.Buffer
	out, err := s.readLines(ctx, &b, "read", in.Path, in.Offset, in.Limit, s.opts.MaxReadBytes, true)
	if err != nil {
		return readOut{}, "", err
	}
	return out, b.String(), nil
}

// lineEnds counts the line endings of the lines returned.
type lineEnds struct{ lf, crlf int }

func (e lineEnds) String() string {
	switch {
	case e.lf == 0 && e.crlf == 0:
		return "none"
	case e.crlf == 0:
		return "lf"
	case e.lf == 0:
		return "crlf"
	}
	return "mixed"
}

// textError refuses a file that is not UTF-8 text, saying what it looks like.
func textError(op, path string, head []byte, line int) error {
	switch {
	case bytes.HasPrefix(head, []byte{0xff, 0xfe}), bytes.HasPrefix(head, []byte{0xfe, 0xff}):
		return toolError(vfs.CodeNotSupported, op, path, "the file is UTF-16 text (it starts with a UTF-16 byte-order mark); only UTF-8 text can be read")
	case line > 0:
		return toolError(vfs.CodeNotSupported, op, path,
			"line %d is not valid UTF-8: the file is in another encoding (Latin-1, Windows-1252, ...) or binary; only UTF-8 text is returned, never with bytes replaced", line)
	}
	return toolError(vfs.CodeNotSupported, op, path, "binary file: only text files can be read (images and audio: use read_media)")
}

// mediaType is the MIME type of an image or audio file, from its first bytes
// (and its name for the audio formats sniffing does not know), or "".
func mediaType(name string, head []byte) string {
	mt := http.DetectContentType(head)
	if strings.HasPrefix(mt, "image/") || strings.HasPrefix(mt, "audio/") {
		mt = strings.TrimSpace(strings.Split(mt, ";")[0])
		if mt == "audio/wave" {
			mt = "audio/wav"
		}
		return mt
	}
	if mt == "application/ogg" {
		return "audio/ogg"
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".flac":
		if bytes.HasPrefix(head, []byte("fLaC")) {
			return "audio/flac"
		}
	case ".m4a":
		if len(head) > 8 && string(head[4:8]) == "ftyp" {
			return "audio/mp4"
		}
	case ".mp3":
		if bytes.HasPrefix(head, []byte("ID3")) || (len(head) > 1 && head[0] == 0xff && head[1]&0xe0 == 0xe0) {
			return "audio/mpeg"
		}
	}
	return ""
}

// readLines appends to out the numbered lines [offset, offset+limit) of path, as
// `cat -n` shows them, cutting lines longer than the line width. It fails with
// file_too_large, naming a smaller limit, when the lines would take more than
// budget bytes. A file that is not UTF-8 text is refused (not_supported); an
// image or audio file is returned as media when media is set.
func (s *server) readLines(ctx context.Context, out *bytes.Buffer, op, path string, offset, limit, budget int, media bool) (readOut, error) {
	res := readOut{Path: path, Kind: "text", Encoding: "utf-8"}
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = s.opts.ReadLines
	}
	h, err := s.root.Open(ctx, path, os.O_RDONLY, 0)
	if err != nil {
		return res, err
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return res, err
	}
	if fi.IsDir() {
		return res, toolError(vfs.CodeIsDir, op, path, "is a directory: use list or tree")
	}
	br := bufio.NewReaderSize(h, 64<<10)
	head, _ := br.Peek(sniffLen)
	if mt := mediaType(path, head); mt != "" {
		if !media {
			return res, toolError(vfs.CodeNotSupported, op, path, "%s file (%d bytes): read it alone with read or read_media", mt, fi.Size())
		}
		return s.readMedia(ctx, h, br, path, mt, fi.Size(), out)
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return res, textError(op, path, head, 0)
	}
	r := &numberedLines{out: out, res: &res, op: op, path: path, head: head,
		offset: offset, limit: limit, budget: budget, start: out.Len()}
	lineNo, err := r.read(ctx, br, s.opts.LineWidth)
	if err != nil {
		return res, err
	}
	r.finish(lineNo)
	return res, nil
}

// numberedLines is one readLines call's output: the lines [offset,
// offset+limit) written numbered to out (from start, at most budget bytes)
// and recorded in res.
type numberedLines struct {
	out                   *bytes.Buffer
	res                   *readOut
	op, path              string
	head                  []byte // the file's first bytes, for textError
	offset, limit, budget int
	start                 int // out's length before the first line
	shown                 int
	ends                  lineEnds
	content               bytes.Buffer
}

// read reads br line by line (lines cut at width), showing the lines asked
// for, and returns the number of the last line read.
func (r *numberedLines) read(ctx context.Context, br *bufio.Reader, width int) (int, error) {
	lineNo := 0
	var line []byte
	for {
		var cut int
		var cr bool
		var err error
		line, cut, cr, err = readLine(br, line[:0], width)
		if err == io.EOF && len(line) == 0 && cut == 0 && !cr {
			return lineNo, nil
		}
		if err != nil && err != io.EOF {
			return lineNo, err
		}
		lineNo++
		if lineNo%4096 == 0 {
			if cerr := ctx.Err(); cerr != nil {
				return lineNo, cerr
			}
		}
		if lineNo >= r.offset {
			stop, serr := r.show(lineNo, line, cut, cr, err == io.EOF)
			if serr != nil {
				return lineNo, serr
			}
			if stop {
				return lineNo, nil
			}
		}
		if err == io.EOF {
			return lineNo, nil
		}
	}
}

// show writes line lineNo (cut bytes cut off; cr when it ended in CRLF; last
// when no newline ended it) and records it, or reports true to stop once
// limit lines are shown. Lines past the byte budget fail with
// file_too_large, naming a limit that fits.
func (r *numberedLines) show(lineNo int, line []byte, cut int, cr, last bool) (bool, error) {
	if r.shown == r.limit {
		r.res.More = true
		fmt.Fprintf(r.out, "(more lines follow: continue with offset=%d)\n", lineNo)
		return true, nil
	}
	if !utf8.Valid(line) {
		return false, textError(r.op, r.path, r.head, lineNo)
	}
	before := r.out.Len()
	writeNumbered(r.out, lineNo, line, cut)
	if r.out.Len()-r.start > r.budget {
		r.out.Truncate(before)
		return false, toolError(vfs.CodeTooLarge, r.op, r.path,
			"lines %d-%d take more than the %d-byte read limit; read fewer lines at a time: offset=%d limit=%d",
			r.offset, lineNo, r.budget, r.offset, max(r.shown, 1))
	}
	r.content.Write(line)
	r.content.WriteByte('\n')
	if !last {
		if cr {
			r.ends.crlf++
		} else {
			r.ends.lf++
		}
	}
	if r.shown == 0 {
		r.res.StartLine = lineNo
	}
	r.res.EndLine = lineNo
	r.shown++
	return false, nil
}

// finish records the totals once lineNo lines were read, and notes an
// empty file, an offset past the end and CRLF line ends.
func (r *numberedLines) finish(lineNo int) {
	res := r.res
	if !res.More {
		res.TotalLines = lineNo
	}
	res.Content = r.content.String()
	res.LineEnding = r.ends.String()
	switch {
	case lineNo == 0:
		r.out.WriteString("(empty file)\n")
	case r.shown == 0 && !res.More:
		fmt.Fprintf(r.out, "(no lines at offset %d: the file has %d lines)\n", r.offset, lineNo)
	}
	if res.LineEnding == "crlf" || res.LineEnding == "mixed" {
		fmt.Fprintf(r.out, "(line endings: %s; edits keep them, and old_string may use \\n)\n", strings.ToUpper(res.LineEnding))
	}
}

// readMedia returns an image or audio file as media content, up to the media
// size limit.
func (s *server) readMedia(ctx context.Context, h io.Reader, br *bufio.Reader, p, mt string, size int64, out *bytes.Buffer) (readOut, error) {
	res := readOut{Path: p, Kind: strings.SplitN(mt, "/", 2)[0], MIMEType: mt, Size: size}
	if size > int64(s.opts.MaxMediaBytes) {
		return res, toolError(vfs.CodeTooLarge, "read", p, "%s file of %d bytes: larger than the %d-byte media limit", mt, size, s.opts.MaxMediaBytes)
	}
	data, err := io.ReadAll(io.LimitReader(br, int64(s.opts.MaxMediaBytes)+1))
	if err != nil {
		return res, err
	}
	if len(data) > s.opts.MaxMediaBytes {
		return res, toolError(vfs.CodeTooLarge, "read", p, "%s file larger than the %d-byte media limit", mt, s.opts.MaxMediaBytes)
	}
	res.media = data
	res.Size = int64(len(data))
	fmt.Fprintf(out, "%s: %s, %d bytes (returned as %s content)\n", esc(p), mt, len(data), res.Kind)
	return res, ctx.Err()
}

func (s *server) readMediaTool(ctx context.Context, in mediaIn) (readOut, string, error) {
	h, err := s.root.Open(ctx, in.Path, os.O_RDONLY, 0)
	if err != nil {
		return readOut{}, "", err
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return readOut{}, "", err
	}
	if fi.IsDir() {
		return readOut{}, "", toolError(vfs.CodeIsDir, "read_media", in.Path, "is a directory: use list or tree")
	}
	br := bufio.NewReaderSize(h, 64<<10)
	head, _ := br.Peek(512)
	mt := mediaType(in.Path, head)
	if mt == "" {
		return readOut{}, "", toolError(vfs.CodeNotSupported, "read_media", in.Path,
			"not an image or audio file this server recognizes (PNG, JPEG, GIF, WebP, BMP, ICO, WAV, MP3, OGG, FLAC, M4A); use read for text")
	}
	var b bytes.Buffer
	out, err := s.readMedia(ctx, h, br, in.Path, mt, fi.Size(), &b)
	if err != nil {
		return readOut{}, "", err
	}
	return out, b.String(), nil
}

// DefaultTailLines is how many lines tail returns without a count.
const DefaultTailLines = 20

func (s *server) tail(ctx context.Context, in tailIn) (readOut, string, error) {
	if in.Lines < 0 {
		return readOut{}, "", argErrorf("argument \"lines\" must be a positive number of lines, got %d", in.Lines)
	}
	n := in.Lines
	if n == 0 {
		n = DefaultTailLines
	}
	// Count the lines first (one streaming pass), then read the last n.
	h, err := s.root.Open(ctx, in.Path, os.O_RDONLY, 0)
	if err != nil {
		return readOut{}, "", err
	}
	fi, err := h.Stat()
	if err != nil {
		h.Close()
		return readOut{}, "", err
	}
	if fi.IsDir() {
		h.Close()
		return readOut{}, "", toolError(vfs.CodeIsDir, "tail", in.Path, "is a directory: use list or tree")
	}
	total, last := 0, byte('\n')
	buf := make([]byte, 256<<10)
	for {
		k, rerr := h.Read(buf)
		if k > 0 {
			total += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			h.Close()
			return readOut{}, "", rerr
		}
		if cerr := ctx.Err(); cerr != nil {
			h.Close()
			return readOut{}, "", cerr
		}
	}
	h.Close()
	if last != '\n' {
		total++ // a last line without a newline
	}
	offset := max(1, total-n+1)
	var b bytes.Buffer
	out, err := s.readLines(ctx, &b, "tail", in.Path, offset, n, s.opts.MaxReadBytes, false)
	if err != nil {
		return readOut{}, "", err
	}
	return out, b.String(), nil
}

// readLine reads one line (without its newline) into buf, keeping at most width
// bytes of it (cut at a rune boundary); cut is how many bytes were dropped, cr
// whether the line ended with \r\n. err is io.EOF for a last line without a
// newline (or no line at all).
func readLine(br *bufio.Reader, buf []byte, width int) (line []byte, cut int, cr bool, err error) {
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
			cr = cut == 0 && bytes.HasSuffix(buf, []byte("\r"))
			return trimRune(buf, &cut), cut, cr, nil
		case errors.Is(e, bufio.ErrBufferFull):
			continue
		default:
			return trimRune(buf, &cut), cut, false, e
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

func (s *server) readMany(ctx context.Context, in readManyIn) (readManyOut, string, error) {
	out := readManyOut{Files: []readManyFile{}}
	if len(in.Paths) == 0 {
		return out, "", argErrorf("argument \"paths\" is empty; give at least one file")
	}
	if len(in.Paths) > maxReadMany {
		return out, "", argErrorf("argument \"paths\" has %d paths; at most %d per call", len(in.Paths), maxReadMany)
	}
	var b strings.Builder
	failed := 0
	var firstErr error
	for i, p := range in.Paths {
		left := s.opts.MaxReadBytes - b.Len()
		if left <= 0 {
			fmt.Fprintf(&b, "(read limit of %d bytes reached: %d files not read, starting with %q; read them separately)\n",
				s.opts.MaxReadBytes, len(in.Paths)-i, p)
			for _, q := range in.Paths[i:] {
				out.Files = append(out.Files, readManyFile{Path: q, Skipped: true})
			}
			break
		}
		fmt.Fprintf(&b, "==> %s <==\n", esc(p))
		var one bytes.Buffer
		r, err := s.readLines(ctx, &one, "read_many", p, 1, 0, left, false)
		if err != nil {
			if vfs.CodeOf(err) == vfs.CodeRevoked {
				return out, "", err
			}
			failed++
			if firstErr == nil {
				firstErr = err
			}
			code, _ := errorInfo(err)
			out.Files = append(out.Files, readManyFile{Path: p, Error: code})
			b.WriteString(errorText(err))
			b.WriteByte('\n')
		} else {
			out.Files = append(out.Files, readManyFile{Path: p, Content: r.Content})
			b.WriteString(one.String())
		}
		b.WriteByte('\n')
	}
	if failed == len(in.Paths) {
		return out, "", firstErr
	}
	return out, b.String(), nil
}
