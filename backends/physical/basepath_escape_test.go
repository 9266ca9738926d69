//go:build linux

package physical_test

// The comparison the adversarial suite exists for: afero's BasePathFs over OsFs,
// which confines by cleaning the joined path and checking its string prefix, under
// the same RENAME_EXCHANGE attacker as TestRaceExchangeDirWithLink, next to the
// physical backend under that attacker.

import (
	"fmt"
	"testing"

	"github.com/spf13/afero"

	"github.com/capfs/capfs/backends/physical"
)

// TestRaceBasePathFsEscapes reads a/f through afero.NewBasePathFs(afero.NewOsFs(),
// root) and through the physical backend while the attacker swaps a and
// evil -> ../outside. BasePathFs leaks the outside file (the kernel follows evil
// after the prefix check passed); that is what this test shows, so its count is
// only reported (a bounded run may see none: races are probabilistic). The
// physical backend must see none.
func TestRaceBasePathFsEscapes(t *testing.T) {
	w := newWorld(t, physical.ResolverAuto)
	rootfd, _ := exchangeSetup(t, w, false)

	// Statically, with no race at all, BasePathFs already follows evil out.
	bfs := afero.NewBasePathFs(afero.NewOsFs(), w.root)
	static, err := afero.ReadFile(bfs, "evil/f")
	staticLeak := err == nil && string(static) == outsideData
	_, err = w.dir.ReadFile(w.ctx, "evil/f")
	w.wantCode("capfs ReadFile(evil/f)", err, "path_outside_sandbox")

	n := raceOps(t)
	count := func(read func() (string, bool)) (leaks, ok int, attacks int64) {
		r := newRaceRun(t, w, "basepath-comparison")
		a := r.startAttacker(func(int) { exchange(rootfd, "a", "evil") })
		for range n {
			got, success := read()
			switch {
			case success && got == outsideData:
				leaks++
			case success && got == "OK":
				ok++
			}
		}
		a.stop()
		return leaks, ok, r.attacks.Load()
	}
	baseLeaks, baseOK, baseAttacks := count(func() (string, bool) {
		b, err := afero.ReadFile(bfs, "a/f")
		return string(b), err == nil
	})
	capLeaks, capOK, capAttacks := count(func() (string, bool) {
		b, err := w.dir.ReadFile(w.ctx, "a/f")
		return string(b), err == nil
	})
	line := fmt.Sprintf("basepath vs capfs under RENAME_EXCHANGE(a, evil -> ../outside), %d reads each: afero BasePathFs leaked the outside file %d times (%d inside reads, %d swaps; static evil/f leak: %v); capfs physical leaked %d times (%d inside reads, %d swaps)",
		n, baseLeaks, baseOK, baseAttacks, staticLeak, capLeaks, capOK, capAttacks)
	t.Log(line)
	fmt.Println(line)
	if baseLeaks == 0 {
		t.Logf("BasePathFs saw no leak in this bounded run (the race is probabilistic; CAPFS_STRESS=1 runs longer)")
	}
	if capLeaks != 0 {
		t.Errorf("capfs physical leaked the outside file %d times", capLeaks)
	}
}
