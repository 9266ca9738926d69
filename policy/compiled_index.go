package policy

// index finds, for one component, the patterns whose next element matches it:
// literal elements by a map behind a first-byte test, globs by their literal
// first or last byte, and the rest tried on every component.
type index struct {
	first   [4]uint64 // first bytes of the literals
	lits    map[string][]entry
	byFirst map[byte][]globEntry // globs with a literal prefix
	byLast  map[byte][]globEntry // globs without one, with a literal suffix
	any     []globEntry          // globs with neither
	globFst [4]uint64            // keys of byFirst
	globLst [4]uint64            // keys of byLast
	// pair tells by a component's first byte and its last byte (modulo 64)
	// whether step could find anything (see may, seal).
	pair [256]uint64
}

type globEntry struct {
	a *alt
	entry
}

func setBit(b *[4]uint64, c byte) { b[c>>6] |= 1 << (c & 63) }

func hasBit(b *[4]uint64, c byte) bool { return b[c>>6]&(1<<(c&63)) != 0 }

func (x *index) addAlt(a *alt, e entry) {
	switch {
	case a.glob == "":
		if x.lits == nil {
			x.lits = make(map[string][]entry)
		}
		setBit(&x.first, a.lit[0])
		x.lits[a.lit] = append(x.lits[a.lit], e)
	case a.lit != "":
		if x.byFirst == nil {
			x.byFirst = make(map[byte][]globEntry)
		}
		setBit(&x.globFst, a.lit[0])
		x.byFirst[a.lit[0]] = append(x.byFirst[a.lit[0]], globEntry{a, e})
	case a.sfx != "":
		if x.byLast == nil {
			x.byLast = make(map[byte][]globEntry)
		}
		c := a.sfx[len(a.sfx)-1]
		setBit(&x.globLst, c)
		x.byLast[c] = append(x.byLast[c], globEntry{a, e})
	default:
		x.any = append(x.any, globEntry{a, e})
	}
}

// may reports whether comp could match an element the index holds: its first
// byte begins a literal or a glob prefix, its last byte ends a glob suffix, or
// the index has globs with neither.
func (x *index) may(comp string) bool {
	return x.pair[comp[0]]&(1<<(comp[len(comp)-1]&63)) != 0
}

// seal fills the index's table for may: the pairs of first and last bytes
// of the literals, and of globs' literal prefixes and suffixes (any byte
// where a glob has none).
func (x *index) seal() {
	mark := func(first, last string) {
		for f := 0; f < 256; f++ {
			if first != "" && f != int(first[0]) {
				continue
			}
			for l := 0; l < 256; l++ {
				if last == "" || l == int(last[len(last)-1]) {
					x.pair[f] |= 1 << (l & 63)
				}
			}
		}
	}
	for lit := range x.lits {
		mark(lit, lit)
	}
	for _, gs := range [][]globEntry{x.any, flatten(x.byFirst), flatten(x.byLast)} {
		for _, g := range gs {
			mark(g.a.lit, g.a.sfx)
		}
	}
}

func flatten(m map[byte][]globEntry) []globEntry {
	var out []globEntry
	for _, gs := range m {
		out = append(out, gs...)
	}
	return out
}

// step pushes onto next the positions whose element comp matches (see
// matcher.push).
func (x *index) step(m *matcher, comp string, next *stateSet, out *idSet) {
	c0, cl := comp[0], comp[len(comp)-1]
	if hasBit(&x.first, c0) {
		for _, e := range x.lits[comp] {
			m.push(next, out, e.pat, e.pos)
		}
	}
	if hasBit(&x.globFst, c0) {
		for _, g := range x.byFirst[c0] {
			if g.a.match(comp) {
				m.push(next, out, g.pat, g.pos)
			}
		}
	}
	if hasBit(&x.globLst, cl) {
		for _, g := range x.byLast[cl] {
			if g.a.match(comp) {
				m.push(next, out, g.pat, g.pos)
			}
		}
	}
	for _, g := range x.any {
		if g.a.match(comp) {
			m.push(next, out, g.pat, g.pos)
		}
	}
}
