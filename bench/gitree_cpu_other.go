//go:build !unix

package bench

import (
	"os"
	"time"
)

// processCPU is unknown here: 0.
func processCPU() time.Duration { return 0 }

// childCPU is unknown here: 0.
func childCPU(*os.ProcessState) time.Duration { return 0 }
