package mcpserver

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines around each change in a diff.
const diffContext = 3

// maxDiffCells bounds the work of the line-matching table; beyond it the changed
// region is shown as one block of removals and additions.
const maxDiffCells = 4 << 20

// splitLines splits s into lines, each keeping its "\n"; a last line without one
// stays as it is.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// op is one line of an edit script: ' ' kept, '-' removed, '+' added.
type op struct {
	kind byte
	line string
}

// editScript returns a line-level edit script from a to b: the common prefix and
// suffix are kept, and the middle is matched by a longest common subsequence when
// it is small enough (one block of removals then additions otherwise).
func editScript(a, b []string) []op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []op
	for _, l := range a[:pre] {
		ops = append(ops, op{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if (len(ma)+1)*(len(mb)+1) <= maxDiffCells {
		ops = append(ops, lcsScript(ma, mb)...)
	} else {
		for _, l := range ma {
			ops = append(ops, op{'-', l})
		}
		for _, l := range mb {
			ops = append(ops, op{'+', l})
		}
	}
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, op{' ', l})
	}
	return ops
}

func lcsScript(a, b []string) []op {
	n, m := len(a), len(b)
	// t[i][j] is the LCS length of a[i:] and b[j:].
	t := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return t[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i*(m+1)+j] = at(i+1, j+1) + 1
			} else {
				t[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, op{' ', a[i]})
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			ops = append(ops, op{'-', a[i]})
			i++
		default:
			ops = append(ops, op{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, op{'-', a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, op{'+', b[j]})
	}
	return ops
}

// unifiedDiff returns the unified diff (diff -u, 3 lines of context) from old to
// new under the names a/name and b/name; "" when they are equal. name is written
// as given: a caller showing a guest's name passes it escaped (esc).
func unifiedDiff(name, old, new string) string {
	if old == new {
		return ""
	}
	ops := editScript(splitLines(old), splitLines(new))
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", name, name)
	// Positions: for each op, the line numbers in a and b before it.
	type pos struct{ a, b int }
	ps := make([]pos, len(ops)+1)
	for k, o := range ops {
		ps[k+1] = ps[k]
		if o.kind != '+' {
			ps[k+1].a++
		}
		if o.kind != '-' {
			ps[k+1].b++
		}
	}
	k := 0
	for k < len(ops) {
		for k < len(ops) && ops[k].kind == ' ' {
			k++
		}
		if k == len(ops) {
			break
		}
		start := max(0, k-diffContext)
		end := k
		// Extend the hunk while the next change is within 2*context kept lines.
		for {
			for end < len(ops) && ops[end].kind != ' ' {
				end++
			}
			next := end
			for next < len(ops) && ops[next].kind == ' ' {
				next++
			}
			if next < len(ops) && next-end <= 2*diffContext {
				end = next
				continue
			}
			end = min(len(ops), end+diffContext)
			break
		}
		na, nb := ps[end].a-ps[start].a, ps[end].b-ps[start].b
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(ps[start].a, na), hunkRange(ps[start].b, nb))
		for _, o := range ops[start:end] {
			b.WriteByte(o.kind)
			b.WriteString(o.line)
			if !strings.HasSuffix(o.line, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
		k = end
	}
	return b.String()
}

// hunkRange formats one side of a hunk header as diff -u does: "start,count",
// the start 1-based, or the line before an empty range.
func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if count == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
