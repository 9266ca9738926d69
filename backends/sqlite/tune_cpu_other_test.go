//go:build !unix

package sqlite

import "time"

var cpuStart = time.Now()

// cpu stands in for the process's CPU time with wall time where getrusage
// is missing.
func cpu() time.Duration { return time.Since(cpuStart) }
