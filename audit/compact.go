package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits of the compact form (see Compact): a record holds at most
// compactMaxEvents events and is cut when its events take compactMaxBytes.
const (
	compactMaxEvents = 4096
	compactMaxBytes  = 256 << 10
)

// maxExpanded bounds the bytes of the strings (request id, path, guest path)
// that the events of one compact record decode into: each keeps a prefix of
// the one before it, so a record of a few bytes an event could otherwise ask
// for gigabytes (a long path, then many events keeping it plus a byte). It is
// far past what the writer makes: compactMaxEvents events of 8 KiB paths.
const maxExpanded = 64 << 20

// groupKey is what the events of one compact record share.
type groupKey struct {
	subject, op, code, rule, grant, tag string
	outcome                             Outcome
	zone                                int // the time's offset from UTC, in seconds
}

// group is one compact record being built: the events' elements, each encoded
// relative to the one before it.
type group struct {
	key      groupKey
	first    Event // written as a plain line when it stays alone
	base     time.Time
	n        int
	buf      []byte
	prevTime time.Time
	prevID   string
	prevPath string
}

// compactable reports whether e can go into a compact record: a call that
// was not refused, with one path written as it is (not escaped: see
// pathText), not a summary, and a time JSON can hold.
func compactable(e Event) bool {
	y := e.Time.Year()
	return e.Outcome != Denied && e.Dest == "" && e.Count == 0 && y >= 0 && y <= 9999 &&
		!needsEscape(e.Path) && !needsEscape(e.GuestPath)
}

func keyOf(e Event) groupKey {
	_, off := e.Time.Zone()
	return groupKey{subject: e.Subject, op: e.Op, code: e.Code, rule: e.Rule, grant: e.Grant, tag: e.Tag,
		outcome: e.Outcome, zone: off}
}

// add appends e's element to g. It returns false, adding nothing, when e's
// time is too far from the previous one for a time.Duration.
func (g *group) add(e Event) bool {
	t := e.Time.Round(0)
	if g.n == 0 {
		g.first, g.base, g.prevTime = e, t, t
	}
	dt := t.Sub(g.prevTime)
	if !g.prevTime.Add(dt).Equal(t) {
		return false
	}
	id, p, gp := jsonText(e.RequestID), jsonText(e.Path), jsonText(e.GuestPath)
	if g.n > 0 {
		g.buf = append(g.buf, ',')
	}
	g.buf = append(g.buf, '[')
	g.buf = strconv.AppendInt(g.buf, int64(dt), 10)
	g.buf = appendDelta(g.buf, g.prevID, id)
	g.buf = append(g.buf, ',')
	g.buf = strconv.AppendInt(g.buf, int64(e.Duration), 10)
	g.buf = appendDelta(g.buf, g.prevPath, p)
	g.buf = append(g.buf, ',')
	if strings.HasSuffix(p, gp) {
		g.buf = strconv.AppendInt(g.buf, int64(len(p)-len(gp)), 10)
	} else {
		g.buf = appendString(g.buf, gp)
	}
	g.buf = append(g.buf, ']')
	g.n++
	g.prevTime, g.prevID, g.prevPath = t, id, p
	return true
}

// appendDelta appends ",keep,suffix": s is prev[:keep]+suffix, keep cut at a
// rune boundary so that suffix is valid UTF-8 whenever s is.
func appendDelta(b []byte, prev, s string) []byte {
	n := 0
	for n < len(prev) && n < len(s) && prev[n] == s[n] {
		n++
	}
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ',')
	return appendString(b, s[n:])
}

// jsonText is s as a JSON string carries it: each byte that is not part of
// valid UTF-8 replaced by U+FFFD, as appendString writes it.
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// appendRecord appends g as one line: a compact record, or the plain line of
// its one event.
func (g *group) appendRecord(b []byte) []byte {
	if g.n == 1 {
		return AppendJSON(b, g.first)
	}
	b = append(b, `{"bulk":`...)
	b = strconv.AppendInt(b, int64(g.n), 10)
	b = append(b, `,"time":"`...)
	b = g.base.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	k := g.key
	b = field(b, `,"subject":`, k.subject, true)
	b = field(b, `,"op":`, k.op, false)
	b = field(b, `,"outcome":`, string(k.outcome), false)
	b = field(b, `,"code":`, k.code, true)
	b = field(b, `,"rule":`, k.rule, true)
	b = field(b, `,"grant":`, k.grant, true)
	b = field(b, `,"tag":`, k.tag, true)
	b = append(b, `,"events":[`...)
	b = append(b, g.buf...)
	return append(b, "]}\n"...)
}

// compactor is the compact form's writer (see Compact): it holds the calls
// it is given for at most its interval, grouped by what they share, and writes
// each group as one record. Refusals, calls with a destination and summaries
// it writes at once. It is safe for concurrent use.
type compactor struct {
	write    func(line []byte, events int) // writes one whole line; called with mu held
	interval time.Duration

	mu      sync.Mutex
	groups  map[groupKey]*group
	order   []*group
	pending int
	timer   *time.Timer
	closed  bool
	out     []byte
}

func newCompactor(interval time.Duration, write func(line []byte, events int)) *compactor {
	return &compactor{write: write, interval: interval, groups: make(map[groupKey]*group)}
}

// record adds e to its group, or, when e is not compactable, writes it at
// once as a plain line.
func (c *compactor) record(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !compactable(e) {
		c.writePlain(e)
		return
	}
	k := keyOf(e)
	g := c.groups[k]
	if g == nil {
		g = &group{key: k}
		c.groups[k] = g
		c.order = append(c.order, g)
	}
	if !g.add(e) {
		c.writePlain(e)
		return
	}
	c.pending++
	if c.pending >= compactMaxEvents || len(g.buf) >= compactMaxBytes {
		c.flushLocked()
		return
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(c.interval, c.tick)
	}
}

func (c *compactor) writePlain(e Event) {
	c.out = AppendJSON(c.out[:0], e)
	c.write(c.out, 1)
}

func (c *compactor) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	c.flushLocked()
}

// flush writes every group held.
func (c *compactor) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
}

func (c *compactor) flushLocked() {
	for _, g := range c.order {
		c.out = g.appendRecord(c.out[:0])
		c.write(c.out, g.n)
	}
	if len(c.order) > 0 {
		clear(c.groups)
		clear(c.order)
		c.order = c.order[:0]
		c.pending = 0
	}
	if cap(c.out) > 4*compactMaxBytes {
		c.out = nil
	}
}

// close writes what is held and stops the timer; later events are written
// as plain lines at once.
func (c *compactor) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.flushLocked()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// line is what one line of a log decodes into: an event, or the header and
// elements of a compact record.
type line struct {
	Event
	Bulk   *int              `json:"bulk"`
	Events []json.RawMessage `json:"events"`
}

// decodeLine decodes one line (blank-trimmed, not empty) and passes its
// events to fn, all or none.
func decodeLine(b []byte, fn func(Event) error) error {
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&l); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one value")
	}
	if l.Bulk == nil {
		return fn(bytePaths(l.Event))
	}
	evs, err := expand(&l)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// expand turns a compact record into its events.
func expand(l *line) ([]Event, error) {
	h := l.Event
	if *l.Bulk < 1 || *l.Bulk != len(l.Events) {
		return nil, fmt.Errorf("compact record: bulk %d with %d events", *l.Bulk, len(l.Events))
	}
	if h.RequestID != "" || h.Path != "" || h.Dest != "" || h.GuestPath != "" || h.Duration != 0 || h.Count != 0 {
		return nil, errors.New("compact record: an event field in its header")
	}
	// The events share the header's UTC offset: a fixed zone keeps it across
	// a daylight-saving change that the header's Local zone would follow.
	_, off := h.Time.Zone()
	h.Time = h.Time.In(time.FixedZone("", off))
	out := make([]Event, 0, len(l.Events))
	prev := Event{Time: h.Time}
	total := 0
	for i, raw := range l.Events {
		e, err := expandOne(h, prev, raw)
		if err != nil {
			return nil, fmt.Errorf("compact record: event %d: %w", i+1, err)
		}
		if total += len(e.RequestID) + len(e.Path) + len(e.GuestPath); total > maxExpanded {
			return nil, fmt.Errorf("compact record: its events take more than %d bytes", maxExpanded)
		}
		out = append(out, e)
		prev = e
	}
	return out, nil
}

// expandOne decodes one element, [dt, idKeep, idSuffix, duration, pathKeep,
// pathSuffix, guest], relative to the event before it.
func expandOne(h, prev Event, raw json.RawMessage) (Event, error) {
	var el []json.RawMessage
	if err := json.Unmarshal(raw, &el); err != nil {
		return Event{}, err
	}
	if len(el) != 7 {
		return Event{}, fmt.Errorf("%d fields, want 7", len(el))
	}
	var dt, dur int64
	if err := json.Unmarshal(el[0], &dt); err != nil {
		return Event{}, err
	}
	if err := json.Unmarshal(el[3], &dur); err != nil {
		return Event{}, err
	}
	e := h
	e.Time = prev.Time.Add(time.Duration(dt))
	e.Duration = time.Duration(dur)
	var err error
	if e.RequestID, err = undelta(prev.RequestID, el[1], el[2]); err != nil {
		return Event{}, err
	}
	if e.Path, err = undelta(prev.Path, el[4], el[5]); err != nil {
		return Event{}, err
	}
	if e.GuestPath, err = guestPath(e.Path, el[6]); err != nil {
		return Event{}, err
	}
	return e, nil
}

// undelta is prev[:keep]+suffix, keep at a rune boundary of prev.
func undelta(prev string, keepRaw, suffixRaw json.RawMessage) (string, error) {
	var keep int
	var suffix string
	if err := json.Unmarshal(keepRaw, &keep); err != nil {
		return "", err
	}
	if err := json.Unmarshal(suffixRaw, &suffix); err != nil {
		return "", err
	}
	if !boundary(prev, keep) {
		return "", fmt.Errorf("prefix %d of a %d-byte string", keep, len(prev))
	}
	return prev[:keep] + suffix, nil
}

// guestPath decodes the guest element: an offset into path (the guest path is
// path's tail from there) or the guest path itself.
func guestPath(path string, raw json.RawMessage) (string, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var off int
	if err := json.Unmarshal(raw, &off); err != nil {
		return "", err
	}
	if !boundary(path, off) {
		return "", fmt.Errorf("guest path at %d of a %d-byte path", off, len(path))
	}
	return path[off:], nil
}

// boundary reports whether i splits s between runes.
func boundary(s string, i int) bool {
	return i >= 0 && i <= len(s) && (i == len(s) || utf8.RuneStart(s[i]))
}
