//go:build linux

package physical_test

import (
	"fmt"
	"testing"
)

// TestRaceTotal reports the race runs before it (the race_*_test.go files sort
// before this one, so it runs last): the total of raced operations and escapes,
// on stdout as one line, "physical race: N raced operations, 0 escapes". Under
// CAPFS_STRESS=1, when every race run ran, the total must reach CAPFS_STRESS_OPS
// (1,000,000 by default).
func TestRaceTotal(t *testing.T) {
	ops, esc, runs := raceTotals.ops.Load(), raceTotals.escapes.Load(), raceTotals.runs.Load()
	if runs == 0 {
		t.Skip("no race run before this test (filtered out or shuffled)")
	}
	line := fmt.Sprintf("physical race: %d raced operations, %d escapes (%d runs)", ops, esc, runs)
	t.Log(line)
	fmt.Println(line)
	if esc != 0 {
		t.Errorf("%d escapes", esc)
	}
	if stressMode() && runs == raceRuns {
		if want := int64(stressTotal(t)); ops < want {
			t.Errorf("stress run made %d raced operations; want at least %d", ops, want)
		}
	}
}
