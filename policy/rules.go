package policy

import (
	"fmt"
	"slices"
	"strings"
)

// indexPersistence indexes the persistence patterns: by base name where a
// pattern is one (persistBase), else in persistOther; the git dir pattern
// gets its own reason.
func (e *Engine) indexPersistence() {
	e.persistBase = make(map[string]int)
	for i := range e.persist {
		n := &e.persist[i]
		if strings.TrimPrefix(n.src, "/") == GitDirPattern {
			n.reason = "git is read-only here: commit through the git overlay (" + n.src + ")"
		}
		if n.shape != shapeBase {
			e.persistOther = append(e.persistOther, i)
		} else if _, dup := e.persistBase[n.k]; !dup {
			e.persistBase[n.k] = i
		}
	}
}

// compileRule checks and compiles rule r, the i-th, cloning its slices and
// naming it where it has no name.
func compileRule(r *Rule, i int, fold bool) (rule, error) {
	r.Ops = slices.Clone(r.Ops)
	r.Paths = slices.Clone(r.Paths)
	where := fmt.Sprintf("rule %d", i)
	if r.Name != "" {
		where += fmt.Sprintf(" (%s)", r.Name)
	}
	if !validEffect(r.Effect) {
		return rule{}, fmt.Errorf("%w: %s: effect %v", ErrInvalidConfig, where, r.Effect)
	}
	c := rule{effect: r.Effect, reason: r.Reason, index: i}
	ops, err := opsMask(r.Ops, where)
	if err != nil {
		return rule{}, err
	}
	c.ops = ops
	for _, src := range r.Paths {
		p, err := compilePattern(src, fold)
		if err != nil {
			return rule{}, fmt.Errorf("%w: %s: pattern %q: %v", ErrInvalidConfig, where, src, err)
		}
		c.pats = append(c.pats, p)
	}
	if r.Name == "" {
		r.Name = ruleName(*r)
	}
	c.name = r.Name
	return c, nil
}

// opsMask is the mask of ops (all of them when ops is empty).
func opsMask(ops []Op, where string) (opMask, error) {
	if len(ops) == 0 {
		return maskAll, nil
	}
	var m opMask
	for _, op := range ops {
		switch op {
		case GroupRead:
			m |= maskRead
		case GroupWrite:
			m |= maskWrite
		default:
			bit := opBit(op)
			if bit == 0 {
				return 0, fmt.Errorf("%w: %s: unknown op %q", ErrInvalidConfig, where, op)
			}
			m |= bit
		}
	}
	return m, nil
}

func compileNamed(kind string, srcs []string, fold bool, why string) ([]named, error) {
	out := make([]named, 0, len(srcs))
	for _, src := range srcs {
		p, err := compilePattern(src, fold)
		if err != nil {
			return nil, fmt.Errorf("%w: %s pattern %q: %v", ErrInvalidConfig, kind, src, err)
		}
		out = append(out, named{pattern: p, name: kind + ":" + src, reason: why + " (" + src + ")"})
	}
	return out, nil
}
