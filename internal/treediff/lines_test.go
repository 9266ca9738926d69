package treediff

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// apply replays an edit script and checks it is consistent with x and y.
func apply(t *testing.T, ops []op, x, y []string) []string {
	t.Helper()
	var out []string
	xi := 0
	for _, o := range ops {
		switch o.kind {
		case ' ':
			if o.i != xi || x[o.i] != y[o.j] {
				t.Fatalf("bad keep %+v", o)
			}
			out = append(out, x[o.i])
			xi++
		case '-':
			if o.i != xi {
				t.Fatalf("bad delete %+v at %d", o, xi)
			}
			xi++
		case '+':
			out = append(out, y[o.j])
		}
	}
	if xi != len(x) {
		t.Fatalf("script consumed %d of %d lines", xi, len(x))
	}
	return out
}

func TestEditScript(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	gen := func() []string {
		n := rng.Intn(30)
		s := make([]string, n)
		for i := range s {
			s[i] = string(rune('a'+rng.Intn(4))) + "\n"
		}
		return s
	}
	for range 300 {
		x, y := gen(), gen()
		ops := editScript(x, y)
		if got := apply(t, ops, x, y); !reflect.DeepEqual(got, y) && !(len(got) == 0 && len(y) == 0) {
			t.Fatalf("x=%q y=%q: script gives %q", x, y, got)
		}
		// Myers is minimal: edits never exceed the LCS bound.
		edits := 0
		for _, o := range ops {
			if o.kind != ' ' {
				edits++
			}
		}
		if lcs := lcsLen(x, y); edits != len(x)+len(y)-2*lcs {
			t.Fatalf("x=%q y=%q: %d edits, minimal is %d", x, y, edits, len(x)+len(y)-2*lcs)
		}
	}
}

func lcsLen(x, y []string) int {
	dp := make([][]int, len(x)+1)
	for i := range dp {
		dp[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestLargeDiffFallsBackToReplace(t *testing.T) {
	n := maxEditCost/2 + 10
	x := strings.Split(strings.TrimSuffix(lines("old", 1, n), "\n"), "\n")
	y := strings.Split(strings.TrimSuffix(lines("new", 1, n), "\n"), "\n")
	for i := range x {
		x[i] += "\n"
		y[i] += "\n"
	}
	x[n/2], y[n/2] = "same\n", "same\n" // a match Myers could use, but the cost is over the bound
	var buf bytes.Buffer
	WriteHunks(&buf, x, y, true)
	out := buf.String()
	if !strings.HasPrefix(out, fmt.Sprintf("@@ -1,%d +1,%d @@\n-old1\n", n, n)) || strings.Count(out, "\n-") != n || strings.Count(out, "\n+") != n {
		t.Fatalf("want one whole-file replacement hunk, got %d bytes starting %q", len(out), out[:min(len(out), 80)])
	}
}

func lines(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

func TestSplitLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a\n"}},
		{"a\n\nb", []string{"a\n", "\n", "b"}},
	} {
		if got := SplitLines(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestWriteHunksFuncNames checks the function-name context of hunk headers:
// on with funcNames, never without.
func TestWriteHunksFuncNames(t *testing.T) {
	x := SplitLines("func main() {\n\ta\n\tb\n\tc\n\td\n\te\n}\n")
	y := SplitLines("func main() {\n\ta\n\tb\n\tc\n\td\n\tE\n}\n")
	var on, off bytes.Buffer
	WriteHunks(&on, x, y, true)
	WriteHunks(&off, x, y, false)
	if want := "@@ -3,5 +3,5 @@ func main() {\n"; !strings.HasPrefix(on.String(), want) {
		t.Errorf("with function names: %q, want prefix %q", on.String(), want)
	}
	if want := "@@ -3,5 +3,5 @@\n"; !strings.HasPrefix(off.String(), want) {
		t.Errorf("without function names: %q, want prefix %q", off.String(), want)
	}
	var none bytes.Buffer
	WriteHunks(&none, x, x, true)
	if none.Len() != 0 {
		t.Errorf("equal texts give %q", none.String())
	}
}
