package policy

import (
	"hash/maphash"
	"math/bits"
	"strings"
	"sync/atomic"

	"github.com/bmatcuk/doublestar/v4"
)

// This file holds the compiled form of an Engine's patterns: one matcher over
// path components that answers, in a single walk of the path, which of the
// patterns match. The per-pattern matcher (pattern.match) stays as the
// reference and as the fallback for the few patterns and paths the compiled
// form does not take.

// maxIDs bounds the patterns one matcher numbers: its answer is a bit set on
// the stack. An Engine with more patterns decides with the reference matcher.
const maxIDs = 512

// idSet is the set of pattern ids a path matches.
type idSet [maxIDs / 64]uint64

func (s *idSet) add(id uint16)      { s[id>>6] |= 1 << (id & 63) }
func (s *idSet) has(id uint16) bool { return s[id>>6]&(1<<(id&63)) != 0 }

// segKind is what one element of a pattern matches.
type segKind uint8

const (
	segLit  segKind = iota // one component equal to lit
	segGlob                // one component the glob matches (doublestar, on that component alone)
	segAny                 // "**": any number of components, zero included
)

// seg is one "/"-separated element of a compiled pattern. A glob whose "{}"
// alternatives could be spelled out is several alternatives, each literal or
// a glob; one component matches the seg if it matches any of them.
type seg struct {
	kind segKind
	alts []alt
}

// alt is one alternative of a seg.
type alt struct {
	lit  string // the literal, or for a glob its literal prefix
	glob string // "" for a literal
	sfx  string // a glob's literal suffix
}

func (a *alt) match(comp string) bool {
	if a.glob == "" {
		return comp == a.lit
	}
	if !strings.HasPrefix(comp, a.lit) || !strings.HasSuffix(comp, a.sfx) {
		return false
	}
	return doublestar.MatchUnvalidated(a.glob, comp)
}

func (g *seg) match(comp string) bool {
	for i := range g.alts {
		if g.alts[i].match(comp) {
			return true
		}
	}
	return false
}

// cpat is one compiled pattern: its id in the matcher's answer and its
// elements, consecutive "**" collapsed into one.
type cpat struct {
	id   uint16
	segs []seg
	// tailAny[i] reports that segs[i:] are all "**": a state there matches
	// whatever follows, the end of the path included.
	tailAny []bool
}

// state is a position in a pattern: segs[:pos] have matched the components
// walked so far.
type state struct {
	pat uint16
	pos uint16
}

// maxStates bounds the positions followed at once; a path that needs more is
// decided by the reference matcher.
const maxStates = 16

// entry starts a position in a pattern from an index (the pattern, and the
// position after the element the index found).
type entry struct {
	pat uint16
	pos uint16
}

// matcher is a set of patterns compiled into one automaton over path
// components. Patterns beginning with "**" float: their second element is
// looked up in one index for every component. Anchored patterns start from
// another index, at the first component. Positions past the first element are
// followed in a small set of states.
type matcher struct {
	pats      []cpat
	floating  index
	anchored  index
	root      idSet // ids matching the root "."
	always    idSet // ids of patterns made only of "**": every other path
	hasAlways bool
	// residual patterns are matched one by one with the reference matcher
	// (escapes, and "/" inside a class or "{}" group).
	residual []residualPat
	// last is the walk of the directory whose paths were walked last
	// (walkShared); missed is the hash of the last directory walked without it.
	last   atomic.Pointer[dirWalk]
	missed atomic.Uint64
}

type residualPat struct {
	id uint16
	p  *pattern
}

// The residual patterns are candidates for every path; decideEnd confirms them.

// add compiles p under id into m.
func (m *matcher) add(id uint16, p *pattern) {
	if p.root {
		m.root.add(id)
	}
	if p.pat == "." {
		return // matches the root only
	}
	segs, ok := splitSegs(p.pat)
	if !ok {
		m.residual = append(m.residual, residualPat{id, p})
		return
	}
	allAny := true
	for _, s := range segs {
		allAny = allAny && s.kind == segAny
	}
	if allAny {
		m.always.add(id)
		m.hasAlways = true
		return
	}
	c := cpat{id: id, segs: segs, tailAny: make([]bool, len(segs)+1)}
	for i := len(segs) - 1; i >= 0 && segs[i].kind == segAny; i-- {
		c.tailAny[i] = true
	}
	pi := uint16(len(m.pats))
	m.pats = append(m.pats, c)
	cp := &m.pats[pi]
	if cp.segs[0].kind == segAny {
		for i := range cp.segs[1].alts {
			m.floating.addAlt(&cp.segs[1].alts[i], entry{pi, 2})
		}
		return
	}
	for i := range cp.segs[0].alts {
		m.anchored.addAlt(&cp.segs[0].alts[i], entry{pi, 1})
	}
}

// stateSet is a fixed set of positions, with overflow reported.
type stateSet struct {
	s    [maxStates]state
	n    int
	over bool
}

// push adds the position (pat, pos) and those it reaches without a component
// (past "**"); a position from which only "**" remains matches now whatever
// follows, so it goes into out instead.
func (m *matcher) push(ss *stateSet, out *idSet, pat, pos uint16) {
	c := &m.pats[pat]
	for {
		if c.tailAny[pos] {
			out.add(c.id)
			return
		}
		if ss.n == maxStates {
			ss.over = true
			return
		}
		ss.s[ss.n] = state{pat, pos}
		ss.n++
		if int(pos) == len(c.segs) || c.segs[pos].kind != segAny {
			return
		}
		pos++
	}
}

// walkStatus is how a walk of a path ended.
type walkStatus uint8

const (
	walkOK      walkStatus = iota
	walkInvalid            // the path is not clean (an empty, "." or ".." element; see validPath)
	walkOver               // more positions at once than a stateSet keeps
)

// match adds to out the ids of the patterns path may match (candidates, see
// compiledSet.decideEnd). path is clean (validPath) and not ".". ok is
// false if the walk needed more states than it keeps (out is then incomplete).
func (m *matcher) match(path string, out *idSet) (ok bool) {
	return m.walk(path, out) == walkOK
}

// walk is match on a path not yet checked: it checks, in the same pass, that
// path is clean as validPath requires, and reports walkInvalid if not. The
// path's bytes need not be UTF-8: a name is the bytes the backend holds.
func (m *matcher) walk(path string, out *idSet) walkStatus {
	if m.hasAlways {
		for i := range m.always {
			out[i] |= m.always[i]
		}
	}
	var a, b stateSet
	st, cur := m.walkOn(path, 0, 0, &a, &b, out)
	return m.walkEnd(st, cur, out)
}

// walkEnd finishes a walk that walkOn left at cur: it adds the patterns
// matched to the end.
func (m *matcher) walkEnd(st walkStatus, cur *stateSet, out *idSet) walkStatus {
	if st != walkOK {
		return st
	}
	for k := 0; k < cur.n; k++ {
		st := cur.s[k]
		if int(st.pos) == len(m.pats[st.pat].segs) {
			out.add(m.pats[st.pat].id)
		}
	}
	return walkOK
}

// walkOn walks path's components from offset start, depth components having
// been walked before it, from the positions in cur (next is scratch). It
// returns the positions after the last component, but matches nothing to the
// end (walkEnd).
func (m *matcher) walkOn(path string, start, depth int, cur, next *stateSet, out *idSet) (walkStatus, *stateSet) {
	for ; ; depth++ {
		end := start
		for ; end+8 <= len(path); end += 8 {
			if m := slashes(load64(path, end)); m != 0 {
				end += bits.TrailingZeros64(m) >> 3
				goto found
			}
		}
		for end < len(path) && path[end] != '/' {
			end++
		}
	found:
		if n := end - start; n == 0 || path[start] == '.' && (n == 1 || n == 2 && path[start+1] == '.') {
			return walkInvalid, nil // an empty, "." or ".." element
		}
		m.stepAll(path[start:end], depth, cur, next, out)
		if next.over {
			return walkOver, nil
		}
		cur, next = next, cur
		if end == len(path) {
			return walkOK, cur
		}
		start = end + 1
	}
}

// stepAll moves every position in cur past comp, the component at depth,
// into next, and starts the positions comp begins (floating patterns, and at
// depth 0 anchored ones).
func (m *matcher) stepAll(comp string, depth int, cur, next *stateSet, out *idSet) {
	next.n = 0
	for k := 0; k < cur.n; k++ {
		st := cur.s[k]
		c := &m.pats[st.pat]
		if int(st.pos) == len(c.segs) {
			continue // matched up to here; more components follow
		}
		g := &c.segs[st.pos]
		switch {
		case g.kind == segAny:
			m.push(next, out, st.pat, st.pos) // "**" takes the component
		case g.match(comp):
			m.push(next, out, st.pat, st.pos+1)
		}
	}
	if m.floating.may(comp) {
		m.floating.step(m, comp, next, out)
	}
	if depth == 0 && m.anchored.may(comp) {
		m.anchored.step(m, comp, next, out)
	}
}

// dirWalk is a matcher's walk of a directory's path, kept so that the walks
// of the paths beneath it resume there (matcher.walkShared).
type dirWalk struct {
	dir     string
	cur     stateSet // the positions after dir's last component
	out     idSet    // what the walk of dir matched whatever follows
	matched bool     // out holds an id
}

// walkDir walks dir, a directory's path, and returns where the walk stands
// after it, or nil where the walk cannot be resumed (an unclean path, too many
// positions).
func (m *matcher) walkDir(dir string) *dirWalk {
	w := &dirWalk{dir: dir}
	if m.hasAlways {
		w.out = m.always
	}
	var next stateSet
	st, cur := m.walkOn(dir, 0, 0, &w.cur, &next, &w.out)
	if st != walkOK {
		return nil
	}
	if cur != &w.cur {
		w.cur = *cur
	}
	w.matched = w.out != (idSet{})
	return w
}

// walkShared is walk that shares the work of a path's directory between the
// paths beneath it: the walk of the last directory seen twice in a row is
// kept (m.last), and a path beneath it walks its last component alone, from
// there. The answer is walk's (TestWalkShared).
func (m *matcher) walkShared(path string, out *idSet) walkStatus {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return m.walk(path, out)
	}
	dir := path[:i]
	w := m.last.Load()
	if w == nil || w.dir != dir {
		if h := maphash.String(walkSeed, dir); m.missed.Swap(h) != h {
			return m.walk(path, out) // a directory not seen just before
		}
		if w = m.walkDir(dir); w == nil {
			return m.walk(path, out)
		}
		w.dir = strings.Clone(dir) // path may be a slice of a larger string
		m.last.Store(w)
	}
	var next stateSet
	st := m.walkLast(path[i+1:], w, out, &next)
	return m.walkEnd(st, &next, out)
}

// walkLast walks comp, the last component of a path, from w, the kept walk of
// the path's directory, into next (which walkEnd then finishes). It only
// reads w. It returns how the walk went.
func (m *matcher) walkLast(comp string, w *dirWalk, out *idSet, next *stateSet) walkStatus {
	if n := len(comp); n == 0 || comp[0] == '.' && (n == 1 || n == 2 && comp[1] == '.') {
		return walkInvalid // an empty, "." or ".." element
	}
	if w.matched {
		for k := range out {
			out[k] |= w.out[k]
		}
	}
	m.stepAll(comp, 1, &w.cur, next, out)
	if next.over {
		return walkOver
	}
	return walkOK
}

// walkUnder is walkShared on the path base + "/" + rel (two clean paths,
// neither "."), answered from the kept walk of its directory without joining
// them. ok is false where that walk is not the one kept: the caller then
// joins them and walks.
func (m *matcher) walkUnder(base, rel string, out *idSet) (st walkStatus, ok bool) {
	w := m.last.Load()
	if w == nil {
		return 0, false
	}
	last := rel
	if i := strings.LastIndexByte(rel, '/'); i < 0 {
		if w.dir != base {
			return 0, false
		}
	} else {
		d, n := w.dir, len(base)
		if len(d) != n+1+i || d[n] != '/' || d[:n] != base || d[n+1:] != rel[:i] {
			return 0, false
		}
		last = rel[i+1:]
	}
	var next stateSet
	st = m.walkLast(last, w, out, &next)
	return m.walkEnd(st, &next, out), true
}

var walkSeed = maphash.MakeSeed()

const (
	hiBits = 0x8080808080808080
	lo7    = 0x7f7f7f7f7f7f7f7f
	slash8 = 0x2f2f2f2f2f2f2f2f
)

// load64 returns s[i:i+8] as a little-endian word.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// slashes returns w with the high bit of each byte that is '/' set, and no
// other bit: exactly, with no carry from one byte into the next.
func slashes(w uint64) uint64 {
	x := w ^ slash8
	return ^(((x & lo7) + lo7) | x) & hiBits
}

// validPath reports whether s is a clean relative path: "." (the root), or
// elements separated by "/", none empty, "." or "..". It is fs.ValidPath
// without the UTF-8 rule: a name is the bytes the backend holds, and one that
// is not UTF-8 is decided like any other (see the package doc).
func validPath(s string) bool {
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if !validElem(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return s == "." || validElem(s[start:])
}

func validElem(el string) bool { return el != "" && el != "." && el != ".." }

// firstIn returns the smallest id in [lo, hi) that s holds, or -1.
func (s *idSet) firstIn(lo, hi int) int {
	for lo < hi {
		w := s[lo>>6] >> (lo & 63)
		if w != 0 {
			if i := lo + bits.TrailingZeros64(w); i < hi {
				return i
			}
			return -1
		}
		lo = (lo | 63) + 1
	}
	return -1
}

// compiledSet is an Engine's patterns compiled: ids 0.. are the secret
// patterns in order, then the persistence patterns, then each rule's patterns.
type compiledSet struct {
	read, write *matcher // read ops see no persistence pattern
	nSecret     int
	nPersist    int
	ruleIDs     [][]uint16 // per rule, the ids of its patterns (none: every path)
	pats        []*pattern // by id
}

// compileSet compiles e's patterns, or returns nil if they are too many.
func compileSet(e *Engine) *compiledSet {
	n := len(e.secrets) + len(e.persist)
	for i := range e.rules {
		n += len(e.rules[i].pats)
	}
	if n > maxIDs {
		return nil
	}
	cs := &compiledSet{read: &matcher{}, write: &matcher{}, nSecret: len(e.secrets), nPersist: len(e.persist)}
	id := uint16(0)
	for i := range e.secrets {
		cs.pats = append(cs.pats, &e.secrets[i].pattern)
		cs.read.add(id, &e.secrets[i].pattern)
		cs.write.add(id, &e.secrets[i].pattern)
		id++
	}
	for i := range e.persist {
		cs.pats = append(cs.pats, &e.persist[i].pattern)
		cs.write.add(id, &e.persist[i].pattern)
		id++
	}
	cs.ruleIDs = make([][]uint16, len(e.rules))
	for i := range e.rules {
		for j := range e.rules[i].pats {
			cs.pats = append(cs.pats, &e.rules[i].pats[j])
			cs.read.add(id, &e.rules[i].pats[j])
			cs.write.add(id, &e.rules[i].pats[j])
			cs.ruleIDs[i] = append(cs.ruleIDs[i], id)
			id++
		}
	}
	for _, m := range []*matcher{cs.read, cs.write} {
		m.floating.seal()
		m.anchored.seal()
	}
	return cs
}

// decideEnd is Engine.refDecideEnd on the compiled patterns; ok is false when
// the matcher could not answer (too many positions at once). The walk finds
// the candidates; each candidate that could decide is confirmed by its own
// pattern (pattern.match), so the answer is doublestar's to the letter, its
// corner cases included ("a*/**" does not match "a"), while a path no pattern
// matches, the common case, costs one walk.
func (cs *compiledSet) decideEnd(e *Engine, op Op, bit opMask, p string) (Decision, bool) {
	m := cs.read
	if op.Writes() {
		m = cs.write
	}
	var got idSet
	root := p == "."
	if root {
		got = m.root // exact: no confirmation needed
	} else if !m.match(p, &got) {
		return Decision{}, false
	}
	return cs.choose(e, op, bit, p, root, m, &got), true
}

// decideRaw is decideEnd on a path not yet checked (an Engine that does not
// fold case): the walk checks it as it goes.
func (cs *compiledSet) decideRaw(e *Engine, op Op, bit opMask, p string) (Decision, walkStatus) {
	m := cs.read
	if bit&maskWrite != 0 {
		m = cs.write
	}
	var got idSet
	root := p == "."
	if root {
		got = m.root
	} else if st := m.walkShared(p, &got); st != walkOK {
		return Decision{}, st
	}
	if len(e.rules) == 0 && len(m.residual) == 0 && got == (idSet{}) {
		return e.defDecision, walkOK // the common case: no candidate at all
	}
	return cs.choose(e, op, bit, p, root, m, &got), walkOK
}

// confirmer confirms candidates by their own patterns, on a subject made once.
type confirmer struct {
	cs    *compiledSet
	p     string
	root  bool
	ready bool
	s     subject
}

func (c *confirmer) confirm(id int) bool {
	if c.root {
		return true // the root set is exact
	}
	if !c.ready {
		c.s, c.ready = newSubject(c.p), true
	}
	return c.cs.pats[id].match(&c.s)
}

// choose picks the decision from the candidates got holds, confirming each
// candidate that could decide with its own pattern.
func (cs *compiledSet) choose(e *Engine, op Op, bit opMask, p string, root bool, m *matcher, got *idSet) Decision {
	if !root {
		for _, r := range m.residual {
			got.add(r.id) // a candidate like any other, confirmed by its pattern
		}
	}
	var none uint64
	for _, w := range got {
		none |= w
	}
	if none == 0 && len(e.rules) == 0 {
		return e.defDecision // the common case: no candidate at all
	}
	c := confirmer{cs: cs, p: p, root: root}
	if d, ok := cs.denied(e, op, bit, got, &c); ok {
		return d
	}
	if len(e.rules) == 0 {
		return e.defDecision
	}
	return e.ruleDecision(bit, func(r *rule) bool {
		ids := cs.ruleIDs[r.index]
		if len(ids) == 0 {
			return true
		}
		for _, id := range ids {
			if got.has(id) && c.confirm(int(id)) {
				return true
			}
		}
		return false
	})
}

// denied returns the refusal of the first secret pattern, or for a write the
// first persistence pattern, among the candidates got holds that c confirms.
func (cs *compiledSet) denied(e *Engine, op Op, bit opMask, got *idSet, c *confirmer) (Decision, bool) {
	for i := got.firstIn(0, cs.nSecret); i >= 0; i = got.firstIn(i+1, cs.nSecret) {
		n := &e.secrets[i]
		if op == OpList && !e.hide && !n.tree {
			continue // the name may be listed; its contents stay out of reach
		}
		if c.confirm(i) {
			return Decision{Effect: Deny, Rule: n.name, Reason: n.reason}, true
		}
	}
	if bit&maskWrite != 0 {
		end := cs.nSecret + cs.nPersist
		for i := got.firstIn(cs.nSecret, end); i >= 0; i = got.firstIn(i+1, end) {
			if c.confirm(i) {
				n := &e.persist[i-cs.nSecret]
				return Decision{Effect: Deny, Rule: n.name, Reason: n.reason}, true
			}
		}
	}
	return Decision{}, false
}
