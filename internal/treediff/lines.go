package treediff

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Bounds of the line diff: past maxDiffLines lines on both sides together
// (after trimming the common prefix and suffix), or past maxEditCost
// differing lines, the middle is shown as one block replacing the old lines
// by the new.
const (
	maxDiffLines = 200_000
	maxEditCost  = 1_000
	diffContext  = 3
)

// SplitLines splits s after each "\n". A last line without one is kept as it
// is. The empty text has no lines.
func SplitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// op is one line of an edit script: ' ' kept, '-' deleted, '+' inserted, with the
// line's index in its own side.
type op struct {
	kind byte
	i    int // index in old (for ' ' and '-')
	j    int // index in new (for ' ' and '+')
}

// editScript returns the edits turning x into y.
func editScript(x, y []string) []op {
	// Common prefix and suffix cost nothing.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var ops []op
	for k := 0; k < pre; k++ {
		ops = append(ops, op{' ', k, k})
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	mid, ok := myers(mx, my)
	if !ok {
		mid = replaceOps(len(mx), len(my))
	}
	for _, o := range mid {
		o.i += pre
		o.j += pre
		ops = append(ops, o)
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, op{' ', len(x) - suf + k, len(y) - suf + k})
	}
	return ops
}

// myers is Myers' O(ND) greedy diff. It gives up (ok false) when the inputs are
// longer than maxDiffLines together or need more than maxEditCost edits, which
// bounds the saved frontiers to O(maxEditCost²) ints.
func myers(x, y []string) ([]op, bool) {
	n, m := len(x), len(y)
	if n+m > maxDiffLines {
		return nil, false
	}
	if n == 0 || m == 0 {
		return replaceOps(n, m), true
	}
	maxD := min(n+m, maxEditCost)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		// Save the frontier of step d-1 over the diagonals it can reach.
		snap := make([]int, 2*d+3)
		copy(snap, v[off-d-1:off+d+2])
		trace = append(trace, snap)
		if step(x, y, v, off, d) {
			return backtrack(trace, n, m, d), true
		}
	}
	return nil, false
}

// step advances frontier v (diagonal k at v[off+k]) by edit d: each diagonal
// in [-d, d] takes one edit and then the snake of equal lines after it. It
// reports whether one reached the end of both x and y.
func step(x, y []string, v []int, off, d int) bool {
	n, m := len(x), len(y)
	for k := -d; k <= d; k += 2 {
		var xi int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			xi = v[off+k+1]
		} else {
			xi = v[off+k-1] + 1
		}
		yi := xi - k
		for xi < n && yi < m && x[xi] == y[yi] {
			xi++
			yi++
		}
		v[off+k] = xi
		if xi >= n && yi >= m {
			return true
		}
	}
	return false
}

// replaceOps is the script deleting n lines, then inserting m.
func replaceOps(n, m int) []op {
	ops := make([]op, 0, n+m)
	for i := range n {
		ops = append(ops, op{'-', i, 0})
	}
	for j := range m {
		ops = append(ops, op{'+', n, j})
	}
	return ops
}

// backtrack walks the saved frontiers from (n, m) back to (0, 0).
func backtrack(trace [][]int, n, m, dEnd int) []op {
	var rev []op
	xi, yi := n, m
	for d := dEnd; d > 0; d-- {
		vp := trace[d] // frontier after step d-1, indexed k+d+1 for k in [-d-1, d+1]
		at := func(k int) int { return vp[k+d+1] }
		k := xi - yi
		insert := k == -d || (k != d && at(k-1) < at(k+1))
		pk := k - 1
		if insert {
			pk = k + 1
		}
		px := at(pk)
		py := px - pk
		midx, midy := px+1, py
		if insert {
			midx, midy = px, py+1
		}
		for xi > midx && yi > midy {
			xi--
			yi--
			rev = append(rev, op{' ', xi, yi})
		}
		if insert {
			rev = append(rev, op{'+', px, py})
		} else {
			rev = append(rev, op{'-', px, py})
		}
		xi, yi = px, py
	}
	for xi > 0 && yi > 0 {
		xi--
		yi--
		rev = append(rev, op{' ', xi, yi})
	}
	out := make([]op, len(rev))
	for i, o := range rev {
		out[len(rev)-1-i] = o
	}
	return out
}

// WriteHunks writes the @@ hunks turning lines x into lines y, with 3 lines of
// context, as "diff -u" and "git diff" do. x and y are as [SplitLines] gives
// them. With funcNames, a hunk header carries git's default function-name
// context; no diff drivers or attributes are consulted. The line diff is Myers'
// algorithm, bounded in memory. Past 200,000 lines on both sides together, or
// past 1,000 differing lines (after trimming the common prefix and suffix), the
// differing middle is one block of removals and additions.
func WriteHunks(w *bytes.Buffer, x, y []string, funcNames bool) {
	ops := editScript(x, y)
	fn := funcName{prev: -1, off: !funcNames}
	for start := 0; start < len(ops); {
		// Find the next change.
		for start < len(ops) && ops[start].kind == ' ' {
			start++
		}
		if start == len(ops) {
			return
		}
		lo := max(start-diffContext, 0)
		// Extend while the next change is within 2*context kept lines.
		end := start
		for {
			for end < len(ops) && ops[end].kind != ' ' {
				end++
			}
			k := end
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k == len(ops) || k-end > 2*diffContext {
				break
			}
			end = k
		}
		hi := min(end+diffContext, len(ops))
		writeHunk(w, ops[lo:hi], x, y, &fn)
		start = hi
	}
}

func hunkRange(start, count int) string {
	if count == 1 {
		return strconv.Itoa(start)
	}
	if count == 0 {
		return strconv.Itoa(start-1) + ",0"
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

// funcName is git's default hunk-header context: the nearest old line above the
// hunk that starts with a letter, '_' or '$' (cut to 80 bytes, trailing space
// trimmed), searched back to where the previous hunk's search began; a hunk that
// finds none keeps the previous hunk's name.
type funcName struct {
	text string
	prev int
	off  bool // no function-name context
}

func (f *funcName) find(x []string, start int) string {
	if f.off {
		return ""
	}
	for l := start - 1; l > f.prev && l >= 0; l-- {
		line := x[l]
		if line == "" {
			continue
		}
		c := line[0]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$') {
			continue
		}
		if len(line) > 80 {
			line = line[:80]
		}
		f.text = strings.TrimRight(line, " \t\n\v\f\r")
		break
	}
	f.prev = start - 1
	return f.text
}

func writeHunk(w *bytes.Buffer, ops []op, x, y []string, fn *funcName) {
	var nx, ny int
	sx, sy := -1, -1
	for _, o := range ops {
		if o.kind != '+' {
			nx++
			if sx < 0 {
				sx = o.i
			}
		}
		if o.kind != '-' {
			ny++
			if sy < 0 {
				sy = o.j
			}
		}
	}
	// An empty side starts where the other side's position says it is.
	if sx < 0 {
		sx = ops[0].i
	}
	if sy < 0 {
		sy = ops[0].j
	}
	fmt.Fprintf(w, "@@ -%s +%s @@", hunkRange(sx+1, nx), hunkRange(sy+1, ny))
	if name := fn.find(x, sx); name != "" {
		w.WriteByte(' ')
		w.WriteString(name)
	}
	w.WriteByte('\n')
	for _, o := range ops {
		var line string
		switch o.kind {
		case '-':
			line = x[o.i]
		default:
			line = y[o.j]
		}
		w.WriteByte(o.kind)
		w.WriteString(line)
		if len(line) == 0 || line[len(line)-1] != '\n' {
			w.WriteString("\n\\ No newline at end of file\n")
		}
	}
}
