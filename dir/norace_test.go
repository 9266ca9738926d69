//go:build !race

package dir_test

// raceEnabled reports a -race build, where allocation counts are not meaningful.
const raceEnabled = false
