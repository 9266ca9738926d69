package audit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// reflectLine is what encoding/json writes for e with its paths in text form
// (pathText; HTML escaping off), or nil when it refuses e.
func reflectLine(e Event) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(textPaths(e)) != nil {
		return nil
	}
	return buf.Bytes()
}

func checkSame(t *testing.T, e Event) {
	t.Helper()
	want := reflectLine(e)
	got := AppendJSON(nil, e)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON(%#v)\n got %q\nwant %q", e, got, want)
	}
	// Appending keeps what the slice held.
	if got := AppendJSON([]byte("x"), e); !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Fatalf("AppendJSON onto a prefix: %q", got)
	}
}

// TestAppendJSONIsEncodingJSON: AppendJSON writes the bytes encoding/json
// writes, for every byte value in every string field, every field empty and
// set, times in several zones and precisions, and random strings (invalid
// UTF-8, U+2028/U+2029, multi-byte runes).
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	base := Event{Time: time.Date(2026, 11, 28, 3, 4, 5, 123456789, time.UTC), RequestID: "r-1", Op: "read",
		Path: "a/b", Outcome: OK, Duration: 1234}
	checkSame(t, base)
	checkSame(t, Event{})
	full := base
	full.Subject, full.Dest, full.GuestPath, full.Code, full.Rule, full.Grant, full.Tag, full.Count =
		"s", "d", "g", "not_found", "default", "gr", "s1/read/2", 7
	full.Outcome, full.Duration = Denied, -5
	checkSame(t, full)
	for c := range 256 {
		s := "a" + string([]byte{byte(c)}) + "b" + string([]byte{byte(c)})
		e := full
		e.RequestID, e.Subject, e.Op, e.Path, e.Dest, e.GuestPath, e.Code, e.Rule, e.Grant, e.Tag = s, s, s, s, s, s, s, s, s, s
		e.Outcome = Outcome(s)
		checkSame(t, e)
	}
	for _, s := range []string{"\u2028", "\u2029", "x\u2028y\u2029z", "é", "𝄞", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc3", "ab\xffcd", "<>&", "\x7f", strings.Repeat("\"\\", 100)} {
		e := base
		e.Path = s
		checkSame(t, e)
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -7*3600)}
	for _, loc := range zones {
		for _, ns := range []int{0, 1, 120000000, 999999999} {
			e := base
			e.Time = time.Date(2026, 1, 2, 3, 4, 5, ns, loc)
			checkSame(t, e)
		}
	}
	for _, y := range []int{-1, 0, 9999, 10000} {
		e := base
		e.Time = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		checkSame(t, e)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = byte(r.IntN(256))
			case 1:
				b[i] = byte(r.IntN(0x20))
			default:
				b[i] = byte('a' + r.IntN(26))
			}
		}
		e := full
		e.Path, e.GuestPath, e.Tag = string(b), string(b)+"\u2028", "é"+string(b)
		e.Count, e.Duration = r.IntN(1000)-500, time.Duration(r.Int64())
		checkSame(t, e)
	}
}

// FuzzAppendJSON: for any strings, AppendJSON writes encoding/json's bytes.
func FuzzAppendJSON(f *testing.F) {
	f.Add("a/b", "g\x00\n", "s1/grep/1", int64(12), 3)
	f.Add("\u2028\xff\"\\", "", "<&>", int64(-1), 0)
	f.Fuzz(func(t *testing.T, path, guest, tag string, dur int64, count int) {
		e := Event{Time: time.Unix(0, dur).UTC(), RequestID: tag, Op: "write", Path: path, GuestPath: guest,
			Outcome: Failed, Code: guest, Duration: time.Duration(dur), Tag: tag, Count: count}
		checkSame(t, e)
	})
}

// BenchmarkAppendJSON: one typical event, by AppendJSON and by encoding/json.
func BenchmarkAppendJSON(b *testing.B) {
	e := Event{Time: time.Now(), RequestID: "61a77cc2d880-7074", Subject: "capfs/run", Op: "stat",
		Path: "project/src/pkg/file.c", GuestPath: "src/pkg/file.c", Outcome: Failed, Code: "not_found",
		Rule: "default", Duration: 10436}
	b.Run("AppendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = AppendJSON(buf[:0], e)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
