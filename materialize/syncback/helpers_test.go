//go:build linux

package syncback_test

import (
	"context"

	"github.com/capfs/capfs/materialize/internal/mattest"
)

var ctx = context.Background()

// The shared fixtures (package mattest).
var (
	fill     = mattest.Fill
	must     = mattest.Must
	checkout = mattest.Checkout
	snapshot = mattest.Snapshot
	sameMap  = mattest.SameMap
	kinds    = mattest.Kinds
)
