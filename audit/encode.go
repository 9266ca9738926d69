package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends e as one JSON line (newline included) to b and returns the
// extended slice: the form [JSONL] writes and [ReadJSONL] reads. A path that is
// not UTF-8, or holds a backslash, is written in internal/termsafe's escaped
// form, which ReadJSONL undoes (see [Event]). The bytes are then those of an
// [encoding/json.Encoder] with HTML escaping off. They are made without
// reflection, since an event is written on every guest call.
func AppendJSON(b []byte, e Event) []byte {
	e = textPaths(e)
	if y := e.Time.Year(); y < 0 || y > 9999 {
		// time.Time's own MarshalJSON refuses these; let encoding/json say so
		// the same way everywhere (the caller reports the error).
		return appendReflect(b, e)
	}
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = field(b, `,"request_id":`, e.RequestID, false)
	b = field(b, `,"subject":`, e.Subject, true)
	b = field(b, `,"op":`, e.Op, false)
	b = field(b, `,"path":`, e.Path, false)
	b = field(b, `,"dest":`, e.Dest, true)
	b = field(b, `,"guest_path":`, e.GuestPath, true)
	b = field(b, `,"outcome":`, string(e.Outcome), false)
	b = field(b, `,"code":`, e.Code, true)
	b = field(b, `,"rule":`, e.Rule, true)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(e.Duration), 10)
	b = field(b, `,"grant":`, e.Grant, true)
	b = field(b, `,"tag":`, e.Tag, true)
	if e.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(e.Count), 10)
	}
	return append(b, "}\n"...)
}

// field appends key and the string v, or nothing when v is empty and the
// field is omitempty.
func field(b []byte, key, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	return appendString(append(b, key...), v)
}

// appendReflect is AppendJSON by encoding/json; on an error it appends nothing
// more than b already holds and the line is left out (JSONL counts it).
func appendReflect(b []byte, e Event) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(e) != nil {
		return b
	}
	return append(b, buf.Bytes()...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json escapes it
// with HTML escaping off: quote, backslash and control characters escaped
// (\b \f \n \r \t by name), invalid UTF-8 as \ufffd, U+2028 and U+2029 as
// \u2028 and \u2029.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
