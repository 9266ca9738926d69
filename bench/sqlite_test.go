package bench

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestSQLiteTrace replays a small trace on every in-process contender (each
// operation checked: a failed one fails the run), and checks the trace's JSON
// round trip, which the Node and Go process contenders read.
func TestSQLiteTrace(t *testing.T) {
	phases := sqliteTrace(100, 3, 500)
	name := filepath.Join(t.TempDir(), "trace.json")
	if err := WriteTrace(name, phases); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTrace(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(phases) || !slices.Equal(back[len(back)-1].Ops, phases[len(phases)-1].Ops) {
		t.Fatal("the trace does not survive its JSON round trip")
	}
	mix := map[string]int{}
	for _, op := range phases[len(phases)-1].Ops {
		mix[op.Kind]++
	}
	if mix["lookup"] < 200 || mix["create"] < 30 || mix["write"] < 10 {
		t.Fatalf("op mix %v far from AgentFS's proportions", mix)
	}
	for _, c := range SQLiteInProcess() {
		per, _, err := c.Run(t.TempDir(), name, phases)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(per) != len(phases) {
			t.Fatalf("%s: %d phase times", c.Name, len(per))
		}
	}
}
